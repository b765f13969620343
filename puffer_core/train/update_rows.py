"""The rows of a run's curve, one per PPO update until there are ``MAX_ROWS``, never more.

Each row covers ``width`` updates (the last row fewer, while it fills). When a new update
would make a row past ``MAX_ROWS``, rows merge pairwise and ``width`` doubles: the resolution
halves as the run doubles. A merged row says where the run was at its end (``step``,
``seconds``, ``episodes``, ``mean_return``, ``mean_length``, ``learning_rate``: its last
update's), the mean of its updates' losses, and its steps per second over its time;
``updates`` counts the updates it holds.
"""

from __future__ import annotations

import math
from typing import Any

from puffer_core.errors import APIUsageError
from puffer_core.train.saved_data import short

__all__ = ["COLUMNS", "MAX_ROWS", "UpdateRows", "check_columns", "checked_row", "merged"]

#: Rows kept at most (even: merging halves them).
MAX_ROWS = 1024

COLUMNS = (
    "step",
    "seconds",
    "steps_per_second",
    "episodes",
    "mean_return",
    "mean_length",
    "policy_loss",
    "value_loss",
    "entropy",
    "approx_kl",
    "clip_fraction",
    "explained_variance",
    "learning_rate",
    "updates",
)
#: Columns a merged row averages over its updates (the others: its last update's).
AVERAGED = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "explained_variance")
#: Columns every row holds a number in (the others may be None: no loss before a first batch).
REQUIRED = ("step", "seconds", "episodes", "updates")


class UpdateRows:
    """At most ``MAX_ROWS`` rows (dicts of ``COLUMNS``), each of ``width`` updates but the last."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.width = 1

    def add(self, row: dict[str, Any]) -> None:
        """One update's row (``updates`` 1), into the last row while it has room."""
        rows = self.rows
        if rows and rows[-1]["updates"] < self.width:
            rows[-1] = merged(rows[-2] if len(rows) > 1 else None, rows[-1], row)
            return
        if len(rows) == MAX_ROWS:
            self._halve()
        self.rows.append(dict(row))  # a copy: the caller's row stays one update's

    def _halve(self) -> None:
        rows = self.rows
        self.rows = [merged(rows[i - 1] if i else None, rows[i], rows[i + 1]) for i in range(0, len(rows), 2)]
        self.width *= 2

    def to_state(self) -> dict[str, Any]:
        return {"width": self.width, "rows": [dict(row) for row in self.rows]}

    @classmethod
    def from_state(cls, state: Any) -> UpdateRows:
        """The rows ``to_state`` wrote, checked (columns, numbers, at most ``MAX_ROWS``).

        Raises:
            APIUsageError: a bad width, too many rows, or a row with other columns or values.
        """
        table = cls()
        width = state.get("width") if isinstance(state, dict) else None
        rows = state.get("rows") if isinstance(state, dict) else None
        if type(width) is not int or width < 1 or width & (width - 1):
            raise APIUsageError(f"its curve rows have width {short(width)}, not a power of two")
        if not isinstance(rows, list) or len(rows) > MAX_ROWS:
            raise APIUsageError(f"its curve rows are not a list of at most {MAX_ROWS:,} rows")
        table.width, table.rows = width, [checked_row(row) for row in rows]
        return table


def merged(before: dict[str, Any] | None, first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """Rows ``first`` and ``second`` (adjacent; ``before`` is the row before ``first``, None at
    the start) as one: ``second``'s state, the mean of the losses over both rows' updates, and
    the steps per second over both rows' time."""
    row = dict(second)
    updates = (first["updates"], second["updates"])
    row["updates"] = sum(updates)
    for column in AVERAGED:
        known = [(value, n) for value, n in zip((first[column], second[column]), updates) if _finite(value)]
        if known:  # an update without a batch (None) or a NaN (explained variance of constant returns) weighs nothing
            row[column] = math.fsum(value * n for value, n in known) / sum(n for _, n in known)
    start = before["seconds"] if before is not None else 0.0
    times = (first["seconds"] - start, second["seconds"] - first["seconds"])
    rates = (first["steps_per_second"], second["steps_per_second"])
    if all(_finite(rate) for rate in rates) and sum(times) > 0:
        row["steps_per_second"] = round(math.fsum(rate * time for rate, time in zip(rates, times)) / sum(times), 1)
    return row


def checked_row(row: Any) -> dict[str, Any]:
    """``row`` if it holds exactly ``COLUMNS``, each a number or None (``REQUIRED`` ones numbers)."""
    check_columns(row, COLUMNS)
    for column, value in row.items():
        number = type(value) in (int, float)
        if not (number or (value is None and column not in REQUIRED)):
            raise APIUsageError(f"a curve row's {column} is {short(value)}, not a number")
    if type(row["updates"]) is not int or row["updates"] < 1:
        raise APIUsageError(f"a curve row's updates is {short(row['updates'])}, not a positive int")
    return dict(row)


def check_columns(row: Any, columns: tuple[str, ...]) -> None:
    """Refuse a ``row`` that is not a dict of exactly ``columns``, naming the difference."""
    if not isinstance(row, dict):
        raise APIUsageError(f"a curve row is {short(row)}, not a dict of its columns")
    missing = [column for column in columns if column not in row]
    unknown = sorted(short(key) for key in row if key not in columns)
    if missing or unknown:
        problems = ([f"lacks {', '.join(missing)}"] if missing else []) + (
            [f"has unknown {', '.join(unknown[:5])}"] if unknown else []
        )
        raise APIUsageError(f"a curve row {' and '.join(problems)}")


def _finite(value: Any) -> bool:
    return value is not None and math.isfinite(value)
