"""Issue 29 §4: cache under load. After the sustained window the cache proof's warm prefix is
sent once more, alone between two scrapes; kept is a pass, evicted (or partly) a warn naming
the KV usage at that moment, the window's prefix-cache queries and hits, how long the prefix
was idle and — for a hybrid cache with no retention interval — the retention setting. Built
on the recorded CPU demo's cache proof (block 128, warm requests reused 512 tokens), with the
probe's record and scrapes added as a new run writes them."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from golive.bundle.layout import CAPACITY_SUSTAINED, EFFECTIVE_CONFIG
from golive.bundle.store import BundleReader
from golive.checks.cache import judge_cache
from golive.checks.cache.after_load import (
    AFTER_SCRAPE,
    BEFORE_SCRAPE,
    CHECK,
    PROBE_LABEL,
    PROBE_QUESTION,
    RECORDS,
    CacheSetting,
    judge_after_load,
    probe_body,
)
from golive.checks.cache.rules import CacheStep
from golive.config import CacheConfig
from golive.errors import RecordLineError
from golive.profiles import load_profile
from golive.results import CheckResult, Status
from golive.verdict.scope import skipped_by_config

GOLDEN = Path(__file__).parent.parent / "data/demo-sealed-2026-12-01"
LAST_STEP = "metrics/cache-11-after-cold-1.prom"
pytestmark = pytest.mark.tampers_bundle  # copies of the demo with a probe added

FULL = CacheSetting(128, "none", "0", hybrid=False)
HYBRID = CacheSetting(128, "align", None, hybrid=True)


def _bump(text: str, **more: float) -> str:
    """A scrape's text with counters (by their exposed name) moved on by `more`."""
    for name, step in more.items():
        pattern = re.compile(rf"^(vllm:{name}\{{[^}}]*\}}) ([0-9.e+]+)$", re.M)

        def moved(m: re.Match[str], by: float = step) -> str:
            return f"{m[1]} {float(m[2]) + by}"

        text, n = pattern.subn(moved, text)
        assert n == 1, name
    return text


def _demo(tmp_path: Path, key: bool = True) -> Path:
    """The demo's bundle as a new run writes it: the sustained window names its scrapes, and
    the effective config names `cache.after_load_probe` (unless `key` is False: sealed
    before the rule)."""
    root = tmp_path / "b"
    shutil.copytree(GOLDEN, root)
    sustained = json.loads((root / CAPACITY_SUSTAINED).read_text())
    (root / CAPACITY_SUSTAINED).write_text(json.dumps({**sustained, "scrapes": "capacity-c4"}))
    if key:
        path = root / EFFECTIVE_CONFIG
        config = yaml.safe_load(path.read_text())
        config["cache"]["after_load_probe"] = True
        path.write_text(yaml.safe_dump(config))
    return root


def _probe(
    root: Path, reused: float, status: int = 200, system: str | None = None, idle: float = 300.0
) -> None:
    """Append the probe's record (the first warm request's, asked again `idle` s after the
    last warm one) and its two scrapes (the counters moved by `reused` tokens)."""
    records = [json.loads(line) for line in (root / RECORDS).read_text().splitlines()]
    warm = next(r for r in records if r["label"] == "cache-warm-0")
    last = max(r["started_at"] for r in records if r["label"].startswith("cache-warm-"))
    body = probe_body(BundleReader(root).records(RECORDS))
    assert body is not None
    if system is not None:
        body["messages"][0]["content"] = system
    probe = {
        **warm,
        "request_id": "golive-test-cache-after-load",
        "label": PROBE_LABEL,
        "started_at": last + idle,
        "request": body,
        "http_status": status,
    }
    if status != 200:
        probe["failure"] = {"kind": "http_status", "message": f"HTTP {status}"}
    with (root / RECORDS).open("a") as out:
        out.write(json.dumps(probe) + "\n")
    before = (root / LAST_STEP).read_text()
    after = _bump(
        before,
        prefix_cache_queries_total=638.0,
        prefix_cache_hits_total=reused,
        prompt_tokens_cached_total=reused,
    )
    (root / f"metrics/{BEFORE_SCRAPE}.prom").write_text(before)
    (root / f"metrics/{AFTER_SCRAPE}.prom").write_text(after)


