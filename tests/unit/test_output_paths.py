"""Issue 30 §5: an output path is made ready, or refused, before the command runs — never a
traceback after a whole run (a missing `reports/` folder for `--junit`, `-o` under `/proc`)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from golive.cli.main import main
from golive.results import EXIT_USAGE

GOLDEN = Path(__file__).parent.parent / "data/golden-demo"


def _main(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue() + err.getvalue()


@pytest.mark.parametrize(
    "argv",
    [
        ("smoke", "--target", "http://127.0.0.1:9", "--junit", "/proc/golive/x.xml"),
        ("report", str(GOLDEN), "-o", "/proc/golive-report"),
        ("guardrails", str(GOLDEN), "-o", "/proc/alerts.yaml"),
    ],
    ids=["junit", "report", "guardrails"],
)
def test_an_unwritable_output_is_refused_before_anything_runs(
    argv: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exit 2 naming the flag and the path; no bundle, no traceback."""
    monkeypatch.chdir(tmp_path)
    code, text = _main(*argv)
    assert code == EXIT_USAGE, text
    assert "/proc" in text
    assert "Traceback" not in text
    assert not list(tmp_path.iterdir())  # the smoke run never started: no bundle


def test_missing_folders_are_created(tmp_path: Path) -> None:
    """`golive report -o a/b/c` and `guardrails -o alerts/x.yaml` create their folders when
    they write; a command refused before it runs leaves none behind."""
    code, text = _main("report", str(GOLDEN), "-o", str(tmp_path / "a/b/c"))
    assert code == 0, text
    assert (tmp_path / "a/b/c/report.md").is_file()
    code, text = _main("guardrails", str(GOLDEN), "-o", str(tmp_path / "alerts/x.yaml"))
    assert code == 0, text
    assert (tmp_path / "alerts/x.yaml").is_file()
    code, _ = _main("report", str(tmp_path / "no-such-bundle"), "-o", str(tmp_path / "d/e"))
    assert code != 0
    assert not (tmp_path / "d").exists()


def test_a_directory_given_for_a_file_is_refused(tmp_path: Path) -> None:
    """`--junit DIR` names the problem before the run."""
    code, text = _main("smoke", "--target", "http://127.0.0.1:9", "--junit", str(tmp_path))
    assert code == EXIT_USAGE
    assert "is a directory" in text


def test_a_file_standing_where_a_folder_must_go_is_refused(tmp_path: Path) -> None:
    """`--junit x/j.xml` where `x` is a file: refused before the run, naming it."""
    (tmp_path / "x").write_text("a file\n")
    junit = str(tmp_path / "x/j.xml")
    code, text = _main("smoke", "--target", "http://127.0.0.1:9", "--junit", junit)
    assert code == EXIT_USAGE
    assert "is not a folder" in text
