"""Section bundles made from real evidence: each of the five sections of `golive demo`'s
recorded run (tests/data/golden-demo, the real CPU vLLM) in a bundle of its own, holding that
section's evidence files and judged from them by the section's own judges, as `golive env`,
`smoke`, `capacity`, `cache` and `agent` judge what they collect. `golive decide` re-derives
each; `decide --combine` combines them."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from golive.bundle.layout import CACHE_STEPS, EFFECTIVE_CONFIG, LEDGER_SENT
from golive.bundle.store import BundleReader
from golive.checks.context import CheckContext
from golive.checks.ledger import count_records
from golive.checks.owners import EVIDENCE_JUDGES, Saved
from golive.config import GoliveConfig
from golive.config_sources import load_config
from golive.orchestration.pipeline import judge
from golive.profiles import load_profile
from golive.results import CheckResult
from golive.verdict.scope import PROGRAMME, Scope

GOLDEN = Path(__file__).parents[1] / "data/golden-demo"
SECTIONS = ("env", "smoke", "capacity", "cache", "agent")
# Each section's evidence in a programme bundle (glob patterns under the bundle root).
SECTION_FILES = {
    "env": (
        "environment/chain-inputs.json",
        "environment/chain.json",
        "environment/container.json",
        "environment/startup.log",
        "requests/env.jsonl",
        "metrics/env.prom",
    ),
    "smoke": ("requests/smoke*.jsonl*", "metrics/smoke-*"),
    "capacity": (
        "requests/capacity-*",
        "requests/answer-probes.jsonl",
        "metrics/capacity-*",
        "metrics/answer-probes.json",
        "memory/*",
        "environment/startup.log",
    ),
    "cache": ("requests/cache.jsonl", "metrics/cache-*"),
    "agent": ("requests/agent*", "metrics/agent-*"),
}

# Everything else a programme bundle holds besides what golive writes at the end (the server
# log is left out: its errors would be attributed again to the checks in flight).
PROGRAMME_FILES = (
    *{p for patterns in SECTION_FILES.values() for p in patterns},
    "metrics/ledger.json",
)

Edit = Callable[[Path], None]


def golden_config(settings: Mapping[str, Any] | None = None) -> GoliveConfig:
    """The demo's effective config without its (long gone) target URL, so no client is opened
    and nothing is sent; `settings` are dotted overrides (`{"target.model": ...}`)."""
    config = load_config(GOLDEN / EFFECTIVE_CONFIG, settings)
    return config.model_copy(update={"target": config.target.model_copy(update={"url": None})})


async def _rejudged(
    out: Path,
    command: str,
    scope: Scope,
    patterns: Iterable[str],
    edit: Edit | None,
    settings: Mapping[str, Any] | None,
) -> Path:
    """A sealed bundle at `out` holding the demo's files matching `patterns`, judged from them
    by every judge whose evidence is there (for a section: that section's judges)."""
    config = golden_config(settings)
    sections = None if scope == PROGRAMME else set(scope)

    async def programme(ctx: CheckContext) -> list[CheckResult]:
        root = ctx.bundle.root
        for pattern in sorted(set(patterns)):
            for source in sorted(GOLDEN.glob(pattern)):
                dest = root / source.relative_to(GOLDEN)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, dest)
        _identity(root)
        if edit is not None:
            edit(root)
        if sections is not None:  # what this section's own client would have counted
            ctx.bundle.write_json(LEDGER_SENT, {"sent": count_records(root)[0]})
        reader = BundleReader(root)
        saved = Saved(load_profile(config.profile), config)
        checks: list[CheckResult] = []
        for owner in EVIDENCE_JUDGES:
            if owner.present(root) and (
                sections is None or owner.section is None or owner.section in sections
            ):
                checks += owner.judge(reader, saved)
        return checks

    await judge(config, out, command, programme, scope, require_target=False)
    return out


