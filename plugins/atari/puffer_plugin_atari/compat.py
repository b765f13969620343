"""What the compatibility matrix needs to know about ale-py: the versions to try and why.

Evidence (each wheel's METADATA, and ``pip download --only-binary=:all: --python-version X``):

* ale-py declares no gymnasium requirement at all (gymnasium is only in its test /
  vector extras), so the pairings below come from what each release imports:
  0.8.1 imports ``gym`` (0.26 API; its test extra asks for gym~=0.23) and bundles only
  Tetris — every other ROM came from AutoROM, which downloads them at install time from
  outside the package index. 0.9.x and 0.10.x import plain ``gymnasium`` (0.29 or 1.0
  work; their test extra asks for gymnasium>=1.0.0a1). From 0.11.1 on,
  ``ale_py/__init__.py`` imports ``ale_py.vector_env``, which imports
  ``gymnasium.vector.AutoresetMode``, new in gymnasium 1.1: ``import ale_py`` fails on
  older gymnasium. 0.10.0 requires numpy<2.0.
* CPython wheels: 0.8.x up to 3.11, 0.9.x and 0.10.0 up to 3.12, 0.10.1 onwards 3.13,
  0.12 needs Python >= 3.10 (and adds 3.14).
"""

from __future__ import annotations

from puffer_core import CompatAxes, KnownBad

__all__ = ["compat_axes"]


def compat_axes() -> CompatAxes:
    return CompatAxes(
        package="ale-py",
        versions=("0.8.1", "0.9.1", "0.10.2", "0.11.2", "0.12.1"),
        python=("3.10", "3.11", "3.12", "3.13"),
        pins={
            "0.8.1": {"gym": "0.26.2", "numpy": "1.26.4"},
            "0.9.1": {"gymnasium": "0.29.1", "numpy": "1.26.4"},
            "0.10.2": {"gymnasium": "1.0.0"},
            "0.11.2": {"gymnasium": "1.1.1"},
            "0.12.1": {"gymnasium": "1.2.0"},
        },
        extras=("opencv-python-headless",),
        known_bad=(
            KnownBad(
                {"ale-py": "<0.9"},
                "ale-py 0.8 bundles only the Tetris ROM: the others come from AutoROM "
                "(autorom[accept-rom-license]), which downloads them at install time from outside the package "
                "index; 0.8 also speaks the gym API, and this plugin needs ale-py >= 0.9",
            ),
            KnownBad(
                {"ale-py": "<0.10", "python": ">=3.13"},
                "ale-py 0.9.x ships wheels for CPython up to 3.12 only (gymnasium 0.29.1 also needs numpy<2, "
                "which has no 3.13 wheel)",
            ),
            KnownBad(
                {"ale-py": ">=0.11.1", "gymnasium": "<1.1"},
                "ale-py >= 0.11.1 imports gymnasium.vector.AutoresetMode (gymnasium >= 1.1) when imported",
            ),
            KnownBad(
                {"ale-py": ">=0.12", "python": "<3.10"},
                "ale-py 0.12 declares Requires-Python >=3.10",
            ),
        ),
    )
