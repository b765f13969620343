"""Hook specifications: the contract between Puffer Core and its plugins (specs only)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

from puffer_core.specs.compat import CompatAxes
from puffer_core.specs.declarations import DockerLayer, EnvSpec

__all__ = [
    "PROJECT",
    "hookimpl",
    "hookspec",
    "puffer_adapt",
    "puffer_compat_axes",
    "puffer_docker_layer",
    "puffer_envs",
    "puffer_wrappers",
]

#: The pluggy project name, which is also the entry-point group plugins declare.
PROJECT = "puffer"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
"""The marker a plugin decorates its hook implementations with: ``@puffer_core.hookimpl``.

A pluggy ``HookimplMarker`` for the project ``puffer``; it takes pluggy's options
(``@hookimpl(tryfirst=True)``, ``hookwrapper``, …). The hooks and what they return: the
hook reference (``docs/hooks.md``).
"""


@hookspec
def puffer_envs() -> list[EnvSpec]:
    """Called once when the plugin is loaded; returns the list of ``EnvSpec`` it provides."""


@hookspec(firstresult=True)
def puffer_adapt(env: Any, spec: EnvSpec) -> Any | None:
    """Called by ``make`` on every raw env; returns it converted to Gymnasium or PettingZoo
    Parallel, or None when this adapter does not apply (the first non-None result wins)."""


@hookspec
def puffer_wrappers(spec: EnvSpec) -> list[Callable[[Any], Any]] | None:
    """Called by ``make`` after adaptation; returns callables ``wrapper(env) -> env`` the
    plugin applies to its own envs (an empty list, or None, for other plugins' specs)."""


@hookspec
def puffer_docker_layer() -> DockerLayer | None:
    """Called when rendering PufferTank; returns the plugin's ``DockerLayer`` (or None)."""


@hookspec
def puffer_compat_axes() -> CompatAxes | None:
    """Called by the compatibility matrix; returns the plugin's ``CompatAxes`` (or None)."""
