"""The `puffer` command. Errors are one-line messages with a non-zero exit, never tracebacks."""

from __future__ import annotations

import sys
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from puffer_core.cli.bench import autotune_cmd, bench_cmd
from puffer_core.cli.constraints import constraints_cmd
from puffer_core.cli.doctor import doctor_cmd, warn_if_known_bad
from puffer_core.cli.envs_listing import env_rows, gymnasium_lines, gymnasium_rows, listing_lines, listing_width
from puffer_core.cli.errors import MessageGroup, err_console, fail
from puffer_core.cli.fleet import fleet
from puffer_core.cli.matrix import matrix
from puffer_core.cli.options import (
    BATCH_SIZE,
    EPISODES,
    NUM_ENVS,
    NUM_WORKERS,
    SEED,
    STEPS,
    Bounded,
    env_kwargs_option,
    parse_env_kwargs_option,
    ray_options,
    ray_vector_kwargs,
    record_option,
)
from puffer_core.cli.output import console, print_json, require_known_env, steps_bar
from puffer_core.cli.runs import runs_cmd
from puffer_core.cli.scaffold import scaffold_plugin
from puffer_core.cli.sweep import sweep_cmd
from puffer_core.cli.tables import print_table
from puffer_core.cli.tank import tank
from puffer_core.cli.train import eval_cmd, train_cmd
from puffer_core.cli.version import print_version
from puffer_core.env.environments import SpecCreator
from puffer_core.env.recording import plan_recording, plan_watch, published, receipted
from puffer_core.plugins import get_plugins
from puffer_core.vector.random_run import run_random


