"""What every `puffer` command prints through: the stdout console, JSON for scripts, and
the check that an env id is known before anything is built."""

from __future__ import annotations

import json
from typing import Any

import click

from puffer_core.cli.tables import output_console
from puffer_core.plugins import get_plugins

__all__ = ["console", "print_json", "require_known_env"]

console = output_console()


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def require_known_env(target: str) -> None:
    """An env id no plugin declares is a usage error (with "Did you mean"), not a failed check."""
    plugins = get_plugins()
    if target not in plugins.env_specs and target not in plugins.duplicates:
        plugins.get_spec(target)  # raises UnknownEnvError naming close matches
