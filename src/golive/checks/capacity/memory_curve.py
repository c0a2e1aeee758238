"""`memory/capacity.csv` read back: each numeric column's samples, by phase."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field


@dataclass
class SavedCurve:
    """(t, value) samples of each column, all phases and per phase; blanks, text and
    non-finite values are not samples."""

    columns: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    by_phase: dict[tuple[str, str], list[tuple[float, float]]] = field(default_factory=dict)

    def peak(self, column: str, phase: str | None = None) -> float | None:
        """The column's largest sample, over every phase or in `phase`."""
        samples = self.columns.get(column, ()) if phase is None else self.series(column, phase)
        return max((v for _, v in samples), default=None)

    def series(self, column: str, phase: str) -> list[tuple[float, float]]:
        return list(self.by_phase.get((phase, column), ()))


def read_curve(text: str) -> SavedCurve:
    curve = SavedCurve()
    for row in csv.DictReader(io.StringIO(text)):
        t = curve_number(row.get("t_s"))
        if t is None:
            continue
        phase = str(row.get("phase") or "")
        for column, value in row.items():
            if column in (None, "t_s", "phase"):
                continue
            number = curve_number(value)
            if number is None:
                continue
            curve.columns.setdefault(str(column), []).append((t, number))
            curve.by_phase.setdefault((phase, str(column)), []).append((t, number))
    return curve


def curve_number(value: object) -> float | None:
    """A curve cell as a number: a float or numeric text, finite; else None (not a sample)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) if math.isfinite(value) else None
    if not isinstance(value, str) or not value:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None
