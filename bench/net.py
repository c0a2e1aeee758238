"""Small process and port helpers for the benchmark (loopback only)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from pathlib import Path

from golive.evidence.sampling import process_tree


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(
    port: int, proc: subprocess.Popen[bytes] | None = None, timeout_s: float = 20
) -> None:
    """Wait until 127.0.0.1:port accepts connections, failing early if `proc` exits."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout_s:g} s")


def tree_pss_mb(root: int) -> float:
    """Proportional set size of a process and all its descendants, in MB: shared pages are
    split between the processes that share them, so forked workers are not counted twice."""
    total_kb = 0
    for pid in process_tree(root):
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total_kb += int(line.split()[1])
                    break
    return total_kb / 1024


class PeakMemory(threading.Thread):
    """Samples a process tree's PSS four times a second until stopped; keeps the peak."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.peak_mb = 0.0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.25):
            self.peak_mb = max(self.peak_mb, tree_pss_mb(self.root))

    def stop(self) -> float:
        self._done.set()
        self.join()
        return self.peak_mb
