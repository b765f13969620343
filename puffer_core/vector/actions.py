"""Actions checked in the main process, before a vector env hands them to its envs.

An action out of range (5 for ``Discrete(2)``), of the wrong kind (floats for a discrete
space) or not finite (NaN in a ``Box``) would otherwise raise inside a worker and close
the whole vector env. ``VectorEnv._check_actions`` (called by every backend's ``send``)
runs an ``ActionCheck``: the shape first (reshaped when only the layout differs), then
dtype and range, raising an ``APIUsageError`` that names the first bad row and what is
allowed; the vector env stays usable.

The common (valid) case costs a dtype identity test and one ``argmax`` (about a
microsecond for a batch of CartPole actions); only a failing check looks for the bad row.
``vector.make(..., check_actions=False)`` skips everything but the shape check.

Ranges: ``Discrete`` / ``MultiDiscrete`` values in ``[start, start + n)`` (the flat spaces
of emulation are 0-based), ``MultiBinary`` values 0 or 1, ``Box`` values finite. ``Box``
bounds are not enforced: like Gymnasium, continuous actions beyond the bounds are the
env's to clip.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces

from puffer_core.errors import APIUsageError

__all__ = ["ActionCheck", "actions_of_shape"]

_ACTION_DTYPE_HINT = {"discrete": "integers", "box": "real numbers"}
_INT64, _UINT64 = np.dtype(np.int64), np.dtype(np.uint64)
#: batches up to this many int64 actions are range-checked as Python ints (see _below_common_bound)
_SMALL_BATCH = 8  # past about 8, numpy's reduction wins even with warm caches


def actions_of_shape(actions: Any, rows: int, row_shape: tuple) -> np.ndarray:
    """``actions`` as an array of shape ``(rows, *row_shape)`` (reshaped when the sizes agree)."""
    actions = np.asarray(actions)
    shape = (rows, *row_shape)
    if actions.shape == shape:
        return actions
    if actions.size == math.prod(shape) and actions.ndim >= 1 and actions.shape[0] == rows:
        return actions.reshape(shape)
    raise APIUsageError(
        f"send() expects actions of shape {shape} (one row per agent row of the batch), got {actions.shape}"
    )


class ActionCheck:
    """Dtype and range checks for one flat action space, built once per vector env."""

    def __init__(self, space: spaces.Space, row_shape: tuple, buffer_dtype: np.dtype):
        self.space = space
        self.row_shape = tuple(row_shape)
        self.buffer_dtype = np.dtype(buffer_dtype)
        self.kind = "box" if isinstance(space, spaces.Box) else "discrete"
        self.accepted_dtype: np.dtype | None = None  # the last dtype that passed: checked by identity
        if self.kind == "box":
            self.valid, self.raise_invalid = self._finite, self._raise_not_finite
            return
        self.low, self.high = _discrete_bounds(space)
        self.bound = _unsigned_bound(self.low, self.high)
        self.raise_invalid = self._raise_out_of_range
        if self.bound is None:
            self.valid = self._within_bounds
        elif isinstance(self.bound, int):
            self.valid = self._below_common_bound
        else:
            self.valid = self._below_bounds

    def shaped(self, actions: Any, rows: int) -> np.ndarray:
        """``actions`` as an array of ``rows`` rows of this space's shape (see ``actions_of_shape``)."""
        return actions_of_shape(actions, rows, self.row_shape)

    def __call__(self, actions: np.ndarray, envs: Any = None) -> None:
        """Return when every action is valid; else raise APIUsageError naming the first bad row."""
        if actions.dtype is not self.accepted_dtype:
            self._accept_dtype(actions.dtype)
        if not self.valid(actions):
            self.raise_invalid(actions, envs)

    def _accept_dtype(self, dtype: np.dtype) -> None:
        if not np.can_cast(dtype, self.buffer_dtype, casting="same_kind"):
            raise APIUsageError(
                f"send(): actions for {_space_name(self.space)} must be {_ACTION_DTYPE_HINT[self.kind]} "
                f"({self.buffer_dtype} expected), got {dtype}; convert them, e.g. "
                f"actions.astype(np.{self.buffer_dtype})"
            )
        self.accepted_dtype = dtype

    # The range tests, one picked per space: each is one or two numpy calls.

    def _below_common_bound(self, actions: np.ndarray) -> bool:
        """0-based, one bound for every element (Discrete, MultiBinary, even MultiDiscrete)."""
        if actions.dtype is _INT64 and 0 < actions.size <= _SMALL_BATCH:
            values = actions.ravel().tolist()  # a few Python ints: less code than numpy's reduction
            return min(values) >= 0 and max(values) < self.bound
        unsigned = _as_unsigned(actions)
        return unsigned.item(unsigned.argmax()) < self.bound  # argmax + item: cheaper than max() on a batch

    def _below_bounds(self, actions: np.ndarray) -> bool:
        """0-based, one bound per element (MultiDiscrete with differing nvec)."""
        return (_as_unsigned(actions) < self.bound).all()

    def _within_bounds(self, actions: np.ndarray) -> bool:
        """Any start (not the flat spaces of emulation, which are 0-based)."""
        return ((actions >= self.low) & (actions <= self.high)).all()

    def _finite(self, actions: np.ndarray) -> bool:
        """No NaN or inf: argmax finds a NaN first (or +inf), argmin finds -inf."""
        if actions.dtype.kind != "f":
            return True
        return math.isfinite(actions.item(actions.argmax())) and math.isfinite(actions.item(actions.argmin()))

    def _raise_out_of_range(self, actions: np.ndarray, envs: Any) -> None:
        values = _as_int64(actions).reshape(len(actions), -1)
        bad = (values < self.low.ravel()) | (values > self.high.ravel())
        row, element = _first_bad(bad)
        low, high = int(self.low.ravel()[element]), int(self.high.ravel()[element])
        if actions.ndim == 1:
            what = f"action {actions[row]}"
            detail = ""
        else:
            what = f"action {_format_row(actions[row])}"
            detail = f" element {element} is {values[row, element]},"
        raise APIUsageError(
            f"send(): {what} in {_row_label(envs, row, len(actions))} is out of range for "
            f"{_space_name(self.space)}:{detail} allowed {_range(low, high)}"
        )

    def _raise_not_finite(self, actions: np.ndarray, envs: Any) -> None:
        bad = ~np.isfinite(actions.reshape(len(actions), -1))
        row, element = _first_bad(bad)
        value = actions.reshape(len(actions), -1)[row, element]
        detail = "" if actions.ndim == 1 else f" (element {element} is {value})"
        raise APIUsageError(
            f"send(): action {_format_row(actions[row])} in {_row_label(envs, row, len(actions))} is not finite"
            f"{detail} for {_space_name(self.space)}: actions must be finite numbers (no NaN or inf)"
        )


