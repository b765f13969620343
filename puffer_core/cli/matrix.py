"""``puffer matrix show``, ``render``, ``run`` (what ``nox -s compat -- …`` runs) and ``discover``: the terminal side.

The matrix itself is :mod:`puffer_core.matrix`; this module turns options into
:class:`~puffer_core.matrix.options.RunOptions`, the run's events into progress lines,
and results.json into tables.
"""

from __future__ import annotations

import json
import pathlib
import signal
from collections.abc import Iterable, Mapping
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from puffer_core.cli.errors import MessageGroup
from puffer_core.cli.options import Bounded
from puffer_core.cli.tables import output_console, print_table
from puffer_core.matrix import views
from puffer_core.matrix.discover import DiscoveryReport, discover_releases
from puffer_core.matrix.environment import allowlist_help
from puffer_core.matrix.options import DEFAULT_TANK_IMAGE, REPO_ROOT, RunOptions
from puffer_core.matrix.plan import split_values
from puffer_core.matrix.runner import RunSummary, run_matrix
from puffer_core.matrix.shipped import shipped_folder, write_shipped
from puffer_core.matrix.simple_index import DEFAULT_TIMEOUT
from puffer_core.matrix.sources import discover as discover_plugins
from puffer_core.matrix.store import MatrixError, ResultStore, common_sections
from puffer_core.matrix.views import COLOURS, SYMBOLS, cell_text, plugin_tables, run_line, seconds_text

__all__ = ["matrix", "print_matrix"]

console = output_console()


class MatrixGroup(MessageGroup):
    """Errors as messages; an interrupted run keeps what it recorded."""

    interrupted_message = "interrupted: the cells recorded so far are kept; run again to resume"


def _out_dir(out: str | None) -> pathlib.Path:
    return pathlib.Path(out).resolve() if out else REPO_ROOT / "compat_matrix"


@click.group("matrix", cls=MatrixGroup)
def matrix() -> None:
    """The compatibility matrix: which plugin versions work with which Python and companions.

    `puffer matrix run` builds it (as `nox -s compat` does); `puffer matrix show` prints it
    and writes nothing; `puffer matrix render` rewrites compat_matrix/README.md and index.html
    from results.json; `puffer matrix discover` asks the package index for new releases of
    what the plugins follow.
    """


@matrix.command("show")
@click.option("--plugin", "plugins", multiple=True, metavar="NAME", help="Only this plugin (repeatable, or a,b).")
@click.option("--json", "as_json", is_flag=True, help="Print the results (cells, common set) as JSON.")
@click.option("--out", type=click.Path(file_okay=False), help="The results folder (default: compat_matrix/).")
def show_cmd(plugins: tuple[str, ...], as_json: bool, out: str | None) -> None:
    """Print the matrix from results.json; write nothing (`puffer matrix render` rewrites its views)."""
    folder = _out_dir(out)
    store = _results(folder)
    names = split_values(plugins)
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
    print_matrix(data, console, names or None)
    stale = [name for name, text in views.view_texts(store.data).items() if _text_or_none(folder / name) != text]
    if stale:
        console.print(
            f"note: {', '.join(stale)} in {folder} missing or out of date with results.json: "
            "`puffer matrix render` rewrites them",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )


@matrix.command("render")
@click.option("--out", type=click.Path(file_okay=False), help="The results folder (default: compat_matrix/).")
def render_cmd(out: str | None) -> None:
    """Rewrite README.md and index.html from results.json, and what else is made from it.

    Also constraints-common.txt (when results.json has a common set) and, when the folder is
    the checkout's compat_matrix/, the constraint sets and verified.json shipped in
    puffer_core/matrix/verified/ (what `puffer constraints` and `puffer doctor` read).
    Nothing is run; every file is written atomically.
    """
    folder = _out_dir(out)
    store = _results(folder)
    written = views.write_views(store.data, folder)
    shipped = shipped_folder(REPO_ROOT, folder)
    if shipped is not None:
        written += write_shipped(store.data, shipped)
    for path in written:
        console.print(f"wrote {path}", highlight=False, soft_wrap=True, markup=False)


