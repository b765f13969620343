"""What the compatibility matrix needs to know about nle: the versions to try and why.

Evidence for the values below (checked against the package index and by building here):

* Requires-Dist of each wheel: nle 1.0.0 pins ``gymnasium==0.29.1``, 1.1.0 and 1.2.0 pin
  ``gymnasium==1.0.0``, 1.3.0 pins ``gymnasium==1.2.0`` (and Requires-Python >= 3.10).
  nle 0.9.1 is an sdist whose setup.py asks for ``gym>=0.15,<=0.23`` - which admits 0.23.0
  but not 0.23.1 - and whose ``nle/nethack/nethack.py`` imports ``pkg_resources``, gone
  from setuptools 81 on.
* Binary wheels (``pip download --only-binary=:all: --python-version X``): nle 1.0.0 has
  CPython 3.9-3.11 wheels, 1.1.0 and 1.2.0 3.9-3.12, 1.3.0 3.10-3.13; 0.9.x has none and
  compiles NetHack from source (cmake, flex, bison, libbz2; about 90 s on 2 cores).
* nle 0.9.1 built from source here on CPython 3.10, 3.12 and 3.13 with gym 0.23.0 and
  setuptools 80.10.2, with numpy 1.26 and numpy 2 (2.2 on 3.10, 2.5 on 3.13), and this
  plugin's tests pass against it on 3.10 (through puffer-core's gym adapter).
* gymnasium 0.29.1 (nle 1.0.0's pin) predates numpy 2 (``np.bool8``), hence numpy 1.26.4
  there - which has no CPython 3.13 wheel either.
"""

from __future__ import annotations

from puffer_core import CompatAxes, KnownBad

__all__ = ["compat_axes"]


def compat_axes() -> CompatAxes:
    return CompatAxes(
        package="nle",
        versions=("0.9.1", "1.0.0", "1.1.0", "1.2.0", "1.3.0"),
        python=("3.10", "3.11", "3.12", "3.13"),
        pins={
            "0.9.1": {"gym": "0.23.0", "setuptools": "80.10.2"},
            "1.0.0": {"gymnasium": "0.29.1", "numpy": "1.26.4"},
            "1.1.0": {"gymnasium": "1.0.0"},
            "1.2.0": {"gymnasium": "1.0.0"},
            "1.3.0": {"gymnasium": "1.2.0"},
        },
        known_bad=(
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
            # The gymnasium releases discovery adds (CompatAxes.follow) cannot install beside it.
            KnownBad(
                {"nle": ">=1.3,<1.4", "gymnasium": "!=1.2.0"},
                "nle 1.3.0 pins gymnasium==1.2.0 (its Requires-Dist)",
            ),
        ),
    )
