"""Puffer Core: any RL environment, flat and fast, with environments as plugins."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from puffer_core import errors as errors, specs

if TYPE_CHECKING:  # each bound on first use (below), so that `import puffer_core.tank.box.login` stays light
    from puffer_core.env.environments import (
        make as make,
        make_raw as make_raw,
    )
    from puffer_core.specs import (
        AnyOf as AnyOf,
        BuildStage as BuildStage,
        CompatAxes as CompatAxes,
        DockerLayer as DockerLayer,
        EnvSpec as EnvSpec,
        Flag as Flag,
        FloatRange as FloatRange,
        IntRange as IntRange,
        KnownBad as KnownBad,
        KwargRule as KwargRule,
        ListOf as ListOf,
        OneOf as OneOf,
        StageSource as StageSource,
        Text as Text,
        hookimpl as hookimpl,
    )

__version__ = "0.1.0"

#: The contract's names a plugin author takes from puffer_core (the specs' own helpers stay there).
_FROM_SPECS = frozenset(specs.WHERE) - {"KNOWN_APIS", "env_id_problem"}
__all__ = sorted([*_FROM_SPECS, "__version__", "errors", "make", "make_raw"], key=str.lower)

_LAZY_SUBMODULES = {"vector", "emulation", "postprocess", "plugins", "testing", "adapters"}
#: Names whose module imports gymnasium and numpy (half a second): a box's login shell
#: (puffer_core.tank.box.login) runs on every ssh command and needs neither.
_LAZY_NAMES = {"make": "puffer_core.env.environments", "make_raw": "puffer_core.env.environments"}


def __getattr__(name: str) -> Any:
    # Submodules that pull in more than the core needs at import time load on first use.
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"puffer_core.{name}")
    if name in _LAZY_NAMES or name in _FROM_SPECS:
        value = getattr(importlib.import_module(_LAZY_NAMES.get(name, "puffer_core.specs")), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'puffer_core' has no attribute {name!r}")
