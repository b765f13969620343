"""Where uv is: the matrix builds and installs with it, ``puffer tank compile`` resolves with it."""

from __future__ import annotations

import os
import pathlib
import shutil
import sys

__all__ = ["find_uv"]


def find_uv() -> str | None:
    """uv: ``$PUFFER_UV``, next to this Python, on PATH, or the ``uv`` Python package; None when none is found.

    Callers raise their own error when it is None: each knows what needed uv and says so.
    """
    explicit = os.environ.get("PUFFER_UV")
    if explicit:
        return explicit
    beside = pathlib.Path(sys.executable).parent / "uv"
    if beside.exists():
        return str(beside)
    found = shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin  # type: ignore[import-not-found]

        return find_uv_bin()
    except Exception:  # not installed, or installed without its binary
        return None
