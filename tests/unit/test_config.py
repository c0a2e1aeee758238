"""Config loading: strict keys, errors that name file, field and fix; profiles as data."""

from __future__ import annotations

from pathlib import Path

import pytest

from golive.config_sources import load_config
from golive.errors import ConfigError
from golive.profiles import load_profile


def test_yaml_then_cli_overrides(tmp_path: Path) -> None:
    """CLI flags override the file; untouched keys keep the file's values."""
    path = tmp_path / "c.yaml"
    path.write_text("target:\n  url: http://127.0.0.1:1/\n  model: a\nsmoke:\n  max_tokens: 9\n")
    config = load_config(path, {"target.model": "b", "target.api_key_env": None})
    assert config.target.url == "http://127.0.0.1:1"
    assert config.target.model == "b"
    assert config.smoke.max_tokens == 9


def test_unknown_key_names_file_field_and_allowed_keys(tmp_path: Path) -> None:
    """A typo is an error naming the file, the dotted field and the keys allowed there."""
    path = tmp_path / "c.yaml"
    path.write_text("smoke:\n  max_tokns: 9\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert str(path) in message
    assert "smoke.max_tokns" in message
    assert "max_tokens" in message


def test_bad_value_says_what_was_given(tmp_path: Path) -> None:
    """A URL without a scheme is refused naming the key and the fix."""
    path = tmp_path / "c.yaml"
    path.write_text("target:\n  url: localhost:8000\n")
    with pytest.raises(ConfigError, match=r"target\.url.*http://HOST:PORT"):
        load_config(path)


def test_api_key_env_refuses_a_key_value() -> None:
    """Passing something that looks like a key instead of a variable name is refused."""
    with pytest.raises(ConfigError, match="NAME of an environment variable"):
        load_config(None, {"target.api_key_env": "sk-abc.def/ghi"})


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    """An unreadable config file and one that is not a mapping are refused, saying which."""
    with pytest.raises(ConfigError, match="cannot be read"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(bad)


def test_kimi_profile_holds_the_recipe_facts() -> None:
    """The kimi-k3 profile carries the image, version, CUDA, driver and parser facts."""
    chain = load_profile("kimi-k3").chain
    assert chain.image == "vllm/vllm-openai:kimi-k3"
    assert chain.min_vllm == "0.27.1"
    assert (chain.cuda_major, chain.min_driver_major) == (13, 580)
    assert (chain.tool_parser, chain.reasoning_parser) == ("kimi_k3", "kimi_k3")
    assert chain.prefix_caching_required
    assert chain.min_gpus == 8
    assert load_profile("kimi-k3").cache.min_shared_prefix_tokens >= 16384


def test_unknown_profile_lists_the_bundled_ones() -> None:
    """An unknown profile name lists the bundled profiles."""
    with pytest.raises(ConfigError, match="generic, kimi-k3"):
        load_profile("kimi-k9")
