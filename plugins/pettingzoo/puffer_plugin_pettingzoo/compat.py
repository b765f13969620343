"""What the compatibility matrix needs to know about PettingZoo: the versions to try and why."""

from __future__ import annotations

from puffer_core import CompatAxes, KnownBad

__all__ = ["GYMNASIUM_VERSIONS", "PETTINGZOO_VERSIONS", "compat_axes"]

#: PettingZoo releases the matrix tries (newest patch of each minor; 1.24.4 is where
#: gymnasium >= 1.0 became required).
PETTINGZOO_VERSIONS = ("1.22.3", "1.23.1", "1.24.3", "1.24.4", "1.25.0", "1.26.1", "1.27.0")
GYMNASIUM_VERSIONS = ("0.29.1", "1.0.0", "1.2.0")


def compat_axes() -> CompatAxes:
    # Requires-Python and Requires-Dist read from each release's wheel metadata
    # (`pip download --no-deps pettingzoo==X`); they become known-bad cells with that reason.
    return CompatAxes(
        package="pettingzoo",
        versions=PETTINGZOO_VERSIONS,
        python=("3.10", "3.11", "3.12", "3.13"),
        axes={"gymnasium": GYMNASIUM_VERSIONS},
        # Releases up to 1.24.3 turn a 1-element action array into a Python scalar
        # (pistonball), which NumPy 2.4 refuses ("only 0-dimensional arrays can be converted
        # to Python scalars"); they are tried with the last NumPy they work with.
        pins={version: {"numpy": "2.2.6"} for version in ("1.22.3", "1.23.1", "1.24.3")},
        extras=(),
        known_bad=(
            KnownBad(
                when={"pettingzoo": ">=1.24.4", "gymnasium": "<1.0"},
                reason="pettingzoo >= 1.24.4 requires gymnasium >= 1.0.0",
            ),
            KnownBad(
                when={"pettingzoo": "<1.23", "python": ">=3.12"},
                reason="pettingzoo 1.22.x declares Requires-Python < 3.12",
            ),
            KnownBad(
                when={"pettingzoo": ">=1.24.4,<1.26", "python": ">=3.13"},
                reason="pettingzoo 1.24.4 and 1.25.0 declare Requires-Python < 3.13",
            ),
            # Build failures, not metadata: what the matrix logged before these entries.
            KnownBad(
                when={"pettingzoo": "<1.24", "python": "==3.11"},
                reason="its classic extra needs hanabi-learning-environment 0.0.4: no wheel for "
                "Python 3.11, and its CMake build fails there",
            ),
            KnownBad(
                when={"pettingzoo": ">=1.23,<1.24.4", "python": ">=3.12"},
                reason="its butterfly extra pins pygame 2.3.0: no wheel for Python >= 3.12, and its build fails there",
            ),
        ),
    )