def _results(folder: pathlib.Path) -> ResultStore:
    """The folder's results.json, or the one-line error that says how to make it."""
    store = ResultStore(folder / "results.json")
    if not store.exists:
        raise MatrixError(f"no results in {folder}: run `nox -s compat` (or `puffer matrix run`) first")
    return store


def _text_or_none(path: pathlib.Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def _progress_reporter(progress: Any, task_holder: dict[str, Any]) -> Any:
    """The run's events (see :data:`~puffer_core.matrix.options.Reporter`) as lines above the progress bar."""
    colours = {
        "pass": "green",
        "excluded": "magenta",
        "interpreter-missing": "bright_black",
        "tank-missing": "bright_black",
        "timeout": "yellow",
    }

    def report(event: str, record: Any, info: dict[str, Any]) -> None:
        out = progress.console
        if event == "would-run":
            out.print(
                f"would run {info['id']}: {' '.join(info['requirements'])} ({info['reason']})",
                highlight=False,
                soft_wrap=True,
                markup=False,
            )
        elif event == "discovered":
            print_discovery(info["report"], out)
        elif event == "start":
            verb = "would run" if info.get("dry_run") else "to run"
            why = ", ".join(f"{reason}: {count}" for reason, count in info.get("reasons", {}).items())
            out.print(
                f"[bold]matrix:[/] {info['todo']} cell(s) {verb} with {info['jobs']} job(s)"
                + (f" ({escape(why)})" if why else "")
                + f"; {info['skipped']} unchanged (skipped), {info['excluded']} excluded",
                highlight=False,
                soft_wrap=True,
            )
            task_holder["task"] = progress.add_task("cells", total=info["todo"])
        elif event == "cell":
            colour = colours.get(record.outcome, "red")
            line = (
                f"{SYMBOLS.get(record.outcome, '?')} [{colour}]{record.outcome:<19}[/] {escape(record.id)}  "
                f"{seconds_text(record.seconds)}"
            )
            if record.error and record.outcome != "pass":  # a log's text: shown as text, never as markup
                line += f"\n    [dim]{escape(record.error)}[/]"
            out.print(line, highlight=False, soft_wrap=True)
            if "task" in task_holder:
                progress.advance(task_holder["task"])
        elif event == "building":
            out.print(f"building wheels: {', '.join(info['wheels'])}", highlight=False, soft_wrap=True, markup=False)
        elif event == "common-start":
            out.print(
                f"[bold]common set (Python {info['python']}):[/] joint cell with {escape(', '.join(info['members']))}",
                highlight=False,
                soft_wrap=True,
            )
        elif event == "common":
            out.print(
                f"  joint cell: {info['outcome']} in {seconds_text(info['seconds'])}"
                + (f" — {info['error']}" if info.get("error") else ""),
                highlight=False,
                soft_wrap=True,
                markup=False,
            )

    return report


INDEX_HELP = (
    "The package index to ask (a simple-API URL, http(s):// or file://). Default: the indexes pip and uv "
    "would use (UV_DEFAULT_INDEX, UV_INDEX_URL, PIP_INDEX_URL, pip's index-url, else the public index) "
    "and their extra indexes (UV_INDEX, UV_EXTRA_INDEX_URL, PIP_EXTRA_INDEX_URL, pip's extra-index-url)."
)

RUN_HELP = f"""Build the matrix: a fresh uv venv per new or stale cell, install, smoke run; results.json and views.

A cell runs when it is new or one of its inputs changed (its definition, the plugin's
source, the core's source, the runner); `--dry-run` lists each with that reason and
results.json keeps it. The cells are the plugins' declared ones and those the releases in
discovered.json add (`--discover` updates it first). Failing cells are recorded, never
fatal: the command fails only when the matrix machinery itself breaks, or when
`--discover` cannot read the package index (then nothing is changed).

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
    "as in tox's pass_env): a private index's settings need it ('PIP_*', 'UV_INDEX*'). Results of "
    "cells already run stay: add --force to re-run them.",
)
@click.option(
    "--discover",
    is_flag=True,
    help="First ask the package index for new releases of what the plugins follow (as `puffer matrix "
    "discover` does, updating discovered.json); then run the new and stale cells.",
)
@click.option("--index", metavar="URL", help=INDEX_HELP)
@click.option(
    "--tank-image",
    default=DEFAULT_TANK_IMAGE,
    show_default=True,
    metavar="IMAGE",
    help="The PufferTank image the cells of a tank-only plugin run in (DeepMind Lab: on no index, built by "
    "the image); without it (or without Docker) they record tank-missing.",
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
    discover: bool,
    index: str | None,
    tank_image: str,
) -> None:
    if index and not discover:
        raise MatrixError("--index only tells --discover where to look: add --discover, or leave --index out")
    options = RunOptions(
        root=REPO_ROOT,
        out=_out_dir(out),
        plugins_dir=pathlib.Path(plugins_dir) if plugins_dir else None,
        work=pathlib.Path(work) if work else None,
        plugins=split_values(plugins),
        pythons=split_values(pythons),
        quick=quick,
        force=force,
        jobs=jobs,
        timeout=timeout,
        common=not no_common,
        keep_venvs=keep_venvs,
        builtins=not no_builtins,
        dry_run=dry_run,
        pass_env=list(pass_env),
        discover=discover,
        index=index,
        tank_image=tank_image,
    )
    summary = _run_with_progress(options)
    for warning in summary.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
    if dry_run:
        console.print(
            f"dry run: {summary.skipped} unchanged, {summary.excluded} excluded; nothing was run", highlight=False
        )
        return
    _print_summary(summary, options)


def _run_with_progress(options: RunOptions) -> RunSummary:
    """``run_matrix`` under a progress bar; SIGTERM (``kill PID``) stops it as Ctrl-C does."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

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
            return run_matrix(options, _progress_reporter(progress, holder))
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminate(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _print_summary(summary: RunSummary, options: RunOptions) -> None:
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


@matrix.command("discover")
@click.option("--index", metavar="URL", help=INDEX_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print what was found (releases, new ones, cells) as JSON.")
@click.option("--dry-run", is_flag=True, help="Ask the index and print what is new; write nothing.")
@click.option("--out", type=click.Path(file_okay=False), help="The results folder (default: compat_matrix/).")
@click.option(
    "--plugins-dir",
    type=click.Path(file_okay=False, exists=True),
    help="Where plugin source folders live (default: plugins/).",
)
@click.option("--no-builtins", is_flag=True, help="Leave out the built-in plugins (classic).")
@click.option(
    "--timeout",
    default=DEFAULT_TIMEOUT,
    show_default=True,
    type=click.FloatRange(1, 600),
    help="Seconds to wait for the index at each request.",
)
def discover_cmd(
    index: str | None,
    as_json: bool,
    dry_run: bool,
    out: str | None,
    plugins_dir: str | None,
    no_builtins: bool,
    timeout: float,
) -> None:
    """Ask the package index which releases of the followed packages exist; keep them in discovered.json.

    A plugin follows its environment package, its axes, the companions its newest version
    pins and what its CompatAxes.follow names. Of each minor series the newest release
    counts, when newer than what the plugin declares (and inside its follow bound); it
    becomes cells of `puffer matrix run` (excluded, with the reason, on a Python it cannot
    install on). Yanked releases and pre-releases are left out. If an index cannot be read,
    nothing is written and the command fails.
    """
    folder = _out_dir(out)
    sources = discover_plugins(
        pathlib.Path(plugins_dir).resolve() if plugins_dir else REPO_ROOT / "plugins", not no_builtins
    )
    report = discover_releases(sources, folder, index, timeout=timeout, dry_run=dry_run)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
        return
    print_discovery(report, console)


def print_discovery(report: DiscoveryReport, out: Console) -> None:
    """What discovery found, one line per followed package, then where it was kept."""
    out.print(f"package index: {', '.join(report.indexes)}", highlight=False, soft_wrap=True, markup=False)
    for name, news in report.packages.items():
        line = f"{name} (followed by {', '.join(news.followed_by)}): "
        if not news.releases:
            line += "nothing newer than the plugins declare"
        else:
            shown = [f"{v} (new)" if v in news.new else v for v in news.releases]
            line += ", ".join(shown)
            if news.cells:
                line += " → cells added: " + ", ".join(f"{plugin} {len(ids)}" for plugin, ids in news.cells.items())
        if news.refused:
            line += f"; {news.refused} file(s) left out: their Requires-Python is not a PEP 440 version specifier"
        out.print(line, highlight=False, soft_wrap=True, markup=False)
    releases = sum(len(news.releases) for news in report.packages.values())
    added = sum(len(ids) for ids in report.added.values())
    if report.dry_run:
        what = f"dry run, {report.path} not written"
    else:
        what = f"wrote {report.path}" if report.written else f"{report.path} unchanged"
    out.print(
        f"{what}: {releases} release(s) followed, {added} new cell(s)",
        highlight=False,
        soft_wrap=True,
        markup=False,
    )


# -- the matrix on the terminal ---------------------------------------------------------------


def _print_common(common: Mapping[str, Any], out: Console) -> None:
    """One Python's common set: its members and pins, the joint cell's outcome, who was left out."""
    joint = common.get("joint") or {}
    members = ", ".join(
        f"{m['plugin']} ({', '.join(f'{k}=={v}' for k, v in m['pins'].items())})" for m in common.get("members", [])
    )
    out.print(
        f"[bold]common set[/] (Python {escape(str(common.get('python')))}, joint cell "
        f"{escape(str(joint.get('outcome', 'not run')))}): {escape(members) or 'empty'}",
        highlight=False,
        soft_wrap=True,
    )
    for plugin, reason in (common.get("dropped") or {}).items():
        out.print(f"  left out [yellow]{escape(plugin)}[/]: {escape(reason)}", highlight=False, soft_wrap=True)


def print_matrix(data: Mapping[str, Any], out: Console, plugins: Iterable[str] | None = None) -> None:
    """One table per plugin (failures numbered, their errors under the table), the common set, the cold run."""
    for table in plugin_tables(data, plugins):
        if table.get("error"):
            out.print(
                f"[red]{escape(table['plugin'])}: could not be loaded:[/] {escape(table['error'])}",
                highlight=False,
                soft_wrap=True,
            )
        if not table["rows"]:
            continue
        numbers: dict[str, int] = {}  # note text -> its number under the table
        print_table(out, _plugin_table(table, numbers))
        for text, number in numbers.items():
            out.print(f"  [{number}] {text}", highlight=False, markup=False, soft_wrap=True)
    if not plugins:
        for common in common_sections(data):
            _print_common(common, out)
    runs = data.get("runs") or {}
    if runs.get("cold"):
        out.print("cold run: " + run_line(runs["cold"]).replace("**", ""), highlight=False, soft_wrap=True)


def _plugin_table(table: Mapping[str, Any], numbers: dict[str, int]) -> Table:
    """One plugin's rich table; each failure's error gets a number in ``numbers``."""
    # a title and a column header are read as markup: the texts in them are escaped
    view = Table(title=escape(f"{table['plugin']} — {table['package']}"), show_lines=True)
    view.add_column(escape(f"{table['package']} (pins)"), overflow="fold")
    for py in table["pythons"]:
        view.add_column(escape(f"Python {py}"), overflow="fold")
    for row in table["rows"]:
        label = Text(row["label"], style="bold")
        if row["detail"]:
            label.append("\n" + row["detail"], style="dim")
        view.add_row(label, *(_cell(row["cells"].get(py), numbers) for py in table["pythons"]))
    return view


def _cell(cell: Mapping[str, Any] | None, numbers: dict[str, int]) -> Text:
    outcome = cell["outcome"] if cell else "not run"
    if cell is None or outcome == "pass":
        return Text(cell_text(cell, markdown=False), style=COLOURS[outcome][1])
    number = numbers.setdefault(cell.get("error") or "?", len(numbers) + 1)
    short = f"{SYMBOLS[outcome]} {outcome} {seconds_text(cell.get('seconds'))}".strip()
    if outcome == "excluded":
        short = f"{SYMBOLS[outcome]} excluded"
    return Text(f"{short} [{number}]", style=COLOURS[outcome][1])
