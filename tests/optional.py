"""Optional heavy dependencies (torch and what needs it: Stable-Baselines3, the trainer).

Where they are missing, their tests skip; in `nox -s tests`, which installs them from the
local CPU torch wheel, PUFFER_REQUIRE_TORCH=1 turns a missing one into a failure instead.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def require(module: str) -> ModuleType:
    if os.environ.get("PUFFER_REQUIRE_TORCH"):
        return importlib.import_module(module)
    return pytest.importorskip(module)
