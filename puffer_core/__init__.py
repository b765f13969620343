"""Puffer Core: any RL environment, flat and fast, with environments as plugins."""

from __future__ import annotations

import importlib
from typing import Any

from puffer_core import errors
from puffer_core.env.environments import make, make_raw
from puffer_core.specs import BuildStage, CompatAxes, DockerLayer, EnvSpec, KnownBad
from puffer_core.specs.hooks import hookimpl
from puffer_core.specs.kwarg_rules import AnyOf, Flag, FloatRange, IntRange, KwargRule, ListOf, OneOf, Text

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
    "Text",
    "__version__",
    "errors",
    "hookimpl",
    "make",
    "make_raw",
]

_LAZY_SUBMODULES = {"vector", "emulation", "postprocess", "plugins", "testing", "adapters"}


def __getattr__(name: str) -> Any:
    # Submodules that pull in more than the core needs at import time load on first use.
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"puffer_core.{name}")
    raise AttributeError(f"module 'puffer_core' has no attribute {name!r}")
