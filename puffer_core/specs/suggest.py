"""Did-you-mean for a name that is not one of the choices: close spellings, and aliases (the
same thing's name in another library)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

__all__ = ["close_names", "did_you_mean"]


def close_names(name: str, choices: Iterable[str], aliases: Mapping[str, str] | None = None) -> list[str]:
    """The choices ``name`` may have meant: its alias alone (another library's name is not a
    typo), else up to 3 close spellings."""
    choices = list(choices)
    alias = (aliases or {}).get(name.lower())
    if alias in choices:
        return [alias]
    return difflib.get_close_matches(name.lower(), choices, n=3, cutoff=0.6)


def did_you_mean(name: str, choices: Iterable[str], aliases: Mapping[str, str] | None = None) -> str:
    """``" (did you mean learning_rate?)"`` for ``"lr"``, or ``""`` when nothing is close."""
    close = close_names(name, choices, aliases)
    return f" (did you mean {' or '.join(close)}?)" if close else ""
