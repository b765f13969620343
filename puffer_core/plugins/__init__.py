"""Plugins: the manager that finds, loads and indexes them (``manager``) and the plugins
built into puffer-core (``builtin``), which load through the same path as any other."""

from __future__ import annotations

from puffer_core.plugins.manager import (
    BUILTIN_PLUGINS,
    DISABLE_ENV,
    FAILED,
    LOAD_ENV,
    LOADED,
    PluginInfo,
    PluginSet,
    get_plugins,
    load_plugins,
    reset_plugins,
)

__all__ = [
    "BUILTIN_PLUGINS",
    "DISABLE_ENV",
    "FAILED",
    "LOADED",
    "LOAD_ENV",
    "PluginInfo",
    "PluginSet",
    "get_plugins",
    "load_plugins",
    "reset_plugins",
]
