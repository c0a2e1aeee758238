"""Issue 29 §7: the rollback target is an accepted artifact that holds what a rollback
needs. An entry registered before that rule, or written by hand, without an image digest or
the serving process's own runtime variables is never the target."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from golive.bundle.layout import CONTAINER
from golive.cli.main import main
from golive.operate.rollback import RUNTIME_PREFIXES, artifact_gaps, identity, rollback_target

DIGEST = "sha256:" + "ab" * 32


def _entry(registry: Path, when: str, **change: Any) -> None:
    entry = {
        "bundle": f"/bundles/{when}",
        "accepted_at": f"2026-11-{when}T10:00:00+00:00",
        "outcome": "observe-with-limits",
        "verdict_outcome": "observe-with-limits",
        "reviewer": "Ana",
        "image": f"registry.example/vllm:0.32@{DIGEST}",
        "image_digest": DIGEST,
        "runtime_source": "serving process 4242",
        "launch_config_digest": "sha256:" + "cd" * 32,
        **change,
    }
    registry.mkdir(exist_ok=True)
    (registry / f"{when}.json").write_text(json.dumps(entry))


def test_the_newest_reachable_entry_is_the_target(tmp_path: Path) -> None:
    """Newer entries lacking the server's variables, an exact digest or a launch config are
    passed over for the newest complete one."""
    registry = tmp_path / "registry"
    _entry(registry, "01")
    _entry(registry, "02", runtime_source="probe")
    _entry(registry, "03", image_digest="latest")
    _entry(registry, "04", launch_config_digest=None)
    target = rollback_target(registry)
    assert target is not None
    assert target["bundle"] == "/bundles/01"


def test_what_each_gap_says() -> None:
    """Each missing piece is named with how to give it."""
    gaps = artifact_gaps({"runtime_source": "probe"})
    assert len(gaps) == 3
    assert gaps[0].startswith("the image digest (")
    assert "--image NAME@sha256:" in gaps[0]
    assert gaps[1].startswith("the launch configuration (")
    assert "read from the probe" in gaps[2]
    assert "not recorded" in artifact_gaps({})[2]


def test_rollback_show_names_what_it_passed_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`golive rollback show` says which accepted entries a rollback cannot reach and why;
    an entry kept with Docker's RepoDigest (`repo@sha256:…`, as registered before) is
    reachable."""
    registry = tmp_path / "registry"
    _entry(registry, "01", image_digest=f"registry.example/vllm@{DIGEST}")
    _entry(registry, "02", runtime_source="probe")
    assert main(["rollback", "show", "--registry", str(registry)]) == 0
    out, err = capsys.readouterr()
    assert "last accepted: /bundles/01" in out
    assert "not a rollback target: /bundles/02 lacks the serving process's runtime variables" in err


GOLDEN = Path(__file__).parents[1] / "data" / "golden-demo"
PROBE = Path(__file__).parents[2] / "src/golive/evidence/scripts/container_probe.py"


def _probe_prefixes() -> tuple[str, ...]:
    """The container probe's PREFIXES, read from the script (it runs under other Pythons and
    is not imported)."""
    tree = ast.parse(PROBE.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == [
            "PREFIXES"
        ]:
            found = ast.literal_eval(node.value)
            assert isinstance(found, tuple)
            return tuple(str(x) for x in found)
    raise AssertionError("no PREFIXES in the container probe")


@pytest.mark.tampers_bundle
def test_every_variable_the_probe_reads_is_kept_for_a_rollback(tmp_path: Path) -> None:
    """Issue 29 §7: the serving process's allocator setting, visible devices and CUDA arch
    list (read by the container probe) are in the rollback artifact's variables and its
    launch digest: a relaunch with another allocator setting is another launch."""
    assert all(p.startswith(RUNTIME_PREFIXES) for p in _probe_prefixes())
    root = tmp_path / "b"
    shutil.copytree(GOLDEN, root)
    container = json.loads((root / CONTAINER).read_text())
    before = identity(root)
    added = {
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "NVIDIA_VISIBLE_DEVICES": "0,1",
        "TORCH_CUDA_ARCH_LIST": "9.0",
    }
    container["environment"] = {**container.get("environment", {}), **added}
    (root / CONTAINER).write_text(json.dumps(container))
    after = identity(root)
    assert added.items() <= after.runtime_variables.items()
    assert after.launch_config_digest != before.launch_config_digest
