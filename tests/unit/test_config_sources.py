"""Where a config comes from (file ← GOLIVE_* variables ← flags), `golive init`'s file, and
docs/config.md: a new user finds every key, its default and meaning, and a misspelt variable
is an error rather than a gate silently left at its default."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from golive.cli.main import main
from golive.config_reference import init_yaml, key_docs, reference_markdown
from golive.config_sources import VARIABLES, load_config, scalar_keys
from golive.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("profile", ["generic", "kimi-k3"])
def test_init_file_holds_every_key_at_its_default(tmp_path: Path, profile: str) -> None:
    """The file `golive init` writes loads to exactly golive's defaults (its profile set),
    and names every key the reference lists, each under a comment."""
    path = tmp_path / "golive.yaml"
    path.write_text(init_yaml(profile))
    loaded = load_config(path)
    assert loaded == load_config(None, {"profile": profile})
    text = path.read_text()
    for doc in key_docs():
        leaf = doc.key.split(".")[-1]
        assert f"{leaf}:" in text, doc.key
    data = yaml.safe_load(text)
    assert data["capacity"]["min_sustained_s"] == 600.0
    assert data["profile"] == profile


def test_every_key_has_a_meaning() -> None:
    """A key without a description would leave its line in golive.yaml unexplained."""
    missing = [doc.key for doc in key_docs() if not doc.meaning]
    assert missing == []


def test_docs_config_md_is_current() -> None:
    """docs/config.md is what `golive config reference` prints: regenerate it with
    `golive config reference > docs/config.md` after changing a key."""
    assert (REPO / "docs" / "config.md").read_text() == reference_markdown()


def test_every_scalar_key_has_its_own_variable() -> None:
    """No two keys share a variable, and the names follow GOLIVE_<SECTION>_<KEY>."""
    keys = list(scalar_keys())
    assert len(VARIABLES) == len(keys)
    assert VARIABLES["GOLIVE_TARGET_URL"] == "target.url"
    assert VARIABLES["GOLIVE_CAPACITY_DURATION_S"] == "capacity.duration_s"
    assert VARIABLES["GOLIVE_PROFILE"] == "profile"


def test_file_then_variables_then_flags(tmp_path: Path) -> None:
    """A variable overrides the file; a flag overrides both; a list key splits on commas;
    an empty variable and golive's own non-key variables set nothing."""
    path = tmp_path / "c.yaml"
    path.write_text(
        "target:\n  url: http://127.0.0.1:1\n  model: file\ncapacity:\n  concurrency: 4\n"
    )
    environ = {
        "GOLIVE_TARGET_MODEL": "env",
        "GOLIVE_CAPACITY_CONCURRENCY": "16",
        "GOLIVE_AGENT_CASES": "one_arg.required, no_call",
        "GOLIVE_TARGET_API_KEY_ENV": "",
        "GOLIVE_TARGET_CACHE": "/somewhere",
        "GOLIVE_REGISTRY": "/elsewhere",
        "HOME": "/root",
    }
    config = load_config(path, {"capacity.concurrency": 32, "target.url": None}, environ)
    assert config.target.url == "http://127.0.0.1:1"
    assert config.target.model == "env"
    assert config.capacity.concurrency == 32
    assert config.agent.cases == ("one_arg.required", "no_call")
    assert config.target.api_key_env is None


def test_misspelt_variable_is_refused_with_the_right_name() -> None:
    """GOLIVE_CAPACITY_CONCURENCY would otherwise leave the ramp at its default unseen."""
    with pytest.raises(
        ConfigError, match=r"GOLIVE_CAPACITY_CONCURENCY.*GOLIVE_CAPACITY_CONCURRENCY"
    ):
        load_config(None, None, {"GOLIVE_CAPACITY_CONCURENCY": "3"})


