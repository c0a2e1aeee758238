"""The key search of the secrets test can fail: it is not a test that passes on anything."""

from __future__ import annotations

import base64

from tests.helpers.secret_search import encodings


def test_encodings_find_a_key_inside_encoded_headers() -> None:
    """The search itself can fail: it finds the key in a base64 Basic-auth header."""
    key = "sk-canary-" + "ab12" * 8
    header = base64.b64encode(f"user:{key}".encode())
    assert any(needle in header for needle in encodings(key).values())
    assert not any(needle in header for needle in encodings("sk-other-" + "cd34" * 8).values())
