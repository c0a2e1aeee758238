"""The README's first screen answers what golive is, how to run it and what an outcome means:
its two commands are the ones CI runs, its exit table matches the codes golive returns, and
every page it sends a reader to exists."""

from __future__ import annotations

import re
from pathlib import Path

from golive.results import EXIT_INTERNAL, EXIT_NOT_MEASURABLE, EXIT_USAGE, Outcome

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
FIRST_SCREEN = README.split("\n---\n", 1)[0]


def test_the_two_commands_come_first_and_ci_runs_the_test_one() -> None:
    """The first code block is `make demo` then `make test`; .ci/run calls `make test`."""
    block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert block is not None
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert commands == ["make demo", "make test"]
    assert README.index("```bash") < 600
    assert "make test" in (REPO / ".ci" / "run").read_text().splitlines()[-1]


def test_first_screen_exit_table_matches_the_codes() -> None:
    """Every outcome appears with its exit code, and so do usage (2), golive's own error (3),
    not measurable (4) and interrupted (130/143)."""
    rows = {
        match.group(2): match.group(1)
        for match in re.finditer(r"^\| `([0-9]+)` \| `([a-z-]+)` \|", FIRST_SCREEN, re.M)
    }
    for outcome in Outcome:
        assert rows.get(outcome.value) == str(outcome.exit_code), outcome
    codes = set(re.findall(r"^\| `([0-9]+)", FIRST_SCREEN, re.M))
    assert {str(EXIT_USAGE), str(EXIT_INTERNAL), str(EXIT_NOT_MEASURABLE), "130"} <= codes


def test_first_screen_defines_programme_section_chain_and_duration() -> None:
    """A newcomer meets the words the verdicts use, and how long a default run takes."""
    for term in ("**programme**", "**section**", "**chain**", "**bundle**"):
        assert term in FIRST_SCREEN
    assert "A default `golive run` takes" in FIRST_SCREEN
    assert len(FIRST_SCREEN.splitlines()) <= 50


def test_every_linked_page_exists() -> None:
    """A link to docs/ that points nowhere is a dead end for the reader."""
    for folder, text in [(REPO, README)] + [
        (page.parent, page.read_text()) for page in (REPO / "docs").glob("*.md")
    ]:
        for target in re.findall(r"\]\(([^)#:]+\.md)\)", text):
            assert (folder / target).is_file(), target