def _judged(root: Path, setting: CacheSetting = FULL, due: bool | None = True) -> list[CheckResult]:
    rows = BundleReader(root).jsonl("metrics/cache-steps.jsonl")
    steps = {row["step"]: CacheStep.from_json(row) for row in rows}
    return judge_after_load(BundleReader(root), steps, setting, due)


@pytest.mark.parametrize(
    ("reused", "setting", "status", "state", "named"),
    [
        (512.0, FULL, Status.PASS, "kept", "512 of 512 tokens reused again"),
        (384.0, FULL, Status.PASS, "kept", "384 of 512"),  # one block short: block-granular
        (256.0, FULL, Status.WARN, "partly-evicted", "was partly evicted by the load"),
        (0.0, FULL, Status.WARN, "evicted", "--gpu-memory-utilization"),
        (0.0, HYBRID, Status.WARN, "evicted", "--prefix-cache-retention-interval"),
        (
            0.0,
            CacheSetting(128, "align", "512", hybrid=True),
            Status.WARN,
            "evicted",
            "retention interval 512: the load still evicted it",
        ),
    ],
    ids=["kept", "kept-a-block-short", "partly", "evicted", "hybrid-no-interval", "hybrid-set"],
)
def test_kept_or_evicted(
    tmp_path: Path,
    reused: float,
    setting: CacheSetting,
    status: Status,
    state: str,
    named: str,
) -> None:
    """The probe's own counter deltas against the warm requests' reuse decide; the summary
    gives the idle time, the KV usage at the probe and the window's counters."""
    root = _demo(tmp_path)
    _probe(root, reused)
    [result] = _judged(root, setting)
    assert (result.status, result.critical) == (status, False)
    assert result.measurements["state"] == state
    assert named in result.summary
    assert "idle 300 s since the last warm request" in result.summary
    assert "KV usage 0.0% at it, " in result.summary  # and the window's peak beside it
    assert result.measurements["kv_cache_usage_peak_window"] is not None
    # the demo's c4 window, by its own scrapes: both counters named, with the hit rate
    assert re.search(
        r"the sustained window: \d+ prefix-cache queries, \d+ hits \(\d+%\)", result.summary
    )
    assert result.measurements["probe_reused_tokens"] == reused


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        ("failed", "was not answered"),
        ("other-prefix", "did not re-send the warm requests' prefix"),
        ("no-scrape", "counters around the probe are missing"),
        ("missing", "was not probed again after the sustained window"),
        ("no-record", "the probe's record (cache-after-load) is missing"),
    ],
)
def test_not_measured_is_no_data(tmp_path: Path, edit: str, named: str) -> None:
    """A probe that failed, asked another prefix, lost a scrape or its record, or never ran
    (while due) is `no_data`, never a pass."""
    root = _demo(tmp_path)
    if edit != "missing":
        _probe(
            root,
            512.0,
            status=500 if edit == "failed" else 200,
            system="[another] prefix" if edit == "other-prefix" else None,
        )
    if edit == "no-scrape":
        (root / f"metrics/{AFTER_SCRAPE}.prom").unlink()
    if edit == "no-record":  # a reviewer deleting an evicted probe's answer gains nothing
        lines = (root / RECORDS).read_text().splitlines()
        (root / RECORDS).write_text("\n".join(lines[:-1]) + "\n")
    [result] = _judged(root)
    assert result.status is Status.NO_DATA
    assert named in result.summary


