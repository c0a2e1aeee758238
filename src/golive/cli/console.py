"""What the command line shows: progress on stderr, the verdict table or JSON on stdout, the
JUnit file; and the small input helpers the commands share."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from golive.errors import ConfigError
from golive.pipeline import Verdict
from golive.report.junit import write_junit
from golive.verdict.document import VerdictDocument

err = Console(stderr=True)
STYLE = {
    "pass": "green",
    "warn": "yellow",
    "fail": "red",
    "no_data": "magenta",
    "error": "red",
    "skipped": "dim",
}


def progress_line(message: str) -> None:
    """Progress lines on stderr, never wrapped (paths and PIDs stay greppable)."""
    err.print(message, soft_wrap=True, highlight=False, markup=False)


def read_input(path: Path, flag: str) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot be read ({exc.strerror})") from exc


def default_out(prefix: str) -> Path:
    return Path(f"{prefix}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}")


def finish(verdict: Verdict, args: argparse.Namespace) -> int:
    junit: Path | None = getattr(args, "junit", None)
    if junit is not None:
        write_junit(verdict.document, junit)
        err.print(f"junit: {junit}")
    if args.json:
        print(json.dumps(verdict.data, indent=2))
    else:
        print_table(verdict.document)
    err.print(f"bundle: {verdict.bundle}")
    return verdict.outcome.exit_code


def print_table(verdict: VerdictDocument) -> None:
    title = f"golive {verdict.command}: {verdict.outcome}"
    if verdict.sections_missing:
        ran = ", ".join(verdict.scope) if isinstance(verdict.scope, tuple) else ""
        Console().print(
            f"{title} (sections: {ran}); still missing before a go-live decision: "
            f"{', '.join(verdict.sections_missing)}",
            soft_wrap=True,
            highlight=False,
        )
    table = Table(title=title, title_justify="left")
    table.add_column("check")
    table.add_column("status")
    table.add_column("summary", overflow="fold")
    for check in verdict.checks:
        style = STYLE.get(check.status, "")
        table.add_row(check.id, f"[{style}]{check.status}[/{style}]", check.summary)
    Console().print(table)
    for rule in verdict.rules_fired:
        Console().print(f"{rule.outcome}: {rule.reason} ({', '.join(rule.checks)})")
