"""Text a tool printed for a terminal, read as text: `nvidia-smi topo -m` underlines its
headers, Ray colours its log prefixes and its `[repeated Nx across cluster]` notes, and a
progress line may move the cursor or hide it. Pure."""

from __future__ import annotations

import re

# an ANSI control sequence (CSI): ESC [, its parameters, one final letter: colour and style
# (`ESC[1;31m`), cursor moves and line erases (`ESC[2A`, `ESC[2K`), private modes (`ESC[?25l`)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def without_ansi(text: str) -> str:
    """`text` without its ANSI control sequences (colour, style, cursor), the rest as printed."""
    return _ANSI.sub("", text)
