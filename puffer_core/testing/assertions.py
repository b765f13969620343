"""Assertions for tests: nested values equal, frames a recording shows."""

from __future__ import annotations

from typing import Any

import numpy as np

from puffer_core.env.gif import gif_frame_ms

__all__ = ["assert_trees_equal", "played_frames"]


def played_frames(path: Any, fps: float) -> int:
    """Frames a recorded video shows (``puffer run --record``): an MP4's frame count, a GIF's
    total duration over one frame's (a recorded GIF shows identical consecutive frames as one
    longer frame; see ``puffer_core.env.gif.gif_frame_ms``). Needs imageio."""
    if str(path).lower().endswith(".gif"):
        from PIL import Image, ImageSequence

        with Image.open(path) as gif:
            total = sum(frame.info["duration"] for frame in ImageSequence.Iterator(gif))
        return round(total / gif_frame_ms(fps))
    import imageio.v3 as iio

    return len(iio.imread(path, index=None))


def assert_trees_equal(a: Any, b: Any, path: str = "obs") -> None:
    """Assert two nested dict/tuple/array values are equal, naming the first differing path."""
    if isinstance(a, dict):
        if not isinstance(b, dict) or set(a) != set(b):
            raise AssertionError(f"{path}: keys differ: {sorted(a)} vs {sorted(b) if isinstance(b, dict) else b!r}")
        for key in a:
            assert_trees_equal(a[key], b[key], f"{path}[{key!r}]")
        return
    if isinstance(a, tuple):
        if not isinstance(b, (tuple, list)) or len(a) != len(b):
            raise AssertionError(f"{path}: tuple lengths differ")
        for i, (x, y) in enumerate(zip(a, b)):
            assert_trees_equal(x, y, f"{path}[{i}]")
        return
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape and x.size == y.size == 1:
        x, y = x.reshape(()), y.reshape(())
    if x.shape != y.shape or not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
        raise AssertionError(f"{path}: {x!r} != {y!r}")
