"""The contract: what a plugin declares (``declarations``: ``EnvSpec``, ``DockerLayer`` and the
name rules they are checked by; ``compat``: ``CompatAxes``), the hooks it implements (``hooks``),
the rules of the env kwargs a checkpoint may bring back (``kwarg_rules``), and the bounds every
setting is checked against (``limits``). Imports nothing of puffer_core but ``errors``; every
layer above may import it. Plugins take these names from ``puffer_core`` itself."""

from __future__ import annotations

from puffer_core.specs.compat import CompatAxes, KnownBad
from puffer_core.specs.declarations import KNOWN_APIS, BuildStage, DockerLayer, EnvSpec, StageSource, env_id_problem
from puffer_core.specs.hooks import hookimpl
from puffer_core.specs.kwarg_rules import AnyOf, Flag, FloatRange, IntRange, KwargRule, ListOf, OneOf, Text

__all__ = [
    "KNOWN_APIS",
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
    "env_id_problem",
    "hookimpl",
]
