"""What a checkpoint's fields may hold: plain data (None, bools, numbers, strings, lists, tuples,
dicts) in a tree of bounded size and depth, tensors only where a field holds weights; and how
such data is printed (``short``: ``reprlib``, a bounded line whatever the data).

A pickle can make a list hold the same list twice, and that one the same list twice, and so
on: sixty levels are a few hundred bytes on disk and 2**60 items to anything that walks them
as a tree (``repr``, ``json``, a deep copy). ``check_plain`` refuses a container met twice
(plain data is a tree), so it ends after as many steps as the pickle made objects, and it
stops at a node budget besides.
"""

from __future__ import annotations

import reprlib
from collections import deque
from dataclasses import dataclass
from typing import Any

from puffer_core.errors import APIUsageError

__all__ = ["Shape", "check_plain", "short"]

#: Ints as large as a 64-bit counter: a pickle can hold an int of a million digits, which
#: Python then refuses to print.
MAX_INT_BITS = 64

_repr = reprlib.Repr()
_repr.maxstring, _repr.maxother, _repr.maxlevel = 60, 60, 3
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 6


def short(value: Any) -> str:
    """``repr(value)`` cut to a short line (strings, lists and nesting shortened with ``...``)."""
    return _repr.repr(value)


@dataclass(frozen=True)
class Shape:
    """How large one field's data may be: values in all, nesting, characters per string, and
    the leaf types it may hold besides plain ones (``torch.Tensor`` for weights)."""

    max_nodes: int
    max_depth: int
    max_text: int = 4096
    leaves: tuple[type, ...] = ()


_PLAIN = (type(None), bool, int, float, str)


def check_plain(value: Any, what: str, shape: Shape) -> None:
    """Refuse, naming ``what``, data that is not a plain tree within ``shape``.

    Raises:
        APIUsageError: a shared or self-containing container, more values than
            ``shape.max_nodes``, deeper nesting than ``shape.max_depth``, a long string, a huge
            int, or a value of another type.
    """
    seen: set[int] = set()
    # Breadth first: a container held twice is met twice at the same level, before the walk
    # goes deeper.
    queue: deque[tuple[Any, int]] = deque([(value, 0)])
    nodes = 0
    while queue:
        item, depth = queue.popleft()
        nodes += 1
        if isinstance(item, (list, tuple, dict)):
            if depth >= shape.max_depth:
                raise APIUsageError(f"{what} nests deeper than {shape.max_depth} levels: not the data it holds")
            if item and id(item) in seen:  # empty ones may be one shared object, and hold nothing
                raise APIUsageError(
                    f"{what} holds the same {type(item).__name__} more than once (shared references expand "
                    "exponentially when printed: a 'billion laughs'): not plain data"
                )
            seen.add(id(item))
            if nodes + len(queue) + len(item) > shape.max_nodes:
                raise APIUsageError(f"{what} holds more than {shape.max_nodes:,} values, more than it ever holds")
            children = item.items() if isinstance(item, dict) else ((None, entry) for entry in item)
            for key, entry in children:
                if isinstance(item, dict):
                    _check_key(key, what, shape)
                queue.append((entry, depth + 1))
        else:
            _check_leaf(item, what, shape)


def _check_key(key: Any, what: str, shape: Shape) -> None:
    if isinstance(key, str) and len(key) <= shape.max_text:
        return
    if isinstance(key, int) and not isinstance(key, bool) and key.bit_length() <= MAX_INT_BITS:
        return
    raise APIUsageError(f"{what} has a key {short(key)} that is not a short string or an int")


def _check_leaf(item: Any, what: str, shape: Shape) -> None:
    if isinstance(item, shape.leaves):
        return
    if type(item) not in _PLAIN:
        raise APIUsageError(f"{what} holds a {type(item).__name__}, not plain data (numbers, strings, lists, dicts)")
    if isinstance(item, str) and len(item) > shape.max_text:
        raise APIUsageError(f"{what} holds a string of {len(item):,} characters (at most {shape.max_text:,})")
    if type(item) is int and item.bit_length() > MAX_INT_BITS:
        raise APIUsageError(f"{what} holds an int of {item.bit_length():,} bits (at most {MAX_INT_BITS})")
