"""sent == recorded: every chat request the clients sent has its line under `requests/`.

The clients count what they sent; the bundle is read back after the programme. A gap means
evidence was lost (a caller that did not save, a crash between send and save), and an
unreadable line means a record was damaged: either makes the evidence incomplete.
"""

from __future__ import annotations

import json
from pathlib import Path

from golive.bundle.layout import LEDGER_SENT
from golive.bundle.request_line import NOT_RECORDS
from golive.bundle.store import ZSTD, Bundle, BundleReader, read_lines, record_streams
from golive.errors import BundleError
from golive.results import INTEGRITY_RESULT, CheckResult, Status
from golive.traffic.client import CHAT_PATH

CHECK_ID = "golive.ledger"


def count_records(root: Path) -> tuple[int, list[str], tuple[str, ...]]:
    """Chat request records under `requests/` (plain or zstd), the lines that are not JSON, the
    files."""
    recorded = 0
    unreadable: list[str] = []
    # the examples of failures beside the streams hold no records: a record moved there is
    # missing from its stream, as the judges that scan the streams see it (`stream_records`)
    files = [
        p
        for p in record_streams(root)
        if f"requests/{p.name.removesuffix(ZSTD)}" not in NOT_RECORDS
    ]
    for path in files:
        try:
            for number, line in enumerate(read_lines(path), start=1):
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    unreadable.append(f"requests/{path.name}:{number}")
                    continue
                if (
                    isinstance(obj, dict)
                    and obj.get("method") == "POST"
                    and str(obj.get("url", "")).endswith(CHAT_PATH)
                ):
                    recorded += 1
        except BundleError as exc:
            unreadable.append(f"requests/{path.name} ({exc})")
    return recorded, unreadable, tuple(f"requests/{path.name}" for path in files)


def write_ledger(bundle: Bundle, sent: int) -> CheckResult:
    """Save the clients' count of chat requests sent, then judge it against the records."""
    bundle.write_json(LEDGER_SENT, {"sent": sent})
    return judge_ledger(BundleReader(bundle.root))


def judge_ledger(evidence: BundleReader) -> CheckResult:
    """`golive.ledger` from the bundle: the saved count of requests sent against the record
    lines under `requests/` (the run calls it, and `golive decide` again)."""
    saved = evidence.json(LEDGER_SENT)
    if not isinstance(saved, dict) or not isinstance(saved.get("sent"), int):
        return INTEGRITY_RESULT(
            CHECK_ID,
            Status.NO_DATA,
            f"no count of the requests sent ({LEDGER_SENT}): the records cannot be balanced",
        )
    return ledger_check(evidence.root, int(saved["sent"]))


def ledger_check(root: Path, sent: int) -> CheckResult:
    recorded, unreadable, files = count_records(root)
    measurements: dict[str, int | str] = {"sent": sent, "recorded": recorded}
    if unreadable:
        measurements["unreadable_lines"] = len(unreadable)
        return INTEGRITY_RESULT(
            CHECK_ID,
            Status.ERROR,
            f"{len(unreadable)} request record line(s) cannot be read as JSON "
            f"(first: {unreadable[0]})",
            measurements,
            evidence=files,
        )
    if recorded != sent:
        return INTEGRITY_RESULT(
            CHECK_ID,
            Status.ERROR,
            f"golive sent {sent} chat request(s) but the bundle records {recorded}: "
            "evidence was lost",
            measurements,
            evidence=files,
        )
    return INTEGRITY_RESULT(
        CHECK_ID,
        Status.PASS,
        f"every chat request sent has its record ({sent} sent, {recorded} recorded)",
        measurements,
        critical=False,
        evidence=("requests/",),
    )
