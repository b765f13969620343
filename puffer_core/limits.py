"""Sanity bounds on counts and settings, the choices of a few settings, and the checks
that apply them.

The bounds are generous, not tuning advice: they catch a typo (an extra zero, a minus
sign, ``nan``) that would otherwise start a run that never ends or fail deep inside numpy,
torch or ``select.poll``. Every check raises ``APIUsageError`` with one line naming the
setting, the range and the value; the CLI's option types use the same bounds.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from puffer_core.errors import APIUsageError

__all__ = [
    "MAX_ENVS",
    "MAX_EPISODES",
    "MAX_FPS",
    "MAX_SECONDS",
    "MAX_SEED",
    "MAX_STEPS",
    "MAX_WORKERS",
    "PLACEMENTS",
    "check_int",
    "check_number",
    "int_in",
    "number_in",
]

MAX_SEED = 2**62 - 1  # vector envs seed env i with seed + i, in [0, 2**62)
MAX_STEPS = 10**12
MAX_ENVS = 65_536
MAX_WORKERS = 1_024
MAX_EPISODES = 1_000_000
#: frames per second of a recording or a watched env
MAX_FPS = 1000.0
#: the longest timeout: a week (``select.poll`` takes at most 2**31 - 1 ms, about 24.8 days)
MAX_SECONDS = 7 * 24 * 3600.0
# The Ray backend's placement choices; here, not in puffer_core.vector, so that the CLI
# and the training config name them without importing the vector package.
PLACEMENTS = ("spread", "pack")


def _shown(value: int) -> str:
    return f"{value:,}" if abs(value) >= 10_000 else repr(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)  # numpy ints too


def int_in(value: Any, low: int, high: int | None = None) -> bool:
    """Whether ``value`` is an int in [low, high] (numpy ints count, bools and floats do not)."""
    return _is_int(value) and value >= low and (high is None or value <= high)


def number_in(value: Any, low: float | None = None, high: float | None = None, *, low_open: bool = False) -> bool:
    """Whether ``value`` is a finite number in [low, high] (or (low, high] with ``low_open``);
    NaN, ±inf, bools and strings are not."""
    numeric = isinstance(value, numbers.Real) and not isinstance(value, bool)  # numpy floats too
    return (
        numeric
        and math.isfinite(value)
        and (low is None or (value > low if low_open else value >= low))
        and (high is None or value <= high)
    )


def check_int(name: str, value: Any, low: int = 1, high: int | None = None) -> int:
    """``value`` as an int in [low, high] (numpy ints accepted, bools and floats refused).

    Raises:
        APIUsageError: naming ``name``, the range and the value.
    """
    where = f"≥ {low:,}" + (f" and ≤ {high:,}" if high is not None else "")
    if not _is_int(value):
        raise APIUsageError(f"{name} must be an int {where}, got {value!r}")
    if not int_in(value, low, high):
        raise APIUsageError(f"{name} must be {where}, got {_shown(int(value))}")
    return int(value)


def check_number(
    name: str, value: Any, low: float | None = None, high: float | None = None, *, low_open: bool = False
) -> float:
    """``value`` as a float that ``number_in(value, low, high, low_open=low_open)``.

    Raises:
        APIUsageError: naming ``name``, the range and the value.
    """
    if not number_in(value, low, high, low_open=low_open):
        raise APIUsageError(f"{name} must be {_range_text(low, high, low_open)}, got {value!r}")
    return float(value)


def _range_text(low: float | None, high: float | None, low_open: bool) -> str:
    if low is None and high is None:
        return "a finite number"
    if high is None:
        return f"a finite number {'>' if low_open else '≥'} {low:g}"
    if low is None:
        return f"a finite number ≤ {high:g}"
    return f"a number in {'(' if low_open else '['}{low:g}, {high:g}]"
