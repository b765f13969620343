"""What the compatibility matrix needs to know about DeepMind Lab."""

from __future__ import annotations

from puffer_core import CompatAxes

__all__ = ["compat_axes"]


def compat_axes() -> CompatAxes:
    # Honest by construction: `deepmind-lab` is not on the package index, so every cell
    # records an install failure; the row is there so the table says so.
    return CompatAxes(package="deepmind-lab", versions=("1.0",), python=("3.10", "3.11"))
