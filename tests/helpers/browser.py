"""Headless Debian Chromium for the report tests: a screenshot and the rendered DOM of a
local file. The flags keep it off this machine's closed network."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise RuntimeError("chromium is not installed: `make browser` (Debian package chromium)")
    return path


def _run(page: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="golive-chromium-") as profile:
        return subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", *extra, page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def screenshot(page: Path, png: Path, width: int = 1200, height: int = 4000) -> None:
    done = _run(page, f"--screenshot={png}", f"--window-size={width},{height}")
    if not png.is_file():
        raise RuntimeError(f"chromium made no screenshot: {done.stderr[-2000:]}")


def dom(page: Path) -> str:
    return _run(page, "--dump-dom").stdout
