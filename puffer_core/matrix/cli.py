"""``puffer matrix show`` and ``puffer matrix run`` (the same options as ``nox -s compat -- …``)."""

from __future__ import annotations

import json
import pathlib
import signal
import sys
from typing import Any

import click
from rich.console import Console

from puffer_core.cli.errors import MessageGroup
from puffer_core.cli.options import Bounded
from puffer_core.matrix import render
from puffer_core.matrix.environment import allowlist_help
from puffer_core.matrix.render import SYMBOLS, _seconds
from puffer_core.matrix.runner import RunOptions, run_matrix
from puffer_core.matrix.store import MatrixError, ResultStore

__all__ = ["main", "matrix"]

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
console = Console()
err_console = Console(stderr=True)


class MatrixGroup(MessageGroup):
    """Errors as messages; an interrupted run keeps what it recorded."""

    interrupted_message = "interrupted: the cells recorded so far are kept; run again to resume"


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _out_dir(out: str | None) -> pathlib.Path:
    return pathlib.Path(out).resolve() if out else REPO_ROOT / "compat_matrix"


@click.group("matrix", cls=MatrixGroup)
def matrix() -> None:
    """The compatibility matrix: which plugin versions work with which Python and companions.

    `puffer matrix run` builds it (as `nox -s compat` does); `puffer matrix show` prints it
    and re-renders compat_matrix/README.md and index.html from results.json.
    """


@matrix.command("show")
@click.option("--plugin", "plugins", multiple=True, metavar="NAME", help="Only this plugin (repeatable, or a,b).")
@click.option("--json", "as_json", is_flag=True, help="Print the results (cells, common set) as JSON.")
@click.option("--out", type=click.Path(file_okay=False), help="The results folder (default: compat_matrix/).")
def show_cmd(plugins: tuple[str, ...], as_json: bool, out: str | None) -> None:
    """Print the matrix from results.json (and rewrite README.md and index.html from it)."""
    folder = _out_dir(out)
    store = ResultStore(folder / "results.json")
    if not store.exists:
        raise MatrixError(f"no results in {folder}: run `nox -s compat` (or `puffer matrix run`) first")
    names = _split(plugins)
    known = {cell["plugin"] for cell in store.data["cells"].values()} | set(store.data.get("plugins", {}))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise MatrixError(
            f"no plugin named {', '.join(map(repr, unknown))} in the matrix; known: "
            f"{', '.join(sorted(known)) or 'none'}"
        )
    data = store.data
    if as_json:
        if names:
            data = {
                **data,
                "cells": {k: v for k, v in data["cells"].items() if v["plugin"] in names},
                "plugins": {k: v for k, v in data.get("plugins", {}).items() if k in names},
            }
        click.echo(json.dumps(data, indent=2))
        return
    render.write_views(store.data, folder)
    render.render_terminal(data, console, names or None)


def _progress_reporter(progress: Any, task_holder: dict[str, Any]) -> Any:
    colours = {"pass": "green", "excluded": "magenta", "interpreter-missing": "bright_black", "timeout": "yellow"}

    def report(event: str, record: Any, info: dict[str, Any]) -> None:
        out = progress.console
        if event == "would-run":
            out.print(f"would run {info['id']}: {' '.join(info['requirements'])}", highlight=False, soft_wrap=True)
        elif event == "start":
            verb = "would run" if info.get("dry_run") else "to run"
            out.print(
                f"[bold]matrix:[/] {info['todo']} cell(s) {verb} with {info['jobs']} job(s); "
                f"{info['skipped']} unchanged (skipped), {info['excluded']} excluded",
                highlight=False,
            )
            task_holder["task"] = progress.add_task("cells", total=info["todo"])
        elif event == "cell":
            colour = colours.get(record.outcome, "red")
            line = (
                f"{SYMBOLS.get(record.outcome, '?')} [{colour}]{record.outcome:<19}[/] {record.id}  "
                f"{_seconds(record.seconds)}"
            )
            if record.error and record.outcome != "pass":
                line += f"\n    [dim]{record.error}[/]"
            out.print(line, highlight=False, soft_wrap=True)
            if "task" in task_holder:
                progress.advance(task_holder["task"])
        elif event == "building":
            out.print(f"building wheels: {', '.join(info['wheels'])}", highlight=False, soft_wrap=True)
        elif event == "common-start":
            out.print(
                f"[bold]common set:[/] joint cell with {', '.join(info['members'])}", highlight=False, soft_wrap=True
            )
        elif event == "common":
            out.print(
                f"  joint cell: {info['outcome']} in {_seconds(info['seconds'])}"
                + (f" — {info['error']}" if info.get("error") else ""),
                highlight=False,
                soft_wrap=True,
            )

    return report


