"""`golive demo`, the README's first command, end to end on the real local target."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.target


def test_demo_starts_judges_and_stops_the_local_vllm(tmp_path: Path) -> None:
    """The demo prints a go-live verdict, leaves a verified bundle with the server log, and
    stops the server it started (its PID is gone afterwards)."""
    golive = Path(sys.executable).with_name("golive")
    out = tmp_path / "demo"
    run = subprocess.run(
        [str(golive), "demo", "--out", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    verdict = json.loads(run.stdout)
    assert verdict["outcome"] == "go-live"
    checks = {c["id"]: c for c in verdict["checks"]}
    smoke = {cid: c["status"] for cid, c in checks.items() if cid.startswith("smoke.")}
    assert smoke.pop("smoke.multimodal") == "skipped"  # the demo's application sends no images
    assert set(smoke.values()) == {"pass"}, smoke
    assert len(smoke) == 11
    # The chain from the server's own log, live API and engine venv: three sources agree.
    assert checks["environment.vllm_version"]["summary"] == "vLLM 0.32.0, agreed by 3 source(s)"
    assert checks["startup.parsers"]["measurements"]["tool_call_parser"] == "hermes"
    # No GPU here: host evidence is missing, and says so instead of passing.
    assert checks["environment.host_driver"]["status"] == "no_data"
    assert "## Version chain" in (out / "report.md").read_text()
    assert "version 0.32.0" in (out / "environment/startup.log").read_text()
    assert subprocess.run([str(golive), "verify", str(out)], check=False).returncode == 0
    pid_line = next(line for line in run.stderr.splitlines() if "starting vLLM (pid" in line)
    pid = int(pid_line.split("(pid ")[1].split(")")[0])
    assert not Path(f"/proc/{pid}").exists()