def test_bad_variable_value_names_the_variable_and_field() -> None:
    """A value a variable gave is refused naming where it came from and the fix."""
    with pytest.raises(ConfigError) as info:
        load_config(None, None, {"GOLIVE_TARGET_URL": "localhost:8000"})
    message = str(info.value)
    assert "GOLIVE_TARGET_URL" in message
    assert "target.url" in message
    assert "http://HOST:PORT" in message


async def test_run_takes_its_target_from_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`target.url` in the file (named by GOLIVE_CONFIG) is the target: no --target needed;
    without any of the three the command says how to give one (exit 2, no bundle)."""
    path = tmp_path / "golive.yaml"
    path.write_text("target:\n  url: http://127.0.0.1:9\n")
    monkeypatch.setenv("GOLIVE_CONFIG", str(path))
    code = await asyncio.to_thread(main, ["smoke", "--out", str(tmp_path / "b")])
    assert code == 4  # preflight reached the configured target: nothing listens on port 9
    assert "127.0.0.1:9" in capsys.readouterr().err
    monkeypatch.delenv("GOLIVE_CONFIG")
    code = await asyncio.to_thread(main, ["smoke", "--out", str(tmp_path / "c")])
    assert code == 2
    assert "GOLIVE_TARGET_URL" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_init_and_validate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`golive init` writes the file and never replaces one without --force; `golive config
    validate` accepts it, lists the variables that apply, and refuses a bad case name."""
    path = tmp_path / "conf" / "golive.yaml"
    assert main(["init", "--profile", "kimi-k3", "-o", str(path)]) == 0
    assert "profile: kimi-k3" in path.read_text()
    assert main(["init", "-o", str(path)]) == 2
    assert "--force" in capsys.readouterr().err
    monkeypatch.setenv("GOLIVE_TARGET_URL", "http://127.0.0.1:8000")
    assert main(["config", "validate", str(path)]) == 0
    shown = capsys.readouterr().err
    assert "target.url from GOLIVE_TARGET_URL" in shown
    assert "http://127.0.0.1:8000" in shown
    monkeypatch.setenv("GOLIVE_AGENT_CASES", "no_such_case")
    assert main(["config", "validate", str(path)]) == 2
    assert "no_such_case" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("variable", "named"),
    [
        ("GOLIVE_PROFLE", "GOLIVE_PROFILE"),
        ("GOLIVE_REQUIRED_CONCURRENCY", "GOLIVE_CAPACITY_REQUIRED_CONCURRENCY"),
        ("GOLIVE_DURATION", "GOLIVE_CAPACITY_DURATION_S"),
        ("GOLIVE_ENVIRONMENT_PARALLEL_TP", "environment.parallel is set in the config file"),
        ("GOLIVE_PROGRAMME_NOT_USED", "programme is set in the config file"),
    ],
)
def test_a_variable_meant_as_a_key_is_refused(variable: str, named: str) -> None:
    """A flag's name without its section, a misspelt top-level key, or a structure only the
    file can hold: each would leave a gate at its default if it were ignored."""
    with pytest.raises(ConfigError, match=named):
        load_config(None, None, {variable: "64"})


def test_variables_that_are_not_keys_are_left_alone() -> None:
    """A variable holding an API key (any name with KEY or TOKEN), golive's own for rollback
    hooks, and blank values set nothing and are never refused."""
    environ = {
        "GOLIVE_TARGET_API_KEY": "sk-not-a-name",
        "GOLIVE_API_TOKEN": "x",
        "GOLIVE_ROLLBACK_IMAGE": "img",
        "GOLIVE_TRIGGER": "oom",
        "GOLIVE_AGENT_CRITICAL": " ",
    }
    assert load_config(None, None, environ) == load_config(None)


def test_first_byte_limit_must_be_finite() -> None:
    """`inf` would crash every request; it is refused naming the key."""
    with pytest.raises(ConfigError, match="first_byte_timeout_s"):
        load_config(None, None, {"GOLIVE_CLIENT_FIRST_BYTE_TIMEOUT_S": "inf"})
