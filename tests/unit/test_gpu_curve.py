"""Merging a node's GPU memory curve into the capacity phases by wall-clock time."""

from __future__ import annotations

import pytest

from golive.errors import ConfigError
from golive.evidence.gpu_curve import PhaseSpan, merge_gpu_curve

CURVE = (
    "wall_time,gpu0_used_mib,gpu1_used_mib\n"
    "100.0,1000,900\n"
    "105.0,70000,69000\n"
    "112.0,120000,118000\n"
    "130.0,500,\n"
)
TIMELINE = [PhaseSpan("long_input", 101.0, 110.0), PhaseSpan("concurrency", 110.0, 120.0)]


def test_rows_get_their_phase_and_peaks_are_per_phase_and_gpu() -> None:
    """A node's GPU curve rows get the phase they fell in, and peaks are kept per phase and GPU."""
    merged, peaks = merge_gpu_curve(CURVE, "node1", TIMELINE)
    phases = [line.split(",")[1] for line in merged.splitlines()[1:]]
    assert phases == ["outside", "long_input", "concurrency", "outside"]
    assert peaks["concurrency:gpu0_used_mib"] == 120000
    assert peaks["long_input:gpu1_used_mib"] == 69000
    assert peaks["outside:gpu0_used_mib"] == 1000


def test_a_file_that_is_not_a_curve_is_refused() -> None:
    """A CSV that is not a GPU curve is refused by name."""
    with pytest.raises(ConfigError, match="not a curve"):
        merge_gpu_curve("a,b\n1,2\n", "x.csv", TIMELINE)


def test_real_h200_curve_follows_the_allocations() -> None:
    """Sampled on an H200 at 5 Hz while torch took 20 GiB, then 60 GiB more, then freed it:
    each phase's peak is the memory the allocations held."""
    from pathlib import Path

    data = Path(__file__).parent.parent / "data" / "gpu-h200-x1"
    marks = [
        float(line.split()[0]) for line in (data / "gpu-curve-load.log").read_text().splitlines()
    ]
    timeline = [
        PhaseSpan("first", marks[0] + 0.5, marks[1]),
        PhaseSpan("second", marks[1] + 0.5, marks[2]),
        PhaseSpan("freed", marks[3] + 0.2, marks[3] + 30),
    ]
    _, peaks = merge_gpu_curve((data / "gpu-curve.csv").read_text(), "h200", timeline)
    gib = 1024
    assert peaks["first:gpu0_used_mib"] == pytest.approx(20 * gib + 615, abs=600)
    assert peaks["second:gpu0_used_mib"] == pytest.approx(80 * gib + 615, abs=600)
    assert peaks["freed:gpu0_used_mib"] < 2 * gib
