"""Plugins: the manager that finds, loads and indexes them (``manager``) and the plugins
built into puffer-core (``builtin``), which load through the same path as any other."""

from __future__ import annotations

from puffer_core.plugins.manager import *  # noqa: F403  (the package re-exports the manager's __all__)
from puffer_core.plugins.manager import FAILED as FAILED, LOADED as LOADED, __all__ as _MANAGER

__all__ = sorted([*_MANAGER, "FAILED", "LOADED"])
