"""PufferTank's environment layer for ale-py: nothing beyond pip."""

from __future__ import annotations

from puffer_core import DockerLayer

__all__ = ["docker_layer"]


def docker_layer() -> DockerLayer:
    # Nothing to add: the ale-py and opencv-python-headless wheels are self-contained
    # manylinux builds (SDL2 is bundled in ale-py; cv2 links only libc, libstdc++ and zlib,
    # all in a minimal Debian). The headless OpenCV build needs no libGL. Only
    # render_mode="human" would want X11/audio libraries, which a training image does not need.
    return DockerLayer()
