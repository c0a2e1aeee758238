"""Issue 30 §5: an API key pasted where `--api-key-env` wants a variable's NAME is refused
without being printed back (argv, logs and errors never carry a key)."""

from __future__ import annotations

import contextlib
import io

import pytest

from golive.cli.main import main
from golive.config_sources import load_config
from golive.errors import ConfigError

PASTED = [
    "sk-proj-Abc123def456ghi789jkl",  # an OpenAI-style key
    "sk_live_0123456789abcdefABCDEF",  # underscores only: passes a letters/digits/_ test
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "A" * 65,
]


@pytest.mark.parametrize("pasted", PASTED, ids=["sk-dash", "sk-underscore", "hf", "too-long"])
def test_a_pasted_key_is_refused_and_never_shown(pasted: str) -> None:
    """The error names the key and the fix, never the value."""
    with pytest.raises(ConfigError) as raised:
        load_config(None, {"target.api_key_env": pasted})
    message = str(raised.value)
    assert "target.api_key_env" in message
    assert "NAME of an environment variable" in message
    assert pasted not in message
    assert pasted[:12] not in message


def test_the_cli_refuses_it_without_printing_it() -> None:
    """`golive smoke --api-key-env <key>` exits 2 (usage) and neither stream holds the key."""
    pasted = PASTED[1]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["smoke", "--target", "http://127.0.0.1:9", "--api-key-env", pasted])
    assert code == 2
    assert pasted[:12] not in out.getvalue() + err.getvalue()
    assert "api_key_env" in err.getvalue()


# keys that are letters, digits and _ only pass for a name: refused later as unset, unprinted
NAMELIKE = [
    "gsk_ABCdef0123456789ghiJKLmno",  # Groq
    "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUv",  # Google
    "a3f9" * 16,  # openssl rand -hex 32, starting with a letter
]


@pytest.mark.parametrize("pasted", NAMELIKE, ids=["groq", "google", "hex"])
def test_a_key_that_passes_for_a_name_is_never_printed(
    pasted: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No variable of that name is set: the error says so without printing it."""
    monkeypatch.delenv(pasted, raising=False)
    code, text = _main_text("smoke", "--target", "http://127.0.0.1:9", "--api-key-env", pasted)
    assert code == 2
    assert "unset or empty" in text
    assert pasted[:10] not in text


def test_a_conventional_name_is_named() -> None:
    """An unset `MY_VLLM_KEY` is named, so the user knows what to export."""
    code, text = _main_text(
        "smoke", "--target", "http://127.0.0.1:9", "--api-key-env", "GOLIVE_SURELY_UNSET_KEY"
    )
    assert code == 2
    assert "GOLIVE_SURELY_UNSET_KEY" in text


def _main_text(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue() + err.getvalue()


@pytest.mark.parametrize("name", ["VLLM_API_KEY", "SK_TOKEN", "openai_api_key", "K", "hf_token"])
def test_names_stay_names(name: str) -> None:
    """Ordinary variable names (upper or lower case, SK_ included) are accepted."""
    assert load_config(None, {"target.api_key_env": name}).target.api_key_env == name
