"""Values as vLLM prints them in its startup log, read back: the non-default args (a Python
dict repr) and the engine config line (`key=value, ...`)."""

from __future__ import annotations

import ast
import re
from typing import Any


def parse_python_dict(text: str) -> dict[str, Any]:
    """vLLM prints non-default args as a Python dict repr; objects inside become strings."""
    try:
        value = ast.literal_eval(text)
        if isinstance(value, dict):
            return {str(k): v for k, v in value.items()}
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        pass
    pairs = re.findall(r"'(\w+)': ('[^']*'|\"[^\"]*\"|True|False|None|-?[\d.]+|\[[^\]]*\])", text)
    out: dict[str, Any] = {}
    for key, raw in pairs:
        try:
            out[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key] = raw
    return out


def parse_config_pairs(text: str) -> dict[str, str]:
    """Top-level `key=value` pairs of the engine config line (nested values kept as text)."""
    out: dict[str, str] = {}
    depth, start, quote = 0, 0, ""
    for index, char in enumerate(text + ","):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            key, sep, value = text[start:index].strip().partition("=")
            if sep and key.isidentifier():
                out[key] = value.strip().strip("'\"")
            start = index + 1
    return out
