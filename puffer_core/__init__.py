"""Puffer Core: any RL environment, flat and fast, with environments as plugins."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from puffer_core import errors
from puffer_core.specs import BuildStage, CompatAxes, DockerLayer, EnvSpec, KnownBad, StageSource
from puffer_core.specs.hooks import hookimpl
from puffer_core.specs.kwarg_rules import AnyOf, Flag, FloatRange, IntRange, KwargRule, ListOf, OneOf, Text

if TYPE_CHECKING:  # bound on first use (below), so that `import puffer_core.tank.login` stays light
    from puffer_core.env.environments import make, make_raw

__version__ = "0.1.0"

__all__ = [
    "AnyOf",
    "BuildStage",
    "CompatAxes",
    "DockerLayer",
    "EnvSpec",
    "Flag",
    "FloatRange",
    "IntRange",
    "KnownBad",
    "KwargRule",
    "ListOf",
    "OneOf",
    "StageSource",
    "Text",
    "__version__",
    "errors",
    "hookimpl",
    "make",
    "make_raw",
]

_LAZY_SUBMODULES = {"vector", "emulation", "postprocess", "plugins", "testing", "adapters"}
#: Names whose module imports gymnasium and numpy (half a second): a box's login shell
#: (puffer_core.tank.login) runs on every ssh command and needs neither.
_LAZY_NAMES = {"make": "puffer_core.env.environments", "make_raw": "puffer_core.env.environments"}


def __getattr__(name: str) -> Any:
    # Submodules that pull in more than the core needs at import time load on first use.
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"puffer_core.{name}")
    if name in _LAZY_NAMES:
        value = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'puffer_core' has no attribute {name!r}")
