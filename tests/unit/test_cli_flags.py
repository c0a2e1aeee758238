"""Every flag of a judging command either sets a config key (with the key's type, and the
value given is the value the run uses) or names one of this invocation's inputs."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from golive.cli.config_flags import ConfigFlag, config_overrides
from golive.cli.parser import build_parser
from golive.config import GoliveConfig
from golive.config_sources import config_field, load_config

JUDGING = ("smoke", "env", "capacity", "cache", "agent", "run", "watch")
# Flags that are not settings: what this one invocation reads, writes or attaches to.
INPUTS = {
    "--config": "the config file itself",
    "--out": "where this run's bundle goes",
    "--json": "how this run prints",
    "--junit": "an extra output file",
    "--log": "the server log of this deployment",
    "--nvidia-smi-xml": "node evidence files",
    "--host-info": "node evidence files",
    "--container-info": "a container evidence file",
    "--image": "the image reference, recorded as given on the command line",
    "--sample": "a workload file",
    "--target-pid": "a process on this machine",
    "--gpu-curve": "node curve files",
    "--ray": "the cluster the load leaves from",
    "--workers": "the processes of this machine the load leaves from",
    "--launch": "a server command this run starts",
    "--accepted": "the bundle the watch keeps the deployment inside",
    "--registry": "where accepted bundles are registered",
    # env collect: gathering facts on a node, not a judging setting
    "--host": "env collect mode",
    "--container": "env collect mode",
    "--output": "env collect output",
    "--python": "env collect: vLLM's interpreter",
    "--node": "env collect: node name",
    "--expect-nodes": "--ray: the cluster's declared size",
    "--ray-timeout": "--ray: collection timeout",
    "--ray-container": "--ray: also the containers",
    "--k8s-namespace": "the pods to read",
    "--selector": "the pods to read",
    "--k8s-container": "the pods to read",
    "--kubeconfig": "the cluster's credentials",
    "--chain-ray": "the vLLM Ray cluster the chain is read from",
    "--sample-gpus": "--chain-ray: also its GPU nodes' memory",
    "--help": "argparse",
    # guardrails: what it writes from an accepted bundle (--selector above: its labels)
    "--format": "guardrails: the form of the file written",
    "--runbook-url": "guardrails: where the runbook the alerts link is served",
    "--trust-key": "the public key a bundle's manifest is checked against",
    "--cache-floor": "guardrails: the production workload's own prefix-cache hit ratio",
}
# env collect --gpu-curve's own sampling length (the env command has no watch/capacity keys)
ENV_COLLECT = {"--gpu-curve", "--duration"}
TEXT = {
    "target.url": "http://127.0.0.1:9",
    "target.metrics_url": "http://127.0.0.1:9/metrics",
    "target.engine_url": "http://127.0.0.1:10",
    "target.api_key_env": "GOLIVE_TEST_KEY",
    "target.model": "served-name",
    "profile": "kimi-k3",
    "not_k3": "a fine-tune, not K3",
    "policy": "policy.yaml",
    "sign_key": "key.pem",
    "agent.schemas_file": "tools.yaml",
    "agent.cases": "one_arg.required",
    "watch.on_rollback": "echo rollback",
    "watch.critical_probe": "no_call",
    "capacity.prometheus_url": "http://127.0.0.1:9091",
    "capacity.dcgm_selector": 'pod=~"vllm-.*"',
}


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _flags(command: str) -> tuple[ConfigFlag, ...]:
    return tuple(_subparsers()[command].get_default("config_flags") or ())


def _value(key: str) -> tuple[str, Any]:
    """A valid value for `key` that is not its default: as typed, and as the config holds it."""
    if key in TEXT:
        return TEXT[key], (TEXT[key],) if key == "agent.cases" else TEXT[key]
    field = config_field(key)
    default = field.get_default(call_default_factory=True)
    if isinstance(default, float) or "float" in str(field.annotation):
        number = 0.5 if default is None or not 0.1 <= default <= 2 else default / 2
        return str(number), number
    number = 33 if default is None else int(default) + 1
    return str(number), number


# keys that go in pairs: the flag test gives the other one too
COMPANION = {
    "capacity.prometheus_url": ["--dcgm-selector", 'namespace="llm"'],
    "capacity.dcgm_selector": ["--prometheus-url", "http://127.0.0.1:9090"],
}


def _get(config: GoliveConfig, key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        node = getattr(node, part)
    return node


@pytest.mark.parametrize("command", JUDGING)
def test_every_flag_is_a_config_key_or_an_input(command: str) -> None:
    """A new flag that is neither a config key nor a named input fails here."""
    parser = _subparsers()[command]
    keyed = {f.flag for f in _flags(command)}
    unclassified = [
        option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--")
        and option not in keyed
        and option not in INPUTS
        and not (command == "env" and option in ENV_COLLECT)
    ]
    assert unclassified == []


CASES = [(c, f) for c in JUDGING for f in _flags(c)]


@pytest.mark.parametrize(("command", "flag"), CASES, ids=[f"{c} {f.flag}" for c, f in CASES])
def test_a_flag_sets_its_config_key(command: str, flag: ConfigFlag) -> None:
    """Given on the command line, the value is what the loaded config holds at the key."""
    typed, expected = _value(flag.key)
    argv = [command, flag.flag, typed]
    if flag.flag != "--target" and command not in ("env",):
        argv += ["--target", "http://127.0.0.1:9"]
    if command == "watch":
        argv += ["--accepted", "bundle"]
    argv += COMPANION.get(flag.key, [])
    args = build_parser().parse_args(argv)
    config = load_config(None, config_overrides(args))
    assert _get(config, flag.key) == expected
    assert _get(GoliveConfig(), flag.key) != expected  # the flag changed something


def test_an_invalid_value_is_a_usage_error_naming_the_key() -> None:
    """--warm-repeats 0 was silently taken as 1; the config's bound now refuses it."""
    args = build_parser().parse_args(
        ["cache", "--target", "http://127.0.0.1:9", "--warm-repeats", "0"]
    )
    with pytest.raises(
        Exception, match=r"cache\.warm_repeats: Input should be greater than or equal to 1"
    ):
        load_config(None, config_overrides(args))


@pytest.mark.parametrize("command", sorted(_subparsers()))
def test_every_command_prints_its_help(command: str) -> None:
    """`golive COMMAND --help` renders (a "%" in a key's description once made it a
    traceback for run and capacity), and names each config key its flags set."""
    text = _subparsers()[command].format_help()
    for flag in _flags(command):
        assert flag.key in " ".join(text.split()), (command, flag.flag)
