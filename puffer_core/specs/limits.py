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
    "MAX_ACTOR_RESOURCES",
    "MAX_ENVS",
    "MAX_EPISODES",
    "MAX_FPS",
    "MAX_INFO_BUFFER_BYTES",
    "MAX_RESTARTS",
    "MAX_SECONDS",
    "MAX_SEED",
    "MAX_SPIN_US",
    "MAX_STEPS",
    "MAX_WORKERS",
    "PLACEMENTS",
    "check_flag",
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
#: the longest a vector env's waiting side spins before it sleeps, in µs: a second (the
#: default is 100 µs; a sleep and its wake-up cost about that, so longer spins only burn a core)
MAX_SPIN_US = 1_000_000.0
#: a Multiprocessing worker's mailbox for infos and call arguments: 1 GiB (larger ones go over a pipe anyway)
MAX_INFO_BUFFER_BYTES = 2**30
#: CPUs or GPUs one Ray actor asks for (``actor_options["num_cpus"]``, ``["num_gpus"]``)
MAX_ACTOR_RESOURCES = 1_000_000.0
#: faults in a row an env may have under ``on_fault="restart"`` before the vector env raises
MAX_RESTARTS = 1_000_000
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


def check_flag(name: str, value: Any) -> bool:
    """``value`` if it is True or False: a typo like ``"no"`` or ``0`` must not pass for one.

    Raises:
        APIUsageError: naming ``name`` and the value.
    """
    if not isinstance(value, bool):
        raise APIUsageError(f"{name} must be True or False, got {value!r}")
    return value


def _range_text(low: float | None, high: float | None, low_open: bool) -> str:
    if low is None and high is None:
        return "a finite number"
    if high is None:
        return f"a finite number {'>' if low_open else '≥'} {_bound(low)}"
    if low is None:
        return f"a finite number ≤ {_bound(high)}"
    return f"a number in {'(' if low_open else '['}{_bound(low)}, {_bound(high)}]"


def _bound(value: float) -> str:
    """A bound as people write it: 0.5, 604800, 1,000,000 (``:g`` alone gives 1e+06)."""
    text = f"{value:g}"
    return f"{int(value):,}" if "e" in text and float(value).is_integer() else text
