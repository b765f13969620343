"""`puffer --version`: puffer-core's version and every installed plugin's distribution and version."""

from __future__ import annotations

import platform
from typing import Any

import click

import puffer_core
from puffer_core.plugins import FAILED, LOADED, PluginSet, get_plugins

__all__ = ["print_version", "version_lines"]


def version_lines(plugins: PluginSet) -> list[str]:
    """``puffer-core X (Python Y)``, then one line per installed plugin: its distribution and
    version, and why it is not in use where it did not load (the built-ins are puffer-core's)."""
    lines = [f"puffer-core {puffer_core.__version__} (Python {platform.python_version()})"]
    for info in plugins.plugins.values():
        if info.source == "builtin":
            continue
        dist = f"{info.distribution} {info.version}" if info.distribution else "(no distribution)"
        if info.status == LOADED:
            note = ""
        elif info.status == FAILED:
            note = ": failed to load (`puffer plugins` says why)"
        else:
            note = f": {info.error}"  # disabled by PUFFER_DISABLE_PLUGINS, not listed in PUFFER_LOAD_PLUGINS
        lines.append(f"{dist} (plugin {info.name}{note})")
    return lines


def print_version(ctx: click.Context, _param: Any, value: bool) -> None:
    """The eager ``--version`` option's callback: print the lines and exit."""
    if not value or ctx.resilient_parsing:
        return
    click.echo("\n".join(version_lines(get_plugins())))
    ctx.exit()
