"""`golive env` end to end: node evidence files, bad inputs, and the real local vLLM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.store import verify
from golive.cli.main import main
from golive.results import Outcome

DATA = Path(__file__).parent.parent / "data"
XML = DATA / "gpu-h200-x2/nvidia-smi-q.xml"


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["env", *args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def _checks(verdict: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in verdict["checks"]}


def test_mixed_driver_nodes_are_rebuild(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two node XMLs, one edited to R575: rebuild, both nodes named, chain.json written."""
    node_a, node_b = tmp_path / "node-a.xml", tmp_path / "node-b.xml"
    node_a.write_text(XML.read_text())
    node_b.write_text(
        XML.read_text()
        .replace(
            "<driver_version>580.159.04</driver_version>",
            "<driver_version>575.57.08</driver_version>",
        )
        .replace("<cuda_version>13.0</cuda_version>", "<cuda_version>12.9</cuda_version>")
    )
    out = tmp_path / "b"
    code, verdict = _run(
        [
            "--profile",
            "kimi-k3",
            "--nvidia-smi-xml",
            str(node_a),
            "--nvidia-smi-xml",
            str(node_b),
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == Outcome.REBUILD.exit_code == 13
    driver = _checks(verdict)["environment.host_driver"]
    assert driver["status"] == "fail"
    assert "node-a: R580" in driver["summary"]
    assert "node-b: R575" in driver["summary"]
    chain = json.loads((out / "environment/chain.json").read_text())
    assert [h["driver"] for h in chain["hosts"]] == ["580.159.04", "575.57.08"]
    assert (out / "environment/nvidia-smi-node-b.xml").exists()
    assert "## Version chain" in (out / "report.md").read_text()
    assert verify(out).ok


def test_real_h200_evidence_under_generic_passes_each_link_it_can_prove(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Host and container JSON collected on real H200 machines, plus a clean startup log:
    the links pass, but a version known from one source and a startup warning are named."""
    code, verdict = _run(
        [
            "--host-info",
            str(DATA / "gpu-h200-x2/host-nvml.json"),
            "--container-info",
            str(DATA / "gpu-h200-x2/container.json"),
            "--log",
            str(DATA / "vllm-cpu-0.32/startup.log"),
            "--out",
            str(tmp_path / "b"),
        ],
        capsys,
    )
    checks = _checks(verdict)
    assert checks["environment.gpus"]["summary"].startswith("2 x NVIDIA H200")
    assert checks["environment.driver_runtime"]["status"] == "pass"
    # The container image on the device has no vLLM: the version comes from the log alone,
    # which nothing corroborates.
    assert checks["environment.vllm_version"]["status"] == "warn"
    assert "one source only" in checks["environment.vllm_version"]["summary"]
    assert code == Outcome.OBSERVE_WITH_LIMITS.exit_code, verdict["rules_fired"]
    fired = {r["rule"]: r["checks"] for r in verdict["rules_fired"]}
    # the log's slow-start warning is watched too, not passed over
    assert fired == {
        "warnings-observed": ["environment.vllm_version", "startup.log"],
        "section-only": [],
    }
    assert verdict["scope"] == ["env"]


@pytest.mark.parametrize(
    ("flag", "content", "phrase"),
    [
        ("--nvidia-smi-xml", '{"not": "xml"}', "not nvidia-smi XML"),
        ("--host-info", '{"kind": "container"}', "holds 'container' evidence"),
        ("--container-info", "{broken", "not JSON"),
        ("--host-info", '{"kind": "host", "node": "n", "source": "nvml", "gpus": "many"}', "gpus"),
    ],
)
def test_bad_evidence_files_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, content: str, phrase: str
) -> None:
    """A wrong or damaged evidence file exits 2 naming the file and what is wrong."""
    path = tmp_path / "evidence.json"
    path.write_text(content)
    assert main(["env", flag, str(path), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert str(path) in err.replace("\n", "")
    assert phrase in err
    assert not (tmp_path / "b").exists()


def test_missing_log_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A --log path that does not exist is a usage error naming the file."""
    assert main(["env", "--log", str(tmp_path / "nope.log")]) == 2
    assert "nope.log: cannot be read" in capsys.readouterr().err


def test_collect_host_without_gpus_records_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a machine without NVIDIA GPUs the collector still writes facts, with the reasons."""
    out = tmp_path / "host.json"
    assert main(["env", "collect", "--host", "-o", str(out), "--node", "cpu-box"]) == 0
    facts = json.loads(out.read_text())
    assert facts["node"] == "cpu-box"
    if facts["gpus"]:
        pytest.skip("this machine has NVIDIA GPUs")
    assert facts["source"] == "none"
    assert any("nvidia-smi" in e for e in facts["errors"])
    # Judged, this host is missing evidence, never a pass.
    code, verdict = _run(
        ["--profile", "kimi-k3", "--host-info", str(out), "--out", str(tmp_path / "b")], capsys
    )
    assert _checks(verdict)["environment.host_driver"]["status"] == "no_data"
    assert code != 0
