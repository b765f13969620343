"""The learning curve of a run, of a bounded size however long the run: rows of PPO updates
(:mod:`.update_rows`), every finished episode in bins over steps (:mod:`.episode_bins`), the
last ``RECENT`` episodes as they were, and the files someone looks at (``curve.csv``,
``curve.png``), each written atomically.

A run of one-step episodes finishes millions of them an hour: a curve that kept each would
grow the process and the checkpoint without end (until the checkpoint's pickle passed what
a checkpoint may hold, and could no longer be loaded). Its saved form (``to_state``) holds at
most ``MAX_STATE_VALUES`` values.
"""

from __future__ import annotations

import csv
import importlib.util
import io
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

from puffer_core.atomic import write_atomically
from puffer_core.errors import APIUsageError, MissingDependencyError
from puffer_core.train.episode_bins import FIELDS, NUM_BINS, EpisodeBins
from puffer_core.train.saved_data import short
from puffer_core.train.update_rows import COLUMNS, MAX_ROWS, UpdateRows, check_columns, checked_row

__all__ = ["COLUMNS", "MAX_STATE_VALUES", "RECENT", "WINDOW", "Curve", "require_matplotlib"]

#: episodes the "mean return" of a curve row averages over
WINDOW = 20
#: finished episodes a curve keeps as they were (the newest)
RECENT = 1024
#: The values of a curve's saved form at most (as ``saved_data.check_plain`` counts them):
#: its dicts and lists, rows, bins and recent episodes, and a few counters.
MAX_STATE_VALUES = 64 + MAX_ROWS * (len(COLUMNS) + 1) + NUM_BINS * (len(FIELDS) + 1) + RECENT * 4
#: The columns of the curve's rows before rows were merged (checkpoints of format 1).
_LEGACY_COLUMNS = COLUMNS[:-1]


def require_matplotlib() -> None:
    """Fail before training, not at its end, when curve.png cannot be drawn."""
    if importlib.util.find_spec("matplotlib") is None:
        raise MissingDependencyError(
            "puffer train draws curve.png with matplotlib, which is missing; pip install 'puffer-core[train]'"
        )


class Curve:
    """``rows``: the update rows (dicts of ``COLUMNS``), one per update until ``MAX_ROWS``;
    ``episodes``: the last ``RECENT`` finished episodes, (step, return, length) each;
    ``episode_count``: every episode the run finished; ``bins``: all of them over steps."""

    def __init__(self) -> None:
        self.table = UpdateRows()
        self.bins = EpisodeBins()
        self.recent: deque[tuple[int, float, int]] = deque(maxlen=RECENT)
        self.episode_count = 0

    @property
    def rows(self) -> list[dict[str, Any]]:
        return self.table.rows

    @property
    def episodes(self) -> list[tuple[int, float, int]]:
        return list(self.recent)

    def add_episode(self, step: int, episode_return: float, length: int) -> None:
        """An episode that ended at ``step``."""
        self.recent.append((step, episode_return, length))
        self.bins.add(step, episode_return, length)
        self.episode_count += 1

    def mean_return(self, last: int = WINDOW) -> float | None:
        """Mean return of the last ``last`` (≤ ``RECENT``) finished episodes (None before the first)."""
        if not self.recent:
            return None
        return float(np.mean([ret for _, ret, _ in list(self.recent)[-last:]]))

    def mean_length(self, last: int = WINDOW) -> float | None:
        if not self.recent:
            return None
        return float(np.mean([length for _, _, length in list(self.recent)[-last:]]))

    def add_row(self, **values: Any) -> dict[str, Any]:
        """One update's row (``COLUMNS`` from ``values``, the episode columns from the curve)."""
        row = {column: values.get(column) for column in COLUMNS}
        row["episodes"] = self.episode_count
        row["mean_return"] = self.mean_return()
        row["mean_length"] = self.mean_length()
        row["updates"] = 1
        self.table.add(row)
        return row

    # ---------------------------------------------------------------- saved form
    def to_state(self) -> dict[str, Any]:
        return {
            "rows": self.table.to_state(),
            "bins": self.bins.to_state(),
            "recent": [list(episode) for episode in self.recent],
            "episode_count": self.episode_count,
        }

    @classmethod
    def from_state(cls, state: Any) -> Curve:
        """The curve ``to_state`` wrote, checked (plain data, as a checkpoint holds it).

        Raises:
            APIUsageError: what is not a curve's, named.
        """
        if not isinstance(state, dict) or set(state) != {"rows", "bins", "recent", "episode_count"}:
            found = sorted(map(short, state)) if isinstance(state, dict) else short(state)
            raise APIUsageError(f"its curve holds {found}, not rows, bins, recent and episode_count")
        curve = cls()
        curve.table = UpdateRows.from_state(state["rows"])
        curve.bins = EpisodeBins.from_state(state["bins"])
        recent = state["recent"]
        if not isinstance(recent, list) or len(recent) > RECENT:
            raise APIUsageError(f"its recent episodes are not a list of at most {RECENT:,}")
        curve.recent.extend(_checked_episode(episode) for episode in recent)
        count = state["episode_count"]
        if type(count) is not int or count < max(len(recent), curve.bins.total):
            raise APIUsageError(f"its episode_count {short(count)} is not the count of the episodes it holds")
        curve.episode_count = count
        return curve

    @classmethod
    def from_legacy(cls, state: Any) -> Curve:
        """The curve of a checkpoint of format 1 (every row and every episode kept), summarised."""
        if not isinstance(state, dict) or not isinstance(state.get("rows"), list):
            raise APIUsageError("its curve is not a dict of rows and episodes")
        episodes = state.get("episodes", [])
        if not isinstance(episodes, list):
            raise APIUsageError(f"its curve's episodes are {short(episodes)}, not a list")
        curve = cls()
        for episode in episodes:
            curve.add_episode(*_checked_episode(episode))
        for row in state["rows"]:
            check_columns(row, _LEGACY_COLUMNS)
            curve.table.add(checked_row({**row, "updates": 1}))
        return curve

    # ---------------------------------------------------------------- files
    def csv_bytes(self) -> bytes:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
        writer.writeheader()
        for row in self.rows:
            writer.writerow(
                {k: "" if v is None else (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()}
            )
        return out.getvalue().encode()

    def png_bytes(self, title: str) -> bytes:
        from puffer_core.train.curve_plot import draw

        return draw(self, title, WINDOW)

    def write(self, directory: Path, title: str) -> None:
        write_atomically(directory / "curve.csv", self.csv_bytes())
        write_atomically(directory / "curve.png", self.png_bytes(title))


def _checked_episode(episode: Any) -> tuple[int, float, int]:
    """(step, return, length) from a saved ``[step, return, length]``."""
    if not isinstance(episode, (list, tuple)) or len(episode) != 3:
        raise APIUsageError(f"a saved episode is {short(episode)}, not [step, return, length]")
    step, episode_return, length = episode
    if type(step) is not int or step < 0 or type(episode_return) not in (int, float) or type(length) is not int:
        raise APIUsageError(f"a saved episode is {short(episode)}, not [step, return, length]")
    return step, float(episode_return), length
