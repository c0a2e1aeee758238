"""The Prometheus a run queries for DCGM's GPU memory curves, as the user gives it: its URL and
the PromQL label selector that picks the deployment's GPUs, checked when the config is read
(`capacity.prometheus_url`, `capacity.dcgm_selector`)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')
_ANY = ("", ".*", ".+")


def selector_problem(selector: str) -> str | None:
    """Why `selector` cannot pick a deployment's GPUs (None: it can): comma-separated
    `label="value"` matchers (=, !=, =~, !~), at least one of them a positive match on
    something (a blank selector, or only `.*`, matches every GPU in a shared Prometheus)."""
    position, positive = 0, False
    while position < len(selector):
        match = _MATCHER.match(selector, position)
        if match is None:
            return (
                f"{selector!r} is not PromQL label matchers at character {position + 1}; write "
                'e.g. namespace="llm",pod=~"vllm-.*"'
            )
        positive = positive or (match[2] in ("=", "=~") and match[3] not in _ANY)
        position = match.end()
        if position < len(selector):
            if selector[position] != ",":
                return f"{selector!r}: matchers are separated by commas"
            position += 1
    if not positive:
        return (
            f"{selector!r} matches every GPU the Prometheus holds: name this deployment's "
            'GPUs, e.g. namespace="llm",pod=~"vllm-.*"'
        )
    return None


def url_problem(url: str) -> str | None:
    """Why `url` cannot be the Prometheus queried (None: it can)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{url!r} is not an http(s) URL with a host; write it as http://HOST:9090"
    if parts.username or parts.password:
        return "credentials in the URL would be kept in the bundle's config; drop them"
    if parts.query or parts.fragment:
        return f"{url!r}: give the Prometheus base URL, without a query"
    return None
