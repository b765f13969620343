"""What PufferTank and the compatibility matrix need to know about nle.

Evidence for the values below (checked against the package index):

* Requires-Dist of each wheel: nle 1.0.0 pins ``gymnasium==0.29.1``, 1.1.0 and 1.2.0 pin
  ``gymnasium==1.0.0``, 1.3.0 pins ``gymnasium==1.2.0`` (and Requires-Python >= 3.10);
  nle 0.9.1 is an sdist whose setup.py asks for ``gym>=0.15,<=0.23``.
* Binary wheels (``pip download --only-binary=:all: --python-version X``): nle 1.0.0 has
  CPython 3.9–3.11 wheels, 1.1.0 and 1.2.0 3.9–3.12, 1.3.0 3.10–3.13; 0.9.x has none and
  compiles NetHack from source (cmake, flex, bison, libbz2).
* gym 0.23 and gymnasium 0.29.1 predate numpy 2 (``np.bool8``), hence the numpy pins.
"""

from __future__ import annotations

from puffer_core.specs import CompatAxes, DockerLayer, KnownBad

__all__ = ["compat_axes", "docker_layer"]

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


def compat_axes() -> CompatAxes:
    return CompatAxes(
        package="nle",
        versions=("0.9.1", "1.0.0", "1.1.0", "1.2.0", "1.3.0"),
        python=("3.10", "3.11", "3.12", "3.13"),
        pins={
            "0.9.1": {"gym": "0.23.0", "numpy": "1.26.4", "setuptools": "80.10.2"},
            "1.0.0": {"gymnasium": "0.29.1", "numpy": "1.26.4"},
            "1.1.0": {"gymnasium": "1.0.0"},
            "1.2.0": {"gymnasium": "1.0.0"},
            "1.3.0": {"gymnasium": "1.2.0"},
        },
        known_bad=(
            KnownBad(
                {"nle": "<1.0", "python": ">=3.12"},
                "nle 0.9 builds from source and needs gym<=0.23, which predates Python 3.12 "
                "(gym 0.23 and nle 0.9's setup.py are untested there; numpy 1.26, needed by gym 0.23, "
                "has no Python 3.13 wheel)",
            ),
            KnownBad(
                {"nle": "==1.0.0", "python": ">=3.12"},
                "nle 1.0.0 ships wheels for CPython 3.9-3.11 only; its pin gymnasium==0.29.1 needs numpy<2, "
                "which has no Python 3.13 wheel",
            ),
            KnownBad(
                {"nle": ">=1.1,<1.3", "python": ">=3.13"},
                "nle 1.1.0 and 1.2.0 ship wheels for CPython 3.9-3.12 only",
            ),
            KnownBad(
                {"nle": ">=1.3", "python": "<3.10"},
                "nle 1.3 declares Requires-Python >=3.10",
            ),
        ),
    )
