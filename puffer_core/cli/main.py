"""The `puffer` command. Errors are one-line messages with a non-zero exit, never tracebacks."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from puffer_core.cli.errors import MessageGroup, err_console, fail
from puffer_core.cli.options import (
    BATCH_SIZE,
    EPISODES,
    NUM_ENVS,
    NUM_WORKERS,
    SEED,
    STEPS,
    Bounded,
    env_kwargs_option,
    parse_pairs,
    record_option,
)
from puffer_core.cli.rollout import run_random
from puffer_core.cli.scaffold import scaffold_plugin
from puffer_core.cli.tables import print_markdown, print_table
from puffer_core.environments import missing_requirements
from puffer_core.matrix.cli import matrix
from puffer_core.plugins import get_plugins
from puffer_core.recording import plan_recording, plan_watch
from puffer_core.tank.cli import tank
from puffer_core.train.cli import eval_cmd, train_cmd

console = Console()


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


@click.group(cls=MessageGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="puffer-core", prog_name="puffer")
def cli() -> None:
    """Puffer Core: any RL environment, flat and fast.

    Environments come from plugins (`puffer plugins`); every environment has an id of
    the form PLUGIN/NAME (`puffer envs`). `puffer run classic/cartpole` steps one with
    random actions and reports steps per second.

    Environment variables: PUFFER_DISABLE_PLUGINS=a,b blocks plugins by name;
    PUFFER_LOAD_PLUGINS=a,b loads only those installed plugins (empty: none);
    PUFFER_DEBUG=1 shows tracebacks.
    """


@cli.command("plugins")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list for scripts.")
@click.option("--traceback", "show_tb", is_flag=True, help="Show the full traceback of failed plugins.")
def plugins_cmd(as_json: bool, show_tb: bool) -> None:
    """List plugins: status, version, hooks, envs, and why a plugin failed."""
    plugins = get_plugins()
    if as_json:
        print_json({"plugins": [info.to_json() for info in plugins.plugins.values()], "warnings": plugins.warnings})
        return
    table = Table(title="Puffer plugins")
    for column in ("plugin", "status", "version", "from", "hooks", "envs"):
        table.add_column(column)
    colours = {"loaded": "green", "failed": "red", "disabled": "yellow", "not selected": "yellow"}
    for info in plugins.plugins.values():
        source = info.distribution or info.source
        table.add_row(
            info.name,
            f"[{colours.get(info.status, 'white')}]{info.status}[/]",
            info.version or "-",
            source,
            ", ".join(h.removeprefix("puffer_") for h in info.hooks) or "-",
            str(len(info.envs)),
        )
    print_table(console, table)
    for info in plugins.plugins.values():
        if info.status == "failed":
            console.print(f"[red]✗ {info.name}[/]: {escape(str(info.error))}", highlight=False, soft_wrap=True)
            if show_tb and info.traceback:
                console.print(info.traceback, highlight=False, markup=False)
    for warning in plugins.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)


@cli.command("envs")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list for scripts.")
@click.option("--plugin", "plugin_name", help="Only the envs of this plugin.")
def envs_cmd(as_json: bool, plugin_name: str | None) -> None:
    """List every environment id, its API, and whether it can be made here."""
    plugins = get_plugins()
    if plugin_name is not None and plugin_name not in plugins.plugins:
        fail(f"no plugin named {plugin_name!r}; installed: {', '.join(plugins.plugins) or 'none'}")
    rows = []
    for env_id in plugins.env_ids():
        spec = plugins.env_specs[env_id]
        owner = plugins.env_owner[env_id]
        if plugin_name is not None and owner != plugin_name:
            continue
        missing = missing_requirements(spec)
        if env_id in plugins.duplicates:
            available, note = False, "declared by " + " and ".join(plugins.duplicates[env_id])
        elif missing:
            available = False
            note = f"needs {', '.join(missing)}: {spec.install_hint or 'pip install ' + ' '.join(missing)}"
        else:
            available, note = True, ""
        rows.append(
            {
                "id": env_id,
                "plugin": owner,
                "api": spec.api,
                "available": available,
                "note": note,
                "description": spec.description,
            }
        )
    if as_json:
        print_json({"envs": rows, "warnings": plugins.warnings})
        return
    table = Table(title="Puffer environments")
    for column in ("id", "api", "description", "available"):  # "available" last: its notes run long
        table.add_column(column, overflow="fold")
    for row in rows:
        mark = "[green]yes[/]" if row["available"] else f"[red]no[/] ({escape(row['note'])})"
        table.add_row(row["id"], row["api"], escape(row["description"]), mark)
    print_table(console, table)
    failed = [info for info in plugins.plugins.values() if info.status == "failed"]
    for info in failed:
        console.print(
            f"[red]✗ plugin {info.name} failed[/]: {escape(str(info.error))}", highlight=False, soft_wrap=True
        )
    for warning in plugins.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


@cli.command("run")
@click.argument("env_id")
@click.option("--steps", default=10_000, show_default=True, type=STEPS, help="Agent steps to run.")
@click.option("--num-envs", default=1, show_default=True, type=NUM_ENVS, help="Envs to vectorize.")
@click.option("--seed", default=0, show_default=True, type=SEED, help="Seed; env i gets seed + i.")
@click.option(
    "--backend",
    default="serial",
    show_default=True,
    type=click.Choice(["serial", "multiprocessing", "ray"]),
    help="Vectorization backend.",
)
@click.option("--num-workers", type=NUM_WORKERS, help="Worker processes (multiprocessing, ray).")
@click.option("--batch-size", type=BATCH_SIZE, help="Rows returned per recv (default: all).")
@env_kwargs_option
@record_option("Record env 0's episodes: .mp4 or .gif (pixel envs), .cast (text envs, asciinema).")
@click.option("--record-episodes", type=EPISODES, help="Stop recording after N episodes.  [default: all]")
@click.option("--watch", is_flag=True, help="Redraw env 0 in this terminal (text envs such as nethack/*).")
@click.option("--fps", type=click.FloatRange(0.1, 1000), help="Frames per second for --watch.  [default: the env's]")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (no progress bar).")
def run_cmd(
    env_id: str,
    steps: int,
    num_envs: int,
    seed: int,
    backend: str,
    num_workers: int | None,
    batch_size: int | None,
    kwargs: tuple[str, ...],
    record_path: str | None,
    overwrite: bool,
    record_episodes: int | None,
    watch: bool,
    fps: float | None,
    as_json: bool,
) -> None:
    """Run ENV_ID vectorized with random actions; print steps/second and episode stats.

    Where the observations carry an action mask (PettingZoo's board games), the random
    actions are drawn among the allowed ones: an illegal move would end the game at once.
    --record PATH records env 0's episodes, inside the process that steps it: an MP4 or
    GIF of its rgb_array frames (Atari, PettingZoo butterfly, classic control) or an
    asciinema v2 cast of its ANSI frames (NetHack's terminal, in colour; play it with
    `asciinema play PATH`). --watch redraws env 0's ANSI frames here instead, at the env's
    pace (--fps to change it); Ctrl-C stops.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    env_kwargs = parse_pairs(kwargs, "--kwarg")
    recording = _recording(env_id, env_kwargs, record_path, record_episodes, watch, fps, as_json, overwrite)
    options = dict(
        steps=steps,
        num_envs=num_envs,
        seed=seed,
        backend=backend,
        num_workers=num_workers,
        batch_size=batch_size,
        record=recording,
    )
    if as_json:
        result = run_random(env_id, **options, **env_kwargs)
        print_json(result.to_json())
        return
    progress = Progress(
        TextColumn(f"[bold]{env_id}[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("steps"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        # A log or a pipe would keep a blank line of it; --watch owns the terminal.
        disable=not err_console.is_terminal or watch,
    )
    with progress:
        task = progress.add_task("run", total=steps)
        result = run_random(env_id, on_progress=lambda n: progress.advance(task, n), **options, **env_kwargs)
    console.print(
        f"[bold]{env_id}[/]: {result.steps:,} steps in {result.seconds:.2f} s = "
        f"[bold green]{result.sps:,.0f} steps/s[/] "
        f"({result.backend}, {_count(result.num_envs, 'env')}, {_count(result.num_workers, 'worker')}, "
        f"batch {result.batch_size})",
        highlight=False,
    )
    if result.episodes:
        stats = ", ".join(f"{key} {value:.2f}" for key, value in result.episode_means.items())
        console.print(f"{result.episodes} episodes finished; mean {stats}", highlight=False)
    else:
        console.print("no episode finished within the steps run (try more --steps)")
    if record_path is not None:
        console.print(f"recorded env 0 to {record_path}", highlight=False, markup=False, soft_wrap=True)


def _recording(
    env_id: str,
    env_kwargs: dict[str, Any],
    path: str | None,
    episodes: int | None,
    watch: bool,
    fps: float | None,
    as_json: bool,
    overwrite: bool,
) -> Any:
    """The checked recording ``puffer run`` asked for (None: none); usage errors name the clash."""
    if watch and path is not None:
        raise click.UsageError("give --record PATH or --watch, not both")
    if watch and as_json:
        raise click.UsageError("--watch draws on the terminal; it cannot go with --json")
    if fps is not None and not watch:
        raise click.UsageError("--fps sets the speed of --watch; recordings play at the env's own frame rate")
    if episodes is not None and path is None:
        raise click.UsageError("--record-episodes needs --record PATH")
    if overwrite and path is None:
        raise click.UsageError("--overwrite replaces the --record file; give --record PATH")
    _require_known_env(env_id)
    if watch:
        return plan_watch(env_id, env_kwargs, fps)
    if path is not None:
        return plan_recording(env_id, path, env_kwargs, episodes, overwrite=overwrite)
    return None


@cli.command("bench")
@click.argument("env_id", required=False)
@click.option("--num-envs", default=16, show_default=True, type=NUM_ENVS, help="Envs per setting.")
@click.option("--seconds", default=3.0, show_default=True, type=click.FloatRange(0.1, 3600), help="Time per setting.")
@click.option("--rounds", default=1, show_default=True, type=Bounded(1, 1000), help="Interleaved repetitions.")
@click.option("--no-peers", is_flag=True, help="Skip gymnasium AsyncVectorEnv and PufferLib.")
@click.option("--ray", "include_ray", is_flag=True, help="Also measure the Ray backend.")
@click.option("--no-adapters", is_flag=True, help="Skip the to_gymnasium / to_sb3 rows.")
@click.option("--training", "training_only", is_flag=True, help="Only the training section (see below).")
@click.option("--no-training", is_flag=True, help="--standard without the training section.")
@click.option("--uneven", "uneven_only", is_flag=True, help="Only the uneven-cores section (see below).")
@click.option("--no-uneven", is_flag=True, help="--standard without the uneven-cores section.")
@click.option("--standard", "out_dir", type=click.Path(file_okay=False), help="Run the standard set into DIR.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
def bench_cmd(
    env_id: str | None,
    num_envs: int,
    seconds: float,
    rounds: int,
    no_peers: bool,
    include_ray: bool,
    no_adapters: bool,
    training_only: bool,
    no_training: bool,
    uneven_only: bool,
    no_uneven: bool,
    out_dir: str | None,
    as_json: bool,
) -> None:
    """Steps/second of ENV_ID on every backend and on the peers, with ratios, in one run.

    Compares a raw env loop, Serial, Multiprocessing (several worker/batch settings), the
    to_gymnasium / to_sb3 adapters next to the vector env they wrap, the cost of send()'s
    action checks (on and off, alternating on one Multiprocessing env), gymnasium's
    AsyncVectorEnv and PufferLib's vectorization when importable (without it, the report
    says how to install it), plus the emulation overhead of one env. Ratios are
    against the peers of the same run.
    --standard DIR runs the standard set (what `nox -s bench` runs) and stores it as
    DIR/<UTC time>.json (`python -m puffer_core.bench.results` renders the docs' tables from
    such files), with a training section: seconds to solve CartPole
    with `puffer train` against Stable-Baselines3's PPO (default hyperparameters), and PPO's
    steps/second on NetHack and Breakout against env-only stepping (needs the train and sb3
    extras). --training runs that section alone.
    --uneven runs the uneven-cores section alone (also part of --standard): a test env whose
    step burns a set CPU time, 3x longer on half the workers, stepped synchronously (step,
    full batches) and asynchronously (recv/send, half the envs per batch), one worker per
    core and two, in at least 2 interleaved rounds of --seconds each.
    """
    # deferred: loads only for this command (puffer's start-up stays light)
    from puffer_core.bench import vectorization as bench

    if training_only:
        _bench_training(as_json)
        return
    if uneven_only:
        if env_id is not None or out_dir is not None:
            raise click.UsageError("--uneven measures its own test env: give it without ENV_ID or --standard")
        _bench_uneven(seconds, max(2, rounds), as_json)
        return
    if out_dir is None and env_id is None:
        raise click.UsageError("give an ENV_ID (e.g. classic/cartpole), --standard DIR or --training")
    if out_dir is None:
        _require_known_env(env_id)  # every row would fail alike, each with the same error
    with _progress_callback("bench", hidden=as_json) as progress:
        if out_dir is not None:
            results = bench.run_standard(
                out_dir,
                seconds=seconds,
                rounds=rounds,
                progress=progress,
                include_peers=not no_peers,
                include_training=not no_training,
                include_uneven=not no_uneven,
            )
        else:
            rows = bench.run_bench(
                env_id,
                num_envs=num_envs,
                seconds=seconds,
                include_peers=not no_peers,
                progress=progress,
                rounds=rounds,
                include_ray=include_ray,
                include_adapters=not no_adapters,
            )
    if out_dir is not None:
        if as_json:
            print_json(results)
        else:
            console.print(f"wrote {out_dir.rstrip('/')}/{results['run']}.json", highlight=False)
        return
    if as_json:
        print_json(rows)
    else:
        print_table(console, bench.render_table(rows))


@cli.command("autotune")
@click.argument("env_id")
@click.option(
    "--num-envs",
    type=NUM_ENVS,
    help="Envs per setting.  [default: the standard bench count: 8 for nethack/score and atari/breakout, else 16]",
)
@click.option(
    "--seconds",
    default=60.0,
    show_default=True,
    type=click.FloatRange(1, 3600),
    help="Time budget for the whole run, building every setting included.",
)
@env_kwargs_option
@click.option("--json", "as_json", is_flag=True, help="Print every row and the best as JSON.")
def autotune_cmd(env_id: str, num_envs: int | None, seconds: float, kwargs: tuple[str, ...], as_json: bool) -> None:
    """Measure vector settings on ENV_ID and print the fastest as a vector.make(...) call.

    Serial and Multiprocessing with 1, cores - 1, cores and 2 x cores workers, full and
    half batches (EnvPool-style), the main process stepping a share or not: each setting
    is built and stepped with random actions in at least two interleaved rounds within
    --seconds, and keeps its best round. Each row reports steps/s, RAM per env (the main
    process and workers' memory over the envs) and the share of steps that ended an
    episode. From Python: puffer_core.vector.autotune(env, num_envs, budget).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # deferred: loads only for this command (puffer's start-up stays light)
    from puffer_core.vector.autotuner import autotune, render_table, summary_lines

    env_kwargs = parse_pairs(kwargs, "--kwarg")
    _require_known_env(env_id)
    progress = Progress(
        TextColumn(f"[bold]autotune {env_id}[/] {{task.description}}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=as_json or not err_console.is_terminal,  # a log or a pipe gets the table only
    )
    with progress:
        task = progress.add_task("", total=None)

        def advance(name: str, done: int, total: int) -> None:
            progress.update(task, description=name, completed=done, total=total)

        result = autotune(env_id, num_envs, seconds, progress=advance, verbose=False, **env_kwargs)
    if as_json:
        print_json(result)
        return
    print_table(console, render_table(result))
    for line in summary_lines(result):
        console.print(line, highlight=False, markup=False, soft_wrap=True)


@contextlib.contextmanager
def _progress_callback(description: str, hidden: bool) -> Iterator[Callable[[str, int, int], None]]:
    """A transient bar on stderr (none in a log or a pipe), as the ``progress(name, done,
    total)`` callback the bench runners take."""
    from rich.progress import Progress

    with Progress(console=err_console, transient=True, disable=hidden or not err_console.is_terminal) as bar:
        task = bar.add_task(description, total=None)
        yield lambda name, done, total: bar.update(task, description=name, completed=done, total=total)


def _bench_uneven(seconds: float, rounds: int, as_json: bool) -> None:
    # deferred: loads only for this command (puffer's start-up stays light)
    from puffer_core.bench import uneven as bench_uneven

    with _progress_callback("uneven cores", hidden=as_json) as progress:
        result = bench_uneven.run_uneven(seconds, rounds, progress=progress)
    if as_json:
        print_json(result)
    else:
        print_table(console, bench_uneven.render_table(result))


def _bench_training(as_json: bool) -> None:
    from rich.progress import Progress

    # deferred: loads only for this command (puffer's start-up stays light)
    from puffer_core.bench import training as bench_training

    with Progress(console=err_console, transient=True, disable=as_json or not err_console.is_terminal) as bar:
        task = bar.add_task("training", total=None)
        document = bench_training.run_training(
            progress=lambda name, done, total: bar.update(task, description=name, completed=done, total=total)
        )
    if as_json:
        print_json(document)
    else:
        print_markdown(console, bench_training.render_markdown(document))


@cli.command("check")
@click.argument("target", metavar="ENV_OR_PLUGIN")
@click.option("--steps", default=64, show_default=True, type=Bounded(1, 1_000_000), help="Steps per check.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
def check_cmd(target: str, steps: int, as_json: bool) -> None:
    """Conformance checks for a plugin (all its envs) or one env id.

    Spaces declared match what the env returns, the reset/step contract, determinism by
    seed, emulation round trip, the peers' own checkers (gymnasium's check_env on a
    single-agent env, pettingzoo's parallel_api_test on a multi-agent one; their warnings
    are shown, not failed), a short Multiprocessing run, and the plugin's DockerLayer and
    CompatAxes. Envs whose package is missing are skipped. Exits 1 when any check fails.
    From Python: puffer_core.testing.conformance.
    """
    # deferred: loads only for this command (puffer's start-up stays light)
    from puffer_core.testing.conformance import check, iter_lines

    if "/" in target:  # a plugin name is checked by check() itself
        _require_known_env(target)
    report = check(target, steps=steps)
    if as_json:
        print_json(report.to_json())
    else:
        for line, result in zip(iter_lines(report), report.results):
            style = "yellow" if result.skipped else "green" if result.passed else "red"
            console.print(line, style=style, highlight=False, markup=False, soft_wrap=True)
        failed = sum(not r.passed for r in report.results)
        skipped = sum(r.skipped for r in report.results)
        summary = f"{len(report.results) - failed - skipped} passed, {failed} failed"
        if skipped:
            summary += f", {skipped} skipped (missing packages)"
        console.print(summary, style="bold green" if not failed else "bold red", highlight=False)
    if not report.passed:
        sys.exit(1)


def _require_known_env(target: str) -> None:
    """An env id no plugin declares is a usage error (with "Did you mean"), not a failed check."""
    plugins = get_plugins()
    if target not in plugins.env_specs and target not in plugins.duplicates:
        plugins.get_spec(target)  # raises UnknownEnvError naming close matches


@cli.command("new-plugin")
@click.argument("name")
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Write into DIRECTORY even if it is not empty.")
def new_plugin_cmd(name: str, directory: str | None, force: bool) -> None:
    """Scaffold a working plugin distribution NAME in DIRECTORY (default ./puffer-plugin-NAME)."""
    from pathlib import Path

    target = scaffold_plugin(name, Path(directory) if directory else None, force=force)
    console.print(f"wrote plugin [bold]{name}[/] to {target}", highlight=False)
    console.print(f"next: pip install -e {target} && puffer check {name} && pytest {target}/tests", highlight=False)


# Command groups that live beside the code they drive (train imports torch only when it runs).
cli.add_command(matrix)
cli.add_command(tank)
cli.add_command(train_cmd)
cli.add_command(eval_cmd)


def main() -> None:
    cli(prog_name="puffer")


if __name__ == "__main__":
    main()
