"""The contract: what a plugin declares (``declarations``: ``EnvSpec``, ``DockerLayer`` and the
name rules they are checked by; ``compat``: ``CompatAxes``), the hooks it implements (``hooks``),
the rules of the env kwargs a checkpoint may bring back (``kwarg_rules``), the bounds every
setting is checked against (``limits``) and the image-reference grammar (``images``). Imports
nothing of puffer_core but ``errors``; every layer above may import it. Plugins take these names
from ``puffer_core`` itself.

Each name loads its module on first use: ``import puffer_core.specs.images`` (what a box's root
broker needs) then loads neither pluggy nor packaging.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from puffer_core.specs.compat import (
        CompatAxes as CompatAxes,
        KnownBad as KnownBad,
    )
    from puffer_core.specs.declarations import (
        KNOWN_APIS as KNOWN_APIS,
        BuildStage as BuildStage,
        DockerLayer as DockerLayer,
        EnvSpec as EnvSpec,
        StageSource as StageSource,
        env_id_problem as env_id_problem,
    )
    from puffer_core.specs.hooks import (
        hookimpl as hookimpl,
    )
    from puffer_core.specs.kwarg_rules import (
        AnyOf as AnyOf,
        Flag as Flag,
        FloatRange as FloatRange,
        IntRange as IntRange,
        KwargRule as KwargRule,
        ListOf as ListOf,
        OneOf as OneOf,
        Text as Text,
    )

#: Each public name and the module of this package that defines it.
WHERE = {
    **dict.fromkeys(("KNOWN_APIS", "BuildStage", "DockerLayer", "EnvSpec", "StageSource", "env_id_problem"),
                    "declarations"),
    **dict.fromkeys(("CompatAxes", "KnownBad"), "compat"),
    "hookimpl": "hooks",
    **dict.fromkeys(("AnyOf", "Flag", "FloatRange", "IntRange", "KwargRule", "ListOf", "OneOf", "Text"), "kwarg_rules"),
}  # fmt: skip
__all__ = sorted(WHERE, key=str.lower)


def __getattr__(name: str) -> Any:
    if name not in WHERE:
        raise AttributeError(f"module 'puffer_core.specs' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"puffer_core.specs.{WHERE[name]}"), name)
    globals()[name] = value
    return value