def test_not_due_without_the_rule_or_without_a_window(tmp_path: Path) -> None:
    """No probe and not due (a bundle sealed before the rule, or one with no sustained
    window) has no `cache.after_load` at all; turned off by the config it is `skipped`, said
    so in the verdict; a probe that is there is judged anyway."""
    root = _demo(tmp_path)
    assert _judged(root, due=None) == []
    [off] = _judged(root, due=False)
    assert off.status is Status.SKIPPED
    assert skipped_by_config(off)
    assert "cache.after_load_probe is false" in off.summary
    (root / CAPACITY_SUSTAINED).unlink()
    assert _judged(root) == []
    _probe(root, 0.0)
    [result] = _judged(root, due=None)
    assert result.status is Status.WARN
    assert "the sustained window's prefix-cache counters unknown" in result.summary


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        ("other-traffic", "moved for more than the probe: 1638 prefix-cache queries for its 638"),
        ("inflated", "the counters say 50000 tokens reused by a probe of 638"),
        ("before-the-window", "it was not taken after the window"),
        ("unreadable-record", "the probe's evidence cannot be read"),
    ],
)
def test_counters_that_are_not_the_probe_alone_after_the_window(
    tmp_path: Path, edit: str, named: str
) -> None:
    """A hostile review's cases: counters moved by other traffic (or inflated to 50,000 reused
    tokens), scrapes from before the window's end standing in for the probe's, or a record
    that cannot be parsed: `no_data` naming why, never "kept". The record that cannot be
    parsed is in the stream the proof reads too: the proof's judge names it (file, line and
    field) rather than read the stream around it."""
    root = _demo(tmp_path)
    _probe(root, 0.0)
    before = (root / f"metrics/{BEFORE_SCRAPE}.prom").read_text()
    if edit == "other-traffic":
        after = _bump(before, prefix_cache_queries_total=1638.0, prefix_cache_hits_total=512.0)
        after = _bump(after, prompt_tokens_cached_total=512.0)
        (root / f"metrics/{AFTER_SCRAPE}.prom").write_text(after)
    if edit == "inflated":
        after = _bump(before, prefix_cache_queries_total=638.0, prefix_cache_hits_total=50000.0)
        after = _bump(after, prompt_tokens_cached_total=50000.0)
        (root / f"metrics/{AFTER_SCRAPE}.prom").write_text(after)
    if edit == "before-the-window":  # the window's own first scrape, and 638 queries on
        window = (root / "metrics/capacity-c4-before.prom").read_text()
        (root / f"metrics/{BEFORE_SCRAPE}.prom").write_text(window)
        after = _bump(window, prefix_cache_queries_total=638.0, prefix_cache_hits_total=512.0)
        after = _bump(after, prompt_tokens_cached_total=512.0)
        (root / f"metrics/{AFTER_SCRAPE}.prom").write_text(after)
    if edit == "unreadable-record":
        lines = (root / RECORDS).read_text().splitlines()
        probe = json.loads(lines[-1])
        probe["timings_ms"]["chunks"] = [None]
        (root / RECORDS).write_text("\n".join([*lines[:-1], json.dumps(probe)]) + "\n")
    [result] = _judged(root)
    assert result.status is Status.NO_DATA, result.summary
    assert named in result.summary
    if edit == "unreadable-record":
        where = r"requests/cache\.jsonl line 12: .* - at `\$\.timings_ms\.chunks\[0\]`"
        with pytest.raises(RecordLineError, match=where):
            judge_cache(BundleReader(root), load_profile("generic"), None, CacheConfig())


def test_judge_cache_adds_the_check_whatever_the_saved_config_names(tmp_path: Path) -> None:
    """Through the family judge (what `golive decide` runs): the demo sealed before the rule
    (its config names no `cache.after_load_probe`) is judged by it all the same: no probe
    after its sustained window is `no_data`, as it is with the key; with an evicting probe,
    a warn."""
    profile = load_profile("generic")
    old = judge_cache(
        BundleReader(_demo(tmp_path / "old", key=False)), profile, None, CacheConfig()
    )
    assert {c.id: c.status for c in old}[CHECK] is Status.NO_DATA
    root = _demo(tmp_path / "new")
    judged = {c.id: c for c in judge_cache(BundleReader(root), profile, None, CacheConfig())}
    assert judged[CHECK].status is Status.NO_DATA
    _probe(root, 0.0)
    judged = {c.id: c for c in judge_cache(BundleReader(root), profile, None, CacheConfig())}
    assert judged[CHECK].status is Status.WARN
    assert judged["cache.prefix_reuse"].status is Status.PASS  # the proof itself stands
    off = judge_cache(BundleReader(root), profile, None, CacheConfig(after_load_probe=False))
    assert {c.id: c.status for c in off}[CHECK] is Status.WARN  # evidence there is judged


def test_the_probe_repeats_the_warm_prefix_with_another_question() -> None:
    """The probe's body is the first warm request's, system prompt and tools unchanged, with
    its own question (so the shared prefix, and only it, can be reused)."""
    records = BundleReader(GOLDEN).records(RECORDS)
    warm = next(r for r in records if r.label == "cache-warm-0").request
    body = probe_body(records)
    assert body is not None
    assert body["messages"][:-1] == warm["messages"][:-1]
    assert body["tools"] == warm["tools"]
    assert body["messages"][-1] == {"role": "user", "content": PROBE_QUESTION}
    assert warm["messages"][-1]["content"] != PROBE_QUESTION
    assert probe_body([r for r in records if r.label != "cache-warm-0"]) is None
