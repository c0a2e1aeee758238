"""Helpers for the watch tests: an accepted bundle (the demo's run on the real CPU vLLM,
judged from its evidence: ceiling 4), a registry holding an earlier accepted artifact, and
`golive watch` called like a user would."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import aiohttp

from golive.checks.cache.judge import cache_labels
from golive.cli.main import main
from golive.operate.rollback import Signature, register
from golive.orchestration.rederive import require_rederived
from golive.results import Outcome
from tests.helpers.fakes.vllm import FakeState
from tests.helpers.sections import Edit, programme_bundle


async def accepted_bundle(root: Path, edit: Edit | None = None) -> Path:
    """A programme bundle of the demo's recorded evidence, judged as golive run judges it
    (observe-with-limits, ceiling 4, every open item owned): what a watch may be run against."""
    return await programme_bundle(root, edit)


# the engine cache label vLLM 0.32's CPU platform sets from the host: on a CPU with
# AVX512-BF16 (where the demo was recorded) it resets the mamba SSM cache to float32,
# elsewhere it stays 'auto' (vllm/platforms/cpu.py); the Qwen model has no mamba layers
HOST_LABEL = "mamba_ssm_cache_dtype"


async def accepted_here(root: Path, metrics_url: str) -> Path:
    """accepted_bundle as if the demo had been recorded on this host: its scrapes and chain
    state the engine's host-set cache label as the live server at `metrics_url` does (on
    another kind of host the watch refuses the server as another deployment)."""
    async with aiohttp.ClientSession() as session, session.get(metrics_url) as response:
        live = cache_labels(await response.text()).get(HOST_LABEL)
    assert live is not None, f"{metrics_url} states no {HOST_LABEL}"

    def same_host_label(bundle: Path) -> None:
        label = re.compile(rf'{HOST_LABEL}="[^"]*"')
        for scrape in (bundle / "metrics").glob("*.prom"):
            text = scrape.read_text()
            scrape.write_text(label.sub(f'{HOST_LABEL}="{live}"', text))
        pattern = re.compile(rf'{HOST_LABEL}": "[^"]*"')
        # the chain's inputs keep the env scrape's labels (golive checks they agree), and
        # the chain the reports read states them too
        for name in ("chain-inputs.json", "chain.json"):
            chain = bundle / "environment" / name
            chain.write_text(pattern.sub(f'{HOST_LABEL}": "{live}"', chain.read_text()))

    return await accepted_bundle(root, same_host_label)


def _earlier_image(root: Path) -> None:
    """The earlier deployment's container: another image, its launch command and variables."""
    path = root / "environment/container.json"
    container = json.loads(path.read_text())
    container.update(
        image="vllm/vllm-openai:v0.31.0@sha256:" + "ab" * 32,
        image_digests=["sha256:" + "ab" * 32],
        serve_command=["vllm", "serve", "qwen", "--enable-prefix-caching"],
        environment={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_TOKEN": "never-copied"},
        environment_source="serving process 4141",
    )
    path.write_text(json.dumps(container, indent=2))


async def registry_with_previous(tmp_path: Path) -> Path:
    """A registry whose last accepted artifact is an earlier deployment of the same model."""
    previous = await accepted_bundle(tmp_path / "previous", _earlier_image)
    signature = Signature(
        reviewer="Ana",
        signed_at="2026-11-01T10:00:00+00:00",
        outcome=Outcome.OBSERVE_WITH_LIMITS,
        verdict_outcome=Outcome.OBSERVE_WITH_LIMITS,
        bundle_digest="sha256:" + "cd" * 32,
        override_reason=None,
    )
    registry = tmp_path / "registry"
    register(previous, signature, registry, require_rederived)
    return registry


async def golive_watch(
    url: str, accepted: Path, out: Path, *extra: str
) -> tuple[int, dict[str, Any]]:
    argv = ["watch", "--target", url, "--accepted", str(accepted), "--out", str(out), "--json"]
    code = await asyncio.to_thread(main, [*argv, *extra])
    return code, json.loads((out / "watch/summary.json").read_text())


def rules(summary: dict[str, Any]) -> list[str]:
    return [t["rule"] for t in summary["triggers"]]


# the demo's accepted deployment as /v1/models names it: a fake serving it is watched
ACCEPTED_MODEL = "qwen2.5-coder-0.5b"
ACCEPTED_ROOT = "/root/.cache/golive/target/models/qwen-1d9614638d18"
QUICK = ("--interval", "0.5", "--tool-every", "1000", "--cache-every", "1000")


GOLDEN_START = Path(__file__).parents[1] / "data/golden-demo/metrics/cache-00-start.prom"


def accepted_cache_labels() -> dict[str, str]:
    """The demo's engine cache settings, as its first cache scrape states them."""
    return cache_labels(GOLDEN_START.read_text())


def as_accepted() -> FakeState:
    """A fake engine serving as the demo's accepted deployment (name, model, vLLM version and
    the cache settings its /metrics states)."""
    return FakeState(model=ACCEPTED_MODEL, root=ACCEPTED_ROOT, cache_config=accepted_cache_labels())


def quick_watch(
    url: str, accepted: Path, out: Path, seconds: float, *extra: str
) -> asyncio.Future[tuple[int, dict[str, Any]]]:
    """`golive watch` at half-second intervals without the tool and cache probes, started."""
    return asyncio.ensure_future(
        golive_watch(url, accepted, out, "--duration", str(seconds), *QUICK, *extra)
    )


async def watching(out: Path, intervals: int = 2) -> None:
    """Until the watch has observed its first `intervals` intervals (its baselines read)."""
    observations = out / "watch/observations.jsonl"
    for _ in range(200):
        if observations.is_file() and len(observations.read_text().splitlines()) >= intervals:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the watch observed nothing in 10 s")
