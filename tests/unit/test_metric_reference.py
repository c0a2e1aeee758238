"""Issue 29 §7: the bundle keeps the metric names and HELP texts golive relied on, from the
scrape itself, with the vLLM version and its documentation page. Scrapes are real: vLLM 0.32
on the CPU target and vLLM 0.24 on two H200s."""

from __future__ import annotations

import json
from pathlib import Path

from golive.evidence.metric_reference import (
    RELIED_ON,
    bundle_scrapes,
    docs_url,
    metric_reference,
)
from tests.helpers.sections import programme_bundle

DATA = Path(__file__).parents[1] / "data"
CPU = DATA / "vllm-cpu-0.32.0/metrics-after-load.prom"
GPU = DATA / "vllm-gpu-0.24-h200x2/metrics-after-cold.prom"


def _rows(text: str, version: str = "0.32.0") -> dict[str, dict[str, object]]:
    reference = metric_reference([("metrics/x.prom", text)], {"vllm_version": version})
    return {r["metric"]: r for r in reference["metrics"]}


def test_the_engines_own_words_for_each_metric() -> None:
    """Each metric golive reads, with the HELP line and type exactly as the scrape has them."""
    for path in (CPU, GPU):
        rows = _rows(path.read_text())
        running = rows["num_requests_running"]
        assert running["exposed"] == "vllm:num_requests_running"
        assert running["help"] == "Number of requests in model execution batches."
        assert running["type"] == "gauge"
        assert running["scrape"] == "metrics/x.prom"
        success = rows["request_success"]
        assert success["exposed"] == "vllm:request_success_total"
        assert success["type"] == "counter"
        assert success["help"] == "Count of successfully processed requests."
        assert rows["http_requests"]["help"] == (
            "Total number of requests by method, status and handler."
        )
    assert len(rows) == len(RELIED_ON)


def test_an_older_name_is_kept_as_the_engine_exposed_it() -> None:
    """An engine that still says `gpu_cache_usage_perc`, with its own HELP text: the reference
    names that spelling and that text, not today's."""
    old = (
        CPU.read_text()
        .replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
        .replace("KV-cache usage. 1 means", "GPU KV-cache usage. 1 means")
    )
    row = _rows(old)["kv_cache_usage_perc"]
    assert row["exposed"] == "vllm:gpu_cache_usage_perc"
    assert row["help"] == "GPU KV-cache usage. 1 means 100 percent usage."


def test_a_metric_no_scrape_exposed_is_absent_not_described() -> None:
    """Without the HTTP instrumentator's series the row says it was absent and carries no
    HELP text of golive's own."""
    text = "\n".join(x for x in CPU.read_text().splitlines() if "http_requests" not in x)
    row = _rows(text)["http_requests"]
    assert row["exposed"] is None
    assert "help" not in row
    assert row["absent"] == "no scrape in this bundle exposed it"


def test_the_documentation_page_follows_the_version() -> None:
    """The metrics page of the version that served; none when the version is unknown."""
    assert docs_url("0.32.0") == "https://docs.vllm.ai/en/v0.32.0/usage/metrics.html"
    assert docs_url("0.24.0+cu130") == "https://docs.vllm.ai/en/v0.24.0/usage/metrics.html"
    assert docs_url("0.8.5") == "https://docs.vllm.ai/en/v0.8.5/serving/metrics.html"
    assert docs_url(None) is None
    assert docs_url("v0.8.5") == "https://docs.vllm.ai/en/v0.8.5/serving/metrics.html"
    assert docs_url("0.11.1rc3.dev45+gabc123") is None  # a development build: no page
    assert docs_url("0.8.5.post1") == "https://docs.vllm.ai/en/v0.8.5.post1/serving/metrics.html"
    assert docs_url("0.10.1.1") == "https://docs.vllm.ai/en/v0.10.1.1/usage/metrics.html"


def test_help_escapes_are_undone_once() -> None:
    """An escaped backslash before an n stays a backslash and an n; an escaped n is a
    newline: the exposition's escapes undone in one pass."""
    text = (
        "# HELP vllm:num_requests_running a\\\\nb c\\nd\n# TYPE vllm:num_requests_running gauge\n"
    )
    assert _rows(text)["num_requests_running"]["help"] == "a\\nb c\nd"


def test_a_combined_bundles_parts_are_read(tmp_path: Path) -> None:
    """`decide --combine` keeps the sections' scrapes under parts/: they are the reference."""
    scrape = tmp_path / "parts/smoke/metrics/smoke-after.prom"
    scrape.parent.mkdir(parents=True)
    scrape.write_text(CPU.read_text())
    (found,) = list(bundle_scrapes(tmp_path))
    assert found[0] == "parts/smoke/metrics/smoke-after.prom"


async def test_a_sealed_bundle_carries_its_reference_and_the_report_shows_it(
    tmp_path: Path,
) -> None:
    """The demo's programme bundle (vLLM 0.32.0 on the CPU): `metrics/reference.json` is
    sealed with it, from its own scrapes, and report.md has the table."""
    root = await programme_bundle(tmp_path / "b")
    reference = json.loads((root / "metrics/reference.json").read_text())
    assert reference["vllm_version"] == "0.32.0"
    assert reference["documentation"] == "https://docs.vllm.ai/en/v0.32.0/usage/metrics.html"
    rows = {r["metric"]: r for r in reference["metrics"]}
    scrape = root / str(rows["prefix_cache_hits"]["scrape"])
    assert f"# HELP vllm:prefix_cache_hits_total {rows['prefix_cache_hits']['help']}" in (
        scrape.read_text()
    )
    assert "metrics/reference.json" in (root / "manifest-sha256.txt").read_text()
    report = (root / "report.md").read_text()
    assert "## Metrics relied on (vLLM 0.32.0; https://docs.vllm.ai/en/v0.32.0/usage/metrics" in (
        report
    )
    assert "| num_requests_running | `vllm:num_requests_running` | Number of requests" in report
