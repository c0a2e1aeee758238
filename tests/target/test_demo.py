"""`golive demo`, the README's first command, end to end on the real local target: the whole
programme, the verdict, the sign-off record, the report (rendered in headless Chromium) and
`golive decide` agreeing with the sealed verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.browser import dom, screenshot

SECTIONS = ("environment.", "startup.", "smoke.", "capacity.", "cache.", "agent.")


def test_demo_runs_the_whole_programme_and_stops_the_local_vllm(tmp_path: Path) -> None:
    """golive demo runs the whole programme on the local vLLM, holds on the Agent cases the model
    fails in every run (tool_choice=auto writes calls into content: not a bounded defect), and
    stops the server."""
    golive = Path(sys.executable).with_name("golive")
    out = tmp_path / "demo"
    junit = tmp_path / "junit.xml"
    run = subprocess.run(
        [str(golive), "demo", "--out", str(out), "--json", "--junit", str(junit)],
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    verdict = json.loads(run.stdout)
    checks = {c["id"]: c for c in verdict["checks"]}
    # Qwen + hermes: the core path passes; tool_choice=auto writes calls into content in
    # every run: more than the 20% a known, bounded defect may fail ("Non-critical, bounded
    # Agent defect: observe with limits" does not apply) -> hold, naming the cases.
    assert verdict["outcome"] == "hold", verdict["rules_fired"]
    assert run.returncode == 11, run.stderr[-3000:]
    rules = {r["rule"] for r in verdict["rules_fired"]}
    assert "agent.one_arg.auto" in next(
        r["checks"] for r in verdict["rules_fired"] if r["rule"] == "agent-protocol-failure"
    )
    assert verdict["scope"] == "programme"
    # every limit, warning and gap has an owner from the demo's sign-off config
    assert verdict["actions"]
    assert all(a["owner"] != "unassigned" for a in verdict["actions"]), verdict["actions"]
    # Concurrency 4 on a 2-core CPU engine sits at the throughput knee (one CI run measured
    # a 1.18x gain from 2 to 4 against the 1.2x threshold; others passed): when the ramp
    # finds the knee, the verdict also caps concurrency, and must say where.
    # The CPU machine has no GPU host: those gaps are named (non-critical-unproven), and a
    # warn (e.g. a slow start in the log) is watched, never passed over.
    # the demo runs each Agent case once to be quick: fewer than a programme decision needs,
    # which its verdict says (issue 29 §2)
    assert "agent.coverage" in next(
        r["checks"] for r in verdict["rules_fired"] if r["rule"] == "programme-incomplete"
    )
    assert "a demo may run fewer" in checks["agent.coverage"]["summary"]
    assert checks["smoke.coverage"]["status"] == "pass"
    assert checks["cache.coverage"]["status"] == "pass"
    assert rules <= {
        "programme-incomplete",
        "agent-protocol-failure",
        "capacity-limited",
        "non-critical-unproven",
        "warnings-observed",
    }
    assert "environment.host_driver" in next(
        r["checks"] for r in verdict["rules_fired"] if r["rule"] == "non-critical-unproven"
    )
    if "capacity-limited" in rules:
        assert 1 <= verdict["limits"]["max_concurrency"] < 4
    assert "not bounded" in checks["agent.one_arg.auto"]["summary"]
    for prefix in SECTIONS:
        assert any(cid.startswith(prefix) for cid in checks), prefix
    # no critical check skipped without its reason: only the parts the demo leaves out (its one
    # run per Agent case, its sustained window of under a minute), each named by
    # programme-incomplete
    skipped = [c["id"] for c in checks.values() if c["status"] == "skipped" and c["critical"]]
    assert sorted(skipped) == ["agent.coverage", "capacity.coverage"], skipped
    assert "a sustained window of 600 s" in checks["capacity.coverage"]["summary"]
    assert checks["agent.coverage"]["measurements"]["skip_reason"] == "left-out"
    assert checks["environment.vllm_version"]["summary"] == "vLLM 0.32.0, agreed by 3 source(s)"
    assert checks["environment.host_driver"]["status"] == "no_data"  # no GPU here, said so
    assert checks["smoke.text_stream"]["status"] == "pass"
    assert checks["cache.prefix_reuse"]["status"] == "pass", checks["cache.prefix_reuse"]
    # the proof's warm prefix, sent again after the sustained window: kept or evicted, measured
    # by the engine's own counters, with the window's counters beside it (issue 29 §4)
    after = checks["cache.after_load"]
    assert after["status"] in ("pass", "warn"), after
    assert after["measurements"]["probe_reused_tokens"] is not None
    assert after["measurements"]["window_prefix_queries"] > 0
    assert "since the last warm request" in after["summary"]
    assert checks["agent.one_arg.required"]["status"] == "pass"
    assert checks["capacity.model_load"]["measurements"]["peak_load_rss_mib"] > 500
    # sign-off: ticked from evidence, items without evidence say so
    record = json.loads((out / "signoff.json").read_text())
    states = {i["number"]: i["state"] for i in record["items"]}
    assert states[11] == "ticked"  # cold prefix-cache results saved
    # the generic profile requires no CUDA 13 and no R580 driver: a CPU torch passing its
    # CUDA check confirms neither
    assert states[3] == states[4] == "not-asserted"
    assert states[17] == "missing"  # not signed yet
    assert "[x] 11." in (out / "signoff.md").read_text()
    # re-derived offline, it agrees; the bundle is intact; JUnit for CI
    assert subprocess.run([str(golive), "decide", str(out)], check=False).returncode == 0
    assert subprocess.run([str(golive), "verify", str(out)], check=False).returncode == 0
    assert "<testsuites" in junit.read_text()
    # the server it started is gone
    pid_line = next(line for line in run.stderr.splitlines() if "starting vLLM (pid" in line)
    pid = int(pid_line.split("(pid ")[1].split(")")[0])
    assert not Path(f"/proc/{pid}").exists()
    _report_renders(out / "report.html", tmp_path / "report.png")


def _report_renders(page: Path, png: Path) -> None:
    """Self-contained (no remote assets), and in a real browser the plots are drawn."""
    html = page.read_text()
    for remote in ('src="http', "src='http", 'href="http', "url(http", "<link", "<script"):
        assert remote not in html, remote
    rendered = dom(page)
    for section in ("why", "chain", "memory", "latency", "cache", "agent", "checks", "signoff"):
        assert f'id="{section}"' in rendered, section
    assert rendered.count("<svg") >= 6  # memory, KV, queue, latency, throughput, cache, agent
    assert "Pass rate per case" in rendered
    screenshot(page, png)
    assert png.stat().st_size > 50_000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
