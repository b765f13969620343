"""PufferTank's environment layer for nle: the Debian packages to build NetHack from source."""

from __future__ import annotations

from puffer_core import DockerLayer

__all__ = ["BUILD_APT", "docker_layer"]

#: Debian packages NLE's README lists for building from source (nle 0.9.x, or any nle on
#: a Python it ships no wheel for). The 1.x wheels are self-contained manylinux builds
#: and need nothing at run time beyond libc and libstdc++.
BUILD_APT = (
    "autoconf",
    "bison",
    "build-essential",
    "cmake",
    "flex",
    "libbz2-dev",
    "libncurses-dev",
    "libtool",
    "pkg-config",
)


def docker_layer() -> DockerLayer:
    return DockerLayer(apt=BUILD_APT)
