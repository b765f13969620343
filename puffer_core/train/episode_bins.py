"""Every finished episode of a run in a fixed number of bins over environment steps.

A bin covers ``width`` steps (a power of two) and keeps the count of the episodes that ended
there, the sum, least and greatest of their returns and the sum of their lengths. When an
episode ends past the last bin, neighbouring bins merge pairwise and ``width`` doubles: the
resolution halves as the run doubles, the memory stays ``NUM_BINS`` bins however long the run,
and count, sums, least and greatest over the run stay what they were (merging adds counts and
sums and keeps the extremes). The width depends only on the step reached, so a resumed run's
bins are those of one run that never stopped.
"""

from __future__ import annotations

import math
from typing import Any

from puffer_core.errors import APIUsageError
from puffer_core.train.saved_data import short

__all__ = ["NUM_BINS", "EpisodeBins"]

#: Bins kept (a power of two: merging halves them).
NUM_BINS = 512
#: What one bin of the saved state holds, in order.
FIELDS = ("index", "count", "return_sum", "return_min", "return_max", "length_sum")


class EpisodeBins:
    """``NUM_BINS`` bins of ``width`` steps each: bin ``i`` holds the episodes that ended at
    steps ``[i * width, (i + 1) * width)``."""

    def __init__(self) -> None:
        self.width = 1
        self.count = [0] * NUM_BINS
        self.return_sum = [0.0] * NUM_BINS
        self.return_min = [math.inf] * NUM_BINS
        self.return_max = [-math.inf] * NUM_BINS
        self.length_sum = [0.0] * NUM_BINS

    def add(self, step: int, episode_return: float, length: float) -> None:
        """An episode that ended at ``step`` (steps only grow within a run)."""
        while step >= NUM_BINS * self.width:
            self._halve()
        i = step // self.width
        self.count[i] += 1
        self.return_sum[i] += episode_return
        if episode_return < self.return_min[i]:
            self.return_min[i] = episode_return
        if episode_return > self.return_max[i]:
            self.return_max[i] = episode_return
        self.length_sum[i] += length

    def _halve(self) -> None:
        """Merge bins pairwise: bin ``i`` of the result holds old bins ``2i`` and ``2i + 1``."""
        half = NUM_BINS // 2
        pairs = range(0, NUM_BINS, 2)
        self.count = [self.count[i] + self.count[i + 1] for i in pairs] + [0] * half
        self.return_sum = [self.return_sum[i] + self.return_sum[i + 1] for i in pairs] + [0.0] * half
        self.return_min = [min(self.return_min[i], self.return_min[i + 1]) for i in pairs] + [math.inf] * half
        self.return_max = [max(self.return_max[i], self.return_max[i + 1]) for i in pairs] + [-math.inf] * half
        self.length_sum = [self.length_sum[i] + self.length_sum[i + 1] for i in pairs] + [0.0] * half
        self.width *= 2

    def filled(self) -> list[dict[str, float]]:
        """The bins that hold episodes, in step order: ``start`` and ``end`` (steps), ``count``,
        ``mean_return``, ``min_return``, ``max_return``, ``mean_length``."""
        return [
            {
                "start": i * self.width,
                "end": (i + 1) * self.width,
                "count": count,
                "mean_return": self.return_sum[i] / count,
                "min_return": self.return_min[i],
                "max_return": self.return_max[i],
                "mean_length": self.length_sum[i] / count,
            }
            for i, count in enumerate(self.count)
            if count
        ]

    @property
    def total(self) -> int:
        """Episodes in all bins."""
        return sum(self.count)

    def to_state(self) -> dict[str, Any]:
        """Plain data: the width and one list of ``FIELDS`` per bin that holds episodes."""
        columns = (self.count, self.return_sum, self.return_min, self.return_max, self.length_sum)
        bins = [[i, *(column[i] for column in columns)] for i, count in enumerate(self.count) if count]
        return {"width": self.width, "bins": bins}

    @classmethod
    def from_state(cls, state: Any) -> EpisodeBins:
        """The bins ``to_state`` wrote, checked.

        Raises:
            APIUsageError: a width that is not a power of two, or a bin that is not
                ``FIELDS`` (a new index below ``NUM_BINS``, a positive count, numbers), named.
        """
        bins = cls()
        width = state.get("width") if isinstance(state, dict) else None
        if type(width) is not int or width < 1 or width & (width - 1):
            raise APIUsageError(f"its episode bins have width {short(width)}, not a power of two")
        bins.width = width
        rows = state.get("bins")
        if not isinstance(rows, list):
            raise APIUsageError("its episode bins are not a list")
        for row in rows:
            index, count, total, least, greatest, lengths = _checked_bin(row, bins.count)
            bins.count[index], bins.return_sum[index], bins.length_sum[index] = count, total, lengths
            bins.return_min[index], bins.return_max[index] = least, greatest
        return bins


def _checked_bin(row: Any, counts: list[int]) -> tuple[int, int, float, float, float, float]:
    if not isinstance(row, (list, tuple)) or len(row) != len(FIELDS):
        raise APIUsageError(f"an episode bin is {short(row)}, not the {len(FIELDS)} numbers {', '.join(FIELDS)}")
    index, count, *numbers = row
    if type(index) is not int or not 0 <= index < NUM_BINS or counts[index]:
        raise APIUsageError(f"an episode bin has index {short(index)}, not a new one below {NUM_BINS}")
    if type(count) is not int or count < 1:
        raise APIUsageError(f"episode bin {index} has count {short(count)}, not a positive int")
    if not all(type(x) in (int, float) for x in numbers):  # an env's NaN return is kept as it came
        raise APIUsageError(f"episode bin {index} holds {short(numbers)}, not numbers")
    return index, count, *(float(x) for x in numbers)
