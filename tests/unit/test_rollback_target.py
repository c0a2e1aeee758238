"""Issue 29 §7: the rollback target is an accepted artifact that holds what a rollback
needs. An entry registered before that rule, or written by hand, without an image digest or
the serving process's own runtime variables is never the target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from golive.cli.main import main
from golive.operate.rollback import artifact_gaps, rollback_target

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