RUN_HELP = f"""Build the matrix: a fresh uv venv per changed cell, install, smoke run; results.json and views.

Failing cells are recorded, never fatal: the command fails only when the matrix
machinery itself breaks.

{allowlist_help()}
"""


@matrix.command("run", help=RUN_HELP)
@click.option("--plugin", "plugins", multiple=True, metavar="NAME", help="Only these plugins (repeatable, or a,b).")
@click.option("--python", "pythons", multiple=True, metavar="X.Y", help="Only cells on this Python (repeatable).")
@click.option("--quick", is_flag=True, help="Only the newest cell of each plugin, on the default Python (3.11).")
@click.option("--force", is_flag=True, help="Re-run the selected cells even if their inputs did not change.")
@click.option("--jobs", "-j", default=1, show_default=True, type=Bounded(1, 256), help="Cells in parallel.")
@click.option(
    "--timeout",
    default=1800.0,
    show_default=True,
    type=click.FloatRange(1, 7 * 24 * 3600),
    help="Seconds one cell may take (venv, install and smoke run).",
)
@click.option("--no-common", is_flag=True, help="Skip the common set and its joint cell.")
@click.option("--keep-venvs", is_flag=True, help="Keep each cell's venv (in compat_matrix/.venvs/venvs/).")
@click.option("--out", type=click.Path(file_okay=False), help="The results folder (default: compat_matrix/).")
@click.option(
    "--plugins-dir",
    type=click.Path(file_okay=False, exists=True),
    help="Where plugin source folders live (default: plugins/).",
)
@click.option(
    "--work", type=click.Path(file_okay=False), help="Where cell venvs and built wheels go (default: <out>/.venvs)."
)
@click.option("--no-builtins", is_flag=True, help="Leave out the built-in plugins (classic).")
@click.option("--dry-run", is_flag=True, help="List the cells that would run; run and change nothing.")
@click.option(
    "--pass-env",
    "pass_env",
    multiple=True,
    metavar="NAME",
    help="Also give cells this variable of the caller's environment (repeatable; '*' and '?' glob, "
    "as in tox's pass_env). Results of cells already run stay: add --force to re-run them.",
)
def run_cmd(
    plugins: tuple[str, ...],
    pythons: tuple[str, ...],
    quick: bool,
    force: bool,
    jobs: int,
    timeout: float,
    no_common: bool,
    keep_venvs: bool,
    out: str | None,
    plugins_dir: str | None,
    work: str | None,
    no_builtins: bool,
    dry_run: bool,
    pass_env: tuple[str, ...],
) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    options = RunOptions(
        root=REPO_ROOT,
        out=_out_dir(out),
        plugins_dir=pathlib.Path(plugins_dir) if plugins_dir else None,
        work=pathlib.Path(work) if work else None,
        plugins=_split(plugins),
        pythons=_split(pythons),
        quick=quick,
        force=force,
        jobs=jobs,
        timeout=timeout,
        common=not no_common,
        keep_venvs=keep_venvs,
        builtins=not no_builtins,
        dry_run=dry_run,
        pass_env=list(pass_env),
    )
    progress = Progress(
        TextColumn("[bold]matrix[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    holder: dict[str, Any] = {}
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, _terminate)  # `kill PID`: stop the cells in flight, keep what is recorded
    try:
        with progress:
            summary = run_matrix(options, _progress_reporter(progress, holder))
    finally:
        signal.signal(signal.SIGTERM, previous)
    for warning in summary.warnings:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    if dry_run:
        console.print(
            f"dry run: {summary.skipped} unchanged, {summary.excluded} excluded; nothing was run", highlight=False
        )
        return
    outcomes = ", ".join(f"{SYMBOLS.get(k, '')} {k} {v}" for k, v in sorted(summary.outcomes.items()))
    rate = f" ({summary.cells_per_minute:.1f} cells/min)" if summary.ran else ""
    console.print(
        f"[bold]ran {summary.ran} cell{'s' if summary.ran != 1 else ''}[/] in {summary.seconds:.1f} s{rate}; "
        f"skipped {summary.skipped} unchanged; {summary.excluded} excluded. Outcomes of the selection: "
        f"{outcomes or 'none'}",
        highlight=False,
        soft_wrap=True,
    )
    if summary.common is not None:
        members = ", ".join(m["plugin"] for m in summary.common.get("members", [])) or "empty"
        console.print(f"common set: {members}", highlight=False, soft_wrap=True)
    console.print(
        f"results: {options.out / 'results.json'}; table: {options.out / 'README.md'}", highlight=False, soft_wrap=True
    )


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    matrix(prog_name="python -m puffer_core.matrix")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
