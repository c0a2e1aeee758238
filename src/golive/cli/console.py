"""What the command line shows: progress on stderr, the verdict table or JSON on stdout, the
JUnit file; and the small input helpers the commands share."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from golive.bundle.layout import GOLIVE_TRACEBACK
from golive.errors import ConfigError
from golive.orchestration.pipeline import Verdict
from golive.report.junit import write_junit
from golive.results import EXIT_INTERNAL
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


def warn(message: str) -> None:
    """A finding that does not stop the command, on stderr."""
    err.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False, soft_wrap=True)


def read_input(path: Path, flag: str) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot be read ({exc.strerror})") from exc


def default_out(prefix: str) -> Path:
    return Path(f"{prefix}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}")


def finish(verdict: Verdict, args: argparse.Namespace) -> int:
    """Print the verdict, then write the JUnit file (a file that cannot be written after the
    run is named, never a traceback hiding the verdict: the bundle is sealed either way)."""
    if args.json:
        print(json.dumps(verdict.data, indent=2))
    else:
        print_table(verdict.document)
    junit: Path | None = getattr(args, "junit", None)
    if junit is not None:
        try:
            junit.parent.mkdir(parents=True, exist_ok=True)
            write_junit(verdict.document, junit, verdict.bundle)
            err.print(f"junit: {junit}")
        except OSError as exc:
            err.print(
                f"[red]junit: {escape(str(junit))} could not be written ({exc.strerror or exc})"
                "[/red]; `golive report` renders the sealed bundle again"
            )
    err.print(f"bundle: {verdict.bundle}")
    return exit_code(verdict.document)


def exit_code(verdict: VerdictDocument) -> int:
    """The outcome's code; after SIGINT or SIGTERM the shell's 128 + the signal (130, 143),
    as shells and CI expect of an interrupted command (the sealed partial bundle's outcome,
    hold, is in its verdict.json)."""
    code = verdict.process_exit_code()
    if verdict.interrupted is not None and code > 128:
        err.print(
            f"interrupted by {verdict.interrupted.signal}: the partial bundle is sealed "
            f"(outcome {verdict.outcome})"
        )
    elif code == EXIT_INTERNAL:
        err.print(
            f"golive stopped on its own error ({', '.join(verdict.crashed())}): the bundle is "
            f"sealed (outcome {verdict.outcome}) and the traceback is in {GOLIVE_TRACEBACK}; "
            "please report it"
        )
    return code


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
        if rule.outcome == "section-passed" and verdict.outcome != "section-passed":
            continue  # a section that found a problem: the rules that decided it are shown
        named = f" ({', '.join(rule.checks)})" if rule.checks else ""
        Console().print(f"{rule.outcome}: {rule.reason}{named}", soft_wrap=True, highlight=False)
