"""An engine death must be shown by the answer that found it (issue 27 §2).

The collector records a death (`memory/termination.json`, and after a restart
`memory/termination-after-restart.json`) only when `/health` fails after a lost connection or
a failed request; it saves every `/health` answer it asked in
`requests/capacity-health.jsonl` and names the failed one in the death's record. A death
record with no such failed answer behind it is not believed: otherwise one written into a
bundle over an honest stall (hold) would turn it into a limit at the step below.
"""

from __future__ import annotations

from collections.abc import Mapping

from golive.bundle.layout import TERMINATION, TERMINATION_AFTER_RESTART
from golive.bundle.store import BundleReader, record_streams, stream_records

HEALTH_STREAM = "capacity-health"  # requests/capacity-health.jsonl: every /health asked


NEAR_S = 120.0  # a death is recorded right after the failed answer that shows it


def failed_health(evidence: BundleReader) -> dict[str, float | None]:
    """Request id -> when it was sent, of the saved `/health` answers that were not 2xx (or
    never came)."""
    out: dict[str, float | None] = {}
    for path in record_streams(evidence.root, HEALTH_STREAM):
        for record in stream_records(evidence.root, path):
            if not record.ok:
                out[record.request_id] = record.started_at
    return out


def unshown_deaths(evidence: BundleReader) -> list[str]:
    """Each death record no failed `/health` answer in the bundle shows (empty: every death
    is shown, or none was recorded)."""
    records = [(rel, evidence.json(rel)) for rel in (TERMINATION, TERMINATION_AFTER_RESTART)]
    found = [(rel, r) for rel, r in records if isinstance(r, Mapping)]
    if not found:
        return []
    failed = failed_health(evidence)
    out = []
    named: set[str] = set()
    for rel, record in found:
        rid = str(record.get("health_request_id"))
        sent, at = failed.get(rid), record.get("at")
        near = sent is not None and isinstance(at, int | float) and abs(float(at) - sent) <= NEAR_S
        if rid not in failed or not near or rid in named:
            out.append(
                f"{rel} records an engine death, but no failed /health answer in "
                f"requests/{HEALTH_STREAM}.jsonl shows it (its health_request_id {rid!r}, "
                f"at {at!r})"
            )
        named.add(rid)
    return out
