"""Text a tool printed for a terminal is kept without its ANSI control sequences: the host's
`nvidia-smi topo -m` (the real capture of two H200s, as a terminal shows it underlined or
coloured, or behind cursor moves) and NCCL's lines behind Ray's coloured prefixes, both
through `evidence.terminal.without_ansi`."""

from __future__ import annotations

from pathlib import Path

import pytest

from golive.evidence import collect
from golive.evidence.facts import HostInfo, read_facts
from golive.evidence.nccl_log import clean
from golive.evidence.terminal import without_ansi

DATA = Path(__file__).parents[1] / "data"
TOPOLOGY = read_facts(DATA / "gpu-h200-x2/host-smi.json", HostInfo).topology or ""
ASSERTED = "GPU0\t X \tNV18\t0-31"  # a row of the capture, read as printed

TABLE = [
    pytest.param(TOPOLOGY, id="plain: as captured"),
    pytest.param(  # underlined headers, a bold green link: colour and style (SGR)
        TOPOLOGY.replace("\tGPU0\tGPU1\t", "\t\x1b[4mGPU0\x1b[0m\t\x1b[4mGPU1\x1b[0m\t", 1).replace(
            "NV18", "\x1b[1;32mNV18\x1b[0m"
        ),
        id="colour",
    ),
    pytest.param(  # cursor hidden, a line erased, the cursor moved up, shown again
        "\x1b[?25l" + TOPOLOGY.replace("\n\nLegend", "\n\x1b[2K\x1b[1A\nLegend") + "\x1b[?25h",
        id="cursor",
    ),
]


@pytest.mark.parametrize("printed", TABLE)
def test_topology_text_is_kept_without_its_escape_sequences(printed: str) -> None:
    """Whatever sequences nvidia-smi printed around its topology matrix, the text is the
    capture's, character for character."""
    assert TOPOLOGY.startswith("\tGPU0\tGPU1\t")
    assert ASSERTED in TOPOLOGY
    assert without_ansi(printed) == TOPOLOGY


@pytest.mark.parametrize("printed", TABLE)
def test_the_host_collector_saves_the_topology_without_escape_sequences(
    printed: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`golive env collect` on a host: the `nvidia-smi topo -m` it saves is plain text (no
    colour, no cursor sequence), whatever the terminal settings made nvidia-smi print."""

    def tool(argv: list[str], stdin: str | None = None) -> tuple[str | None, str | None]:
        if argv == ["nvidia-smi", "topo", "-m"]:
            return printed, None
        return None, f"{argv[0]} not run in this test"

    monkeypatch.setattr(collect, "run_tool", tool)
    monkeypatch.setattr(collect, "_from_nvml", lambda node, errors: None)
    monkeypatch.setattr(collect, "PROC_VERSION", tmp_path / "no-driver")
    host = collect.collect_host("vm")
    assert host.topology == TOPOLOGY
    assert "\x1b" not in host.model_dump_json()


def test_nccl_lines_lose_the_same_sequences() -> None:
    """An NCCL line behind Ray's coloured prefix and a line erase reads as NCCL printed it
    (and Ray's `[repeated Nx across cluster]` note goes too)."""
    line = "vm:618:618 [0] NCCL INFO NET/IB : No device found."
    printed = (
        "\x1b[2K\x1b[36m(RayWorkerWrapper pid=618, ip=192.0.2.2)\x1b[0m "
        + line
        + "\x1b[32m [repeated 3x across cluster]\x1b[0m\r"
    )
    assert clean(printed) == "(RayWorkerWrapper pid=618, ip=192.0.2.2) " + line
