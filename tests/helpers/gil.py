"""A thread that keeps golive's own process busy, for the tests of its client monitor and of
golive.client_headroom: the starved client those must tell apart from a slow server."""

from __future__ import annotations

import threading


def hold_the_gil(stop: threading.Event) -> None:
    """Run pure Python until `stop` is set: it holds the GIL between switch intervals, so the
    event loop of the same process waits its turn behind it. Run it as a thread's target."""
    while not stop.is_set():
        sum(range(1000))