def _discrete_bounds(space: spaces.Space) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest allowed value of each element (int64 arrays of the space's shape)."""
    if isinstance(space, spaces.Discrete):
        start = int(space.start)
        return np.array(start, np.int64), np.array(start + int(space.n) - 1, np.int64)
    if isinstance(space, spaces.MultiDiscrete):
        start = np.asarray(getattr(space, "start", 0), np.int64) * np.ones(space.shape, np.int64)
        return start, start + space.nvec.astype(np.int64) - 1
    if isinstance(space, spaces.MultiBinary):
        return np.zeros(space.shape, np.int64), np.ones(space.shape, np.int64)
    raise APIUsageError(f"cannot check actions for {space}: not a Discrete, MultiDiscrete, MultiBinary or Box space")


def _unsigned_bound(low: np.ndarray, high: np.ndarray) -> int | np.ndarray | None:
    """The exclusive upper bound the 0-based fast path compares an unsigned view against:
    an int when every element shares it, else a uint64 array; None when a space does not
    start at 0 (the fast path cannot apply)."""
    if (low != 0).any():
        return None
    if high.size and (high == high.flat[0]).all():
        return int(high.flat[0]) + 1
    return (high + 1).astype(np.uint64)


def _as_unsigned(actions: np.ndarray) -> np.ndarray:
    """Integers as unsigned, so one ``< bound`` test also rejects negatives (they wrap to huge)."""
    if actions.dtype is not _INT64:
        kind = actions.dtype.kind
        if kind == "b":
            return actions.view(np.uint8)
        if kind == "u":
            return actions
        # Widen other signed ints (a small type's negatives would wrap below a large bound)
        # and make the byte order native (a view reinterprets bytes as they lie).
        actions = actions.astype(_INT64)
    return actions.view(_UINT64)


def _as_int64(actions: np.ndarray) -> np.ndarray:
    """Integers as int64 for exact signed comparisons (unsigned values past int64 saturate)."""
    if actions.dtype.kind == "u":
        return np.minimum(actions, np.iinfo(np.int64).max).astype(np.int64)
    return actions.astype(np.int64)


def _range(low: int, high: int) -> str:
    return f"{low}–{high}" if low >= 0 else f"{low} to {high}"  # "-1–1" would read as a typo


def _first_bad(bad: np.ndarray) -> tuple[int, int]:
    """(row, element) of the first True in a (rows, elements) mask."""
    row = int(np.flatnonzero(bad.any(axis=1))[0])
    return row, int(np.flatnonzero(bad[row])[0])


def _format_row(row: np.ndarray) -> str:
    return np.array2string(np.asarray(row), threshold=12, edgeitems=4, max_line_width=10**6)


def _space_name(space: spaces.Space) -> str:
    text = str(space)
    if len(text) <= 80:
        return text
    return f"{type(space).__name__} of shape {space.shape}"


def _batch_row_ids(envs: Any, rows: int) -> np.ndarray:
    """The agent rows (``env_ids`` of ``recv``) the batch being sent belongs to.

    Read from the backend's bookkeeping of the held batch: Multiprocessing and Ray keep the
    workers of the batch (``_held``) and their rows (``_row_bounds``), Serial the group it
    steps next (``_cursor``). Anything else: the batch is taken to be rows 0..rows-1."""
    held, bounds = getattr(envs, "_held", None), getattr(envs, "_row_bounds", None)
    if held is not None and bounds is not None:
        return np.concatenate([np.arange(*bounds[w]) for w in held])
    cursor = getattr(envs, "_cursor", None)
    if isinstance(cursor, int):
        return np.arange(cursor * rows, (cursor + 1) * rows)
    return np.arange(rows)


def _row_label(envs: Any, row: int, rows: int) -> str:
    """``row 3``, plus the env (and agent) it is when that is not the same number."""
    if envs is None:
        return f"row {row}"
    env_row = int(_batch_row_ids(envs, rows)[row])
    agents = int(getattr(envs, "agents_per_env", 1))
    if agents > 1:
        names = list(getattr(envs, "possible_agents", []))
        slot = env_row % agents
        agent = repr(names[slot]) if slot < len(names) else str(slot)
        return f"row {row} (env {env_row // agents}, agent {agent})"
    return f"row {row}" if env_row == row else f"row {row} (env {env_row})"