def _identity(root: Path) -> None:
    """What every section asks when it starts (`requests/identity.jsonl`): the demo's own
    /version and /v1/models answers, as its env section saved them."""
    asked = [
        json.dumps({**record, "label": record["label"].removeprefix("env-")})
        for line in (GOLDEN / "requests/env.jsonl").read_text().splitlines()
        if (record := json.loads(line))["label"] in ("env-version", "env-models")
    ]
    assert len(asked) == 2
    (root / "requests").mkdir(exist_ok=True)
    (root / "requests/identity.jsonl").write_text("\n".join(asked) + "\n")


PINNED_IMAGE = "registry.example/vllm-cpu:v0.32.0@sha256:" + "5e" * 32


def pinned_image(root: Path) -> None:
    """The demo's deployment as a production one is shipped: served from a digest-pinned
    image, its runtime variables read from the serving process (what a rollback artifact
    needs; the demo's own venv has no image and its probe predates the process read)."""
    path = root / "environment/container.json"
    container = json.loads(path.read_text())
    container.update(
        image=PINNED_IMAGE,
        image_digests=[PINNED_IMAGE.split("@")[1]],
        environment_source="serving process 4242",
    )
    path.write_text(json.dumps(container, indent=2))


def edits(*each: Edit) -> Edit:
    """Several edits of the copied evidence, in order."""

    def apply(root: Path) -> None:
        for edit in each:
            edit(root)

    return apply


async def section_bundle(
    out: Path,
    section: str,
    edit: Edit | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Path:
    """A sealed `section` bundle at `out` from the demo's evidence, as `golive SECTION` makes
    it; `edit` changes the copied evidence (files under the new bundle) before it is judged."""
    return await _rejudged(out, section, (section,), SECTION_FILES[section], edit, settings)


async def programme_bundle(
    out: Path, edit: Edit | None = None, settings: Mapping[str, Any] | None = None
) -> Path:
    """A sealed programme bundle at `out` from the demo's whole evidence, as `golive run`
    makes it."""
    return await _rejudged(out, "run", PROGRAMME, PROGRAMME_FILES, edit, settings)


async def all_sections(root: Path, edits: Mapping[str, Edit] | None = None) -> list[Path]:
    """The five sections under `root`, one bundle each, in the programme's order."""
    edits = edits or {}
    return [await section_bundle(root / s, s, edits.get(s)) for s in SECTIONS]


_REUSE_COUNTERS = re.compile(
    r'^(vllm:(?:prefix_cache_hits_total|prompt_tokens_cached_total|prompt_tokens_cached_by_source_total|prompt_tokens_by_source_total\{[^}]*source="local_cache_hit")[^ ]*) (\S+)$',
    re.MULTILINE,
)


def freeze_reuse_counters(root: Path) -> None:
    """Every cache scrape says what the start scrape said for the engine's reuse counters:
    an engine that reused nothing (or a forger who froze its counters)."""
    metrics = root / "metrics"
    start = (metrics / "cache-00-start.prom").read_text()
    frozen = {m.group(1): m.group(2) for m in _REUSE_COUNTERS.finditer(start)}
    for path in sorted(metrics.glob("cache-*-after-*.prom")):
        text = path.read_text()
        path.write_text(
            _REUSE_COUNTERS.sub(
                lambda m: f"{m.group(1)} {frozen.get(m.group(1), m.group(2))}", text
            )
        )


def no_cache_reuse(root: Path) -> None:
    """A cache section from an engine that reused nothing: its scrapes' reuse counters frozen
    and its steps saying so, consistently."""
    freeze_reuse_counters(root)
    steps = root / CACHE_STEPS
    rows = [json.loads(line) for line in steps.read_text().splitlines() if line.strip()]
    for row in rows:
        for key in ("d_hits", "d_prompt_tokens_cached"):
            if row.get(key) is not None:
                row[key] = 0.0
    steps.write_text("".join(json.dumps(r) + "\n" for r in rows))
