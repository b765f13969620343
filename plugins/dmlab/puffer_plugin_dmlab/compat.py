"""What the compatibility matrix needs to know about DeepMind Lab."""

from __future__ import annotations

from puffer_core import CompatAxes

__all__ = ["compat_axes"]


def compat_axes() -> CompatAxes:
    # `deepmind-lab` is on no package index: PufferTank's environment layer builds it from the
    # user's source (our Docker stage), as version 1.0 for the image's Python. So its one cell
    # runs inside a built image (`puffer matrix run --tank-image`), never in a venv.
    return CompatAxes(package="deepmind-lab", versions=("1.0",), python=("3.11",), tank_only=True)
