"""A run's progress as lines of text, for a log or a pipe where no progress bar can be drawn.

``puffer train`` without a terminal (a detached run's ``train.log``, ``| tee``, CI) prints one
line at its first update and then every ``log_seconds`` (a setting, 30 by default)::

    step 12,288/200,000 (6.1%) | 2,345 steps/s | return 21.30 | elapsed 5s | eta 1m20s

one format for ``grep`` and for people: the step and the total, the steps per second of the
last update, the mean return of the last 20 finished episodes (``–`` before the first), the
time since the run (or its resume) started and the time left at that rate.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

__all__ = ["ProgressLines", "clock", "progress_line"]


def clock(seconds: float | None) -> str:
    """A duration as ``9s``, ``5m07s``, ``1h02m03s`` or ``2d03h04m``; ``–`` for None or a time that is not one."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "–"
    whole = round(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h{minutes:02d}m"
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def progress_line(row: dict[str, Any], total: int, elapsed: float, seconds_left: float | None = None) -> str:
    """The line for an update's ``row`` of a run of ``total`` steps, ``elapsed`` seconds in (see the module).

    ``seconds_left``: a time limit's (``max_seconds``), when it ends the run before its steps do."""
    step, sps = row["step"], row.get("steps_per_second") or 0.0
    eta = (total - step) / sps if sps > 0 else None
    if seconds_left is not None:
        eta = min(eta, seconds_left) if eta is not None else seconds_left
    mean = row.get("mean_return")
    shown = "–" if mean is None else f"{mean:.2f}"
    percent = 100.0 * step / total if total else 100.0
    return (f"step {step:,}/{total:,} ({percent:.1f}%) | {sps:,.0f} steps/s | return {shown} | "
            f"elapsed {clock(elapsed)} | eta {clock(eta)}")  # fmt: skip


class ProgressLines:
    """An ``on_update`` that writes ``progress_line`` at the first update and then every ``every`` seconds."""

    def __init__(
        self,
        total: int,
        every: float,
        write: Callable[[str], None],
        max_seconds: float | None = None,
        now: Callable[[], float] = time.monotonic,
    ):
        self.total, self.every, self.write, self.max_seconds, self.now = total, every, write, max_seconds, now
        self.started = now()
        self.last: float | None = None

    def __call__(self, row: dict[str, Any]) -> None:
        moment = self.now()
        if self.last is not None and moment - self.last < self.every:
            return
        self.last = moment
        elapsed = moment - self.started
        left = None if self.max_seconds is None else max(0.0, self.max_seconds - elapsed)
        self.write(progress_line(row, self.total, elapsed, left))
