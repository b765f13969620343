"""What a creator kwarg may hold when a checkpoint brings it back: the rules of ``EnvSpec.restorable``.

A plugin names, per env, the kwargs a saved run may restore and what each may hold::

    EnvSpec("atari/pong", make, restorable={"frame_stack": IntRange(1, 16), "grayscale": Flag()})

``puffer eval DIR`` and ``puffer train --resume DIR`` refuse a saved kwarg that is not named,
or that a rule refuses, unless the user trusts it (``--trust-kwargs``). Each rule's
``problem(value)`` says why a value does not fit (``"must be an int from 1 to 16"``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from puffer_core.specs.limits import int_in, number_in

__all__ = ["AnyOf", "Flag", "FloatRange", "IntRange", "KwargRule", "ListOf", "OneOf", "Text"]


class KwargRule:
    """What one creator kwarg may hold when a checkpoint brings it back (``EnvSpec.restorable``)."""

    def problem(self, value: Any) -> str | None:
        """Why ``value`` does not fit (``"must be …"``), or None when it does."""
        raise NotImplementedError


@dataclass(frozen=True)
class IntRange(KwargRule):
    """An int in [low, high] (bools and floats refused)."""

    low: int
    high: int

    def problem(self, value: Any) -> str | None:
        return None if int_in(value, self.low, self.high) else f"must be an int from {self.low:,} to {self.high:,}"


@dataclass(frozen=True)
class FloatRange(KwargRule):
    """A finite number in [low, high] (ints accepted; bools, NaN and inf refused)."""

    low: float
    high: float

    def problem(self, value: Any) -> str | None:
        fits = number_in(value, self.low, self.high)
        return None if fits else f"must be a number in [{self.low:g}, {self.high:g}]"


@dataclass(frozen=True)
class Flag(KwargRule):
    """True or False."""

    def problem(self, value: Any) -> str | None:
        return None if isinstance(value, bool) else "must be true or false"


@dataclass(frozen=True, init=False)
class OneOf(KwargRule):
    """One of a few plain values, ``OneOf("lean", "all", None)``, compared with their type (1 is not True)."""

    choices: tuple[Any, ...]

    def __init__(self, *choices: Any):
        object.__setattr__(self, "choices", choices)

    def problem(self, value: Any) -> str | None:
        if any(type(value) is type(choice) and value == choice for choice in self.choices):
            return None
        return f"must be one of {', '.join(map(repr, self.choices))}"


@dataclass(frozen=True)
class Text(KwargRule):
    """A one-line string of at most ``max_length`` characters, matching ``pattern`` (a regex) when given."""

    max_length: int = 256
    pattern: str | None = None

    def problem(self, value: Any) -> str | None:
        if not isinstance(value, str) or len(value) > self.max_length or not value.isprintable():
            return f"must be a one-line string of at most {self.max_length:,} characters"
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            return f"must match {self.pattern!r}"
        return None


@dataclass(frozen=True)
class ListOf(KwargRule):
    """A list or tuple of at most ``max_length`` items, each fitting ``item``."""

    item: KwargRule
    max_length: int = 64

    def problem(self, value: Any) -> str | None:
        if not isinstance(value, (list, tuple)) or len(value) > self.max_length:
            return f"must be a list of at most {self.max_length:,} items"
        for index, entry in enumerate(value):
            why = self.item.problem(entry)
            if why is not None:
                return f"must hold items that fit (item {index} {why})"
        return None


@dataclass(frozen=True, init=False)
class AnyOf(KwargRule):
    """A value fitting any of ``rules``: ``AnyOf(IntRange(1, 100), OneOf(None))``."""

    rules: tuple[KwargRule, ...]

    def __init__(self, *rules: KwargRule):
        object.__setattr__(self, "rules", rules)

    def problem(self, value: Any) -> str | None:
        whys = [rule.problem(value) for rule in self.rules]
        return None if None in whys else ", or ".join(why for why in whys if why)
