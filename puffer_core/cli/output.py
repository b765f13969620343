"""What every `puffer` command prints through: the stdout console, JSON for scripts, the
progress bar of a run's steps, and the check that an env id is known before anything is built."""

from __future__ import annotations

import json
from typing import Any

import click

from puffer_core.cli.errors import err_console
from puffer_core.cli.tables import output_console
from puffer_core.plugins import get_plugins

__all__ = ["console", "print_json", "require_known_env", "steps_bar"]

console = output_console()


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def require_known_env(target: str) -> None:
    """An env id no plugin declares is a usage error (with "Did you mean"), not a failed check."""
    plugins = get_plugins()
    if target not in plugins.env_specs and target not in plugins.duplicates:
        plugins.get_spec(target)  # raises UnknownEnvError naming close matches


def steps_bar(stats: str, *, hidden: bool = False) -> Any:
    """A progress bar of a run's steps on stderr: the task's description, the bar, steps done of
    all, ``stats`` (a template over the task's fields, e.g. ``{task.fields[sps]} steps/s``), the
    time elapsed and the time left. Gone when done; off (nothing drawn) where stderr is no
    terminal (a log or a pipe would keep a blank line of it) or where ``hidden``."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(f"steps · {stats}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal or hidden,
    )
