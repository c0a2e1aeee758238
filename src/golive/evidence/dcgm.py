"""GPU memory over the pressure phases from the DCGM exporter, through the Prometheus that
scrapes it (`capacity.prometheus_url`): no sampler to start on each node, no CSV to copy.

Two range queries over the run's span — `DCGM_FI_DEV_FB_USED` and `DCGM_FI_DEV_FB_FREE`
(MiB) — restricted by `capacity.dcgm_selector` to the deployment's own GPUs (a shared
Prometheus holds every team's); each node's answer becomes a curve in the format
`golive env collect --gpu-curve` writes, merged by phase like one. Pure here; the query is
sent by the capacity collector.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

USED = "DCGM_FI_DEV_FB_USED"
FREE = "DCGM_FI_DEV_FB_FREE"
STEP_S = 2.0
MAX_POINTS = 10_000
_HOST_LABELS = ("Hostname", "hostname", "node", "instance")
_SAFE = re.compile(r"[^A-Za-z0-9._-]")  # a label value as part of a bundle file name


def query_path(base_url: str, metric: str, selector: str, start: float, end: float) -> str:
    """The `/api/v1/query_range` URL of one metric over [start, end]."""
    query = f"{metric}{{{selector}}}"
    step = max(STEP_S, (end - start) / MAX_POINTS)  # Prometheus answers 11,000 points at most
    params = urlencode(
        {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
    )
    return f"{base_url.rstrip('/')}/api/v1/query_range?{params}"


def series_of(text: str, source: str) -> list[dict[str, Any]]:
    """The `matrix` result of a Prometheus answer; ValueError naming what is wrong."""
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{source}: not JSON ({exc})") from exc
    if not isinstance(body, Mapping) or body.get("status") != "success":
        error = body.get("error") if isinstance(body, Mapping) else None
        raise ValueError(f"{source}: the query failed ({error or 'no success status'})")
    data = body.get("data")
    if not isinstance(data, Mapping) or data.get("resultType") != "matrix":
        raise ValueError(f"{source}: not a range-query answer (resultType matrix)")
    result = data.get("result")
    return [dict(s) for s in result if isinstance(s, Mapping)] if isinstance(result, list) else []


def _key(series: Mapping[str, Any]) -> tuple[str, str]:
    """(node, GPU) of a series, both safe as parts of a file name."""
    labels = series.get("metric")
    labels = labels if isinstance(labels, Mapping) else {}
    host = next((str(labels[k]) for k in _HOST_LABELS if labels.get(k)), "unknown")
    gpu = str(labels.get("gpu", labels.get("UUID", "0")))
    return _SAFE.sub("_", host), _SAFE.sub("_", gpu)


def _points(series: Mapping[str, Any], into: dict[float, float]) -> dict[float, float]:
    """The series' samples added to `into`, the larger value where two series of one GPU
    (a pod restarted under a new name, two scrape jobs) have the same instant."""
    values = series.get("values")
    for pair in values if isinstance(values, list) else []:
        try:
            at, value = float(pair[0]), float(pair[1])
        except (TypeError, ValueError, IndexError, KeyError):
            continue
        if math.isfinite(value):
            into[at] = max(value, into.get(at, value))
    return into


def node_curves(used: list[dict[str, Any]], free: list[dict[str, Any]]) -> dict[str, str]:
    """One curve per node (`wall_time,gpu<N>_used_mib,gpu<N>_total_mib,...`), from the used
    and free series of its GPUs; total = used + free at the same instant."""
    free_by: dict[tuple[str, str], dict[float, float]] = {}
    for series in free:
        _points(series, free_by.setdefault(_key(series), {}))
    used_by: dict[tuple[str, str], dict[float, float]] = {}
    for series in used:
        _points(series, used_by.setdefault(_key(series), {}))
    nodes: dict[str, dict[str, dict[float, tuple[float, float | None]]]] = {}
    for (host, gpu), points in used_by.items():
        spare = free_by.get((host, gpu), {})
        nodes.setdefault(host, {})[gpu] = {
            at: (value, None if at not in spare else value + spare[at])
            for at, value in points.items()
        }
    curves: dict[str, str] = {}
    for host, gpus in sorted(nodes.items()):
        names = sorted(gpus, key=lambda g: (len(g), g))
        fields = ["wall_time"]
        for gpu in names:
            fields += [f"gpu{gpu}_used_mib", f"gpu{gpu}_total_mib"]
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=fields)
        writer.writeheader()
        for at in sorted({at for points in gpus.values() for at in points}):
            row: dict[str, Any] = {"wall_time": at}
            for gpu in names:
                used_mib, total = gpus[gpu].get(at, (None, None))
                row[f"gpu{gpu}_used_mib"] = "" if used_mib is None else used_mib
                row[f"gpu{gpu}_total_mib"] = "" if total is None else total
            writer.writerow(row)
        curves[host] = out.getvalue()
    return curves