@click.group(cls=MessageGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=print_version,
    help="Show puffer-core's version and every plugin's, then exit.",
)
def cli() -> None:
    """Puffer Core: any RL environment, flat and fast.

    Environments come from plugins (`puffer plugins`); every environment has an id of
    the form PLUGIN/NAME (`puffer envs`), and any id gymnasium registers is one too
    (CartPole-v1 is classic/cartpole; `puffer envs --gymnasium` lists the others).
    `puffer run classic/cartpole` steps one with random actions and reports steps per
    second.

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
    plugins.check_make_hooks()  # make's hooks too: one that raises fails its plugin here, not in make
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
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list for scripts (every field whole).")
@click.option("--plugin", "plugin_name", help="Only the envs of this plugin.")
@click.option("--gymnasium", "gymnasium_ids", is_flag=True, help="The ids gymnasium registers that no plugin covers.")
def envs_cmd(as_json: bool, plugin_name: str | None, gymnasium_ids: bool) -> None:
    """List every environment id by plugin, its API, and whether it can be made here.

    Lines fit the terminal (COLUMNS, else 80 on a pipe); what to install for a plugin's
    envs is said once, above them. --json has every field whole. Any id gymnasium
    registers (CartPole-v1, ALE/Pong-v5; from Python, your own gymnasium.register) is an
    env id too: a plugin's alias for it (listed under "aliases" in --json) gives the
    plugin's env, the others --gymnasium lists.
    """
    plugins = get_plugins()
    plugins.check_make_hooks()
    if plugin_name is not None and gymnasium_ids:
        raise click.UsageError("--gymnasium lists the ids no plugin covers: drop --plugin")
    if gymnasium_ids:
        rows = gymnasium_rows(plugins)
        if as_json:
            print_json({"gymnasium": rows})
        else:
            for line in gymnasium_lines(rows, listing_width()):
                click.echo(line)
        return
    if plugin_name is not None and plugin_name not in plugins.plugins:
        fail(f"no plugin named {plugin_name!r}; installed: {', '.join(plugins.plugins) or 'none'}")
    rows = env_rows(plugins, plugin_name)
    if as_json:
        print_json({"envs": rows, "warnings": plugins.warnings})
        return
    failed = [f"plugin {info.name} failed: {info.error}" for info in plugins.plugins.values() if info.error]
    extra = [*failed, *(f"warning: {warning}" for warning in plugins.warnings)]
    for line in listing_lines(rows, plugins, listing_width(), extra):
        click.echo(line)


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
@click.option("--native", is_flag=True, help="Step the env in its plugin's native batches (see puffer envs).")
@ray_options
@env_kwargs_option
@record_option("Record env 0's episodes: .mp4 or .gif (pixel envs), .cast (text envs, asciinema).")
@click.option("--record-episodes", type=EPISODES, help="Stop recording after N episodes.  [default: all]")
@click.option("--watch", is_flag=True, help="Redraw env 0 in this terminal (text envs such as nethack/*).")
@click.option("--fps", type=click.FloatRange(0.1, 1000), help="Frames per second for --watch.  [default: the env's]")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (no progress bar).")
def run_cmd(env_id: str, kwargs: tuple[str, ...], as_json: bool, **options: Any) -> None:
    """Run ENV_ID vectorized with random actions; print steps/second and episode stats.

    Where the observations carry an action mask (PettingZoo's board games), the random
    actions are drawn among the allowed ones: an illegal move would end the game at once.
    --record PATH records env 0's episodes, inside the process that steps it: an MP4 or
    GIF of its rgb_array frames (Atari, PettingZoo butterfly, classic control) or an
    asciinema v2 cast of its ANSI frames (NetHack's terminal, in colour; play it with
    `asciinema play PATH`). --watch redraws env 0's ANSI frames here instead, at the env's
    pace (--fps to change it); Ctrl-C stops. With --backend ray, --ray-address runs the
    workers on a Ray cluster and --placement spreads them over its nodes (or packs them);
    the summary says which node and host each worker ran on. --native steps the env in
    its plugin's native batches (one object stepping many envs, e.g. ALE's vector env for
    atari/*; `puffer envs` marks the envs that have them).
    """
    record_path, watch = options.pop("record_path"), options.pop("watch")
    recording_options = {key: options.pop(key) for key in ("record_episodes", "fps", "overwrite")}
    _check_recording_options(record_path, watch, as_json, **recording_options)
    spec = get_plugins().get_spec(env_id)  # the one lookup: an unknown id is one line naming close ones
    env = SpecCreator(spec)
    env_kwargs = parse_env_kwargs_option(spec, kwargs)
    warn_if_known_bad(spec.id)
    vector_kwargs = ray_vector_kwargs(options["backend"], options.pop("ray_address"), options.pop("placement"))
    if options.pop("native"):
        vector_kwargs = {**(vector_kwargs or {}), "native": True}
    options.update(vector_kwargs=vector_kwargs or None, interruptible=True)  # Ctrl-C: the summary of what ran
    recording = _recording(env, env_kwargs, record_path, watch, **recording_options)
    with receipted(recording) as tracked:
        options["record"] = tracked
        if as_json:
            result = run_random(env, **options, **env_kwargs)
        else:
            result = _run_with_progress(env, watch, options, env_kwargs)
        written = published(tracked)  # NAME-2.SUFFIX where NAME appeared meanwhile
    if as_json:
        print_json({**result.to_json(), **({"record": written} if record_path is not None else {})})
    else:
        _print_run(spec.id, result, record_path, written)
    if result.interrupted:
        err_console.print(f"interrupted after {result.steps:,} steps (Ctrl-C)", highlight=False)
        sys.exit(130)


def _run_with_progress(env: Any, watch: bool, options: dict[str, Any], env_kwargs: dict[str, Any]) -> Any:
    """``run_random`` under a progress bar on stderr (steps/s and the time left; none in a log or a pipe, nor
    with --watch)."""
    progress = steps_bar("{task.fields[sps]} steps/s", hidden=watch)  # --watch owns the terminal
    name = escape(env.__name__)
    building = f"building {options['num_envs']:,} envs of {name}…" if options["num_envs"] > 1 else name
    with progress:
        # Until the first step, the bar says what takes the time (65,536 CartPoles take most of a minute).
        task = progress.add_task(building, total=options["steps"], sps="–")

        def advance(n: int) -> None:
            progress.update(task, description=name)
            progress.advance(task, n)
            elapsed = progress.tasks[0].elapsed
            if elapsed:
                progress.update(task, sps=f"{progress.tasks[0].completed / elapsed:,.0f}")

        return run_random(env, on_progress=advance, **options, **env_kwargs)


def _print_run(env_id: str, result: Any, record_path: str | None, written: str | None) -> None:
    """The summary of a random run: steps/second, the placement of its workers, episode means."""
    console.print(
        f"[bold]{env_id}[/]: {result.steps:,} steps in {result.seconds:.2f} s = "
        f"[bold green]{result.sps:,.0f} steps/s[/] "
        f"({result.backend}, {_slots(result.num_envs, result.agents_per_env)}"
        f"{' in native batches' if result.native else ''}, "
        f"{_count(result.num_workers, 'worker')}, batch {result.batch_size})",
        highlight=False,
    )
    for line in _placement_lines(result.placement):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    if result.episodes:
        stats = ", ".join(f"{key} {value:.2f}" for key, value in result.episode_means.items())
        console.print(f"{result.episodes} episodes finished; mean {stats}", highlight=False)
    elif result.interrupted:
        console.print("no episode finished before Ctrl-C")
    else:
        console.print("no episode finished within the steps run (try more --steps)")
    if record_path is not None and written is None:
        console.print(f"nothing recorded to {record_path}: env 0 rendered no frame", highlight=False, markup=False)
    elif record_path is not None:
        console.print(f"recorded env 0 to {written}", highlight=False, markup=False, soft_wrap=True)


def _slots(rows: int, agents_per_env: int) -> str:
    """``"4 envs"``, or for a multi-agent env ``"1 env × 20 agents = 20 slots"``: the vector
    env counts agent slots, the user asked for envs."""
    if agents_per_env == 1:
        return _count(rows, "env")
    return f"{_count(rows // agents_per_env, 'env')} × {_count(agents_per_env, 'agent')} = {_count(rows, 'slot')}"


def _placement_lines(placement: list[dict[str, Any]] | None) -> list[str]:
    """Where the workers ran (the Ray backend's ``envs.placement``), one line per node."""
    if not placement:
        return []
    by_node: dict[str, list[dict[str, Any]]] = {}
    for entry in placement:
        by_node.setdefault(entry.get("node_id") or "?", []).append(entry)
    lines = [f"workers on {_count(len(by_node), 'node')}:"]
    for node, entries in by_node.items():
        where = f"{entries[0].get('host') or '?'} ({entries[0].get('address') or '?'})"
        workers = ", ".join(f"{entry['worker']} (envs {_span(entry.get('envs', []))})" for entry in entries)
        noun = "worker" if len(entries) == 1 else "workers"
        lines.append(f"  {where}, node {node[:12]}: {noun} {workers}")
    return lines


def _span(envs: list[int]) -> str:
    """``[0, 1, 2]`` as ``0-2``; anything else comma-separated."""
    if len(envs) > 1 and list(envs) == list(range(envs[0], envs[-1] + 1)):
        return f"{envs[0]}-{envs[-1]}"
    return ",".join(str(env) for env in envs) or "none"


def _check_recording_options(
    path: str | None, watch: bool, as_json: bool, record_episodes: int | None, fps: float | None, overwrite: bool
) -> None:
    """Options of ``puffer run`` that cannot go together: a usage error naming the clash, before anything else."""
    if watch and path is not None:
        raise click.UsageError("give --record PATH or --watch, not both")
    if watch and as_json:
        raise click.UsageError("--watch draws on the terminal; it cannot go with --json")
    if fps is not None and not watch:
        raise click.UsageError("--fps sets the speed of --watch; recordings play at the env's own frame rate")
    if record_episodes is not None and path is None:
        raise click.UsageError("--record-episodes needs --record PATH")
    if overwrite and path is None:
        raise click.UsageError("--overwrite replaces the --record file; give --record PATH")


def _recording(
    env: Any,
    env_kwargs: dict[str, Any],
    path: str | None,
    watch: bool,
    record_episodes: int | None,
    fps: float | None,
    overwrite: bool,
) -> Any:
    """The recording ``puffer run`` asked for, planned once here (None: none); ``vector.make`` takes the plan."""
    if watch:
        return plan_watch(env, env_kwargs, fps)
    if path is not None:
        return plan_recording(env, path, env_kwargs, record_episodes, overwrite=overwrite)
    return None


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
        require_known_env(target)
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


@cli.command("new-plugin")
@click.argument("name")
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Write into DIRECTORY even if it is not empty.")
def new_plugin_cmd(name: str, directory: str | None, force: bool) -> None:
    """Scaffold a working plugin distribution NAME in DIRECTORY (default ./puffer-plugin-NAME)."""
    from pathlib import Path

    target = scaffold_plugin(name, Path(directory) if directory else None, force=force)
    console.print(f"wrote plugin [bold]{name}[/] to {target}", highlight=False)
    # The [test] extra brings pytest into the venv the plugin is installed in (another pytest lacks puffer_core).
    console.print(f"next: python -m pip install -e '{target}[test]' && puffer check {name} && "
                  f"python -m pytest {target}/tests", highlight=False, markup=False)  # fmt: skip


# Commands kept in their own modules (train imports torch only when it runs).
cli.add_command(bench_cmd)
cli.add_command(autotune_cmd)
cli.add_command(matrix)
cli.add_command(constraints_cmd)
cli.add_command(tank)
cli.add_command(train_cmd)
cli.add_command(eval_cmd)
cli.add_command(runs_cmd)
cli.add_command(fleet)
cli.add_command(sweep_cmd)
cli.add_command(doctor_cmd)


def main() -> None:
    cli(prog_name="puffer")


if __name__ == "__main__":
    main()
