"""`puffer bench` and `puffer autotune`: the command-line side of :mod:`puffer_core.bench`
and :mod:`puffer_core.vector.autotuner`, and the tables they print.

The measuring modules load only when a command runs (puffer's start-up stays light).
"""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from puffer_core.cli.errors import err_console
from puffer_core.cli.options import (
    NUM_ENVS,
    Bounded,
    env_kwargs_option,
    parse_env_kwargs_option,
    ray_options,
    ray_vector_kwargs,
)
from puffer_core.cli.output import console, print_json, require_known_env
from puffer_core.cli.tables import print_markdown, print_table

__all__ = ["autotune_cmd", "autotune_table", "bench_cmd", "bench_table", "cluster_table", "uneven_table"]


BENCH_HELP = """Steps/second of ENV_ID on every backend and on the peers, with ratios, in one run.

Compares a raw env loop, Serial, Multiprocessing (several worker/batch settings), the
to_gymnasium / to_sb3 adapters next to the vector env they wrap, the cost of send()'s
action checks (on and off, alternating on one Multiprocessing env), gymnasium's
AsyncVectorEnv and PufferLib's vectorization when importable (without it, the report
says how to install it), plus the emulation overhead of one env. An env with native batches
(`puffer envs`) is measured both ways, and its native batch alone (ALE's AtariVectorEnv,
gymnasium's vector entry point) is a peer row; --peer-python PY runs EnvPool's rows in PY,
an interpreter where EnvPool is installed (it installs in an environment of its own). Ratios are against the
peers of the same run. --standard DIR runs the standard set (what `nox -s bench` runs)
and stores it as DIR/<UTC time>.json (`python -m puffer_core.bench.results` renders the
docs' tables from such files), with a training section: seconds to solve CartPole
with `puffer train` against Stable-Baselines3's PPO (default hyperparameters), and PPO's
steps/second on NetHack and Breakout against env-only stepping (needs the train and sb3
extras). --training runs that section alone.
--learning DIR runs the learning section: PPO on nethack/score with its family's training
defaults for --minutes (at most 30) per seed, seeds 0 to --seeds minus 1, each against a random
policy on the same env and seed, stored as DIR/<UTC time>.json with the mean and standard
deviation of the trained-over-random ratio (--keep DIR keeps the first seed's curve plot and a
recording of its trained agent; needs the train extra and NetHack's plugin).
--step-time shows where ENV_ID's step time goes (also part of --standard, for each env): one env
stepped at each of its layers in turn (the vector env's send and recv, the loop over a worker's
envs, emulation, EpisodeStats, each wrapper, the env itself), and the cores' time per step of
Multiprocessing on --num-envs envs split into the envs' own work, what the vector env adds, and
idle time.
--uneven runs the uneven-cores section alone (also part of --standard): a test env whose
step burns a set CPU time, 3x longer on half the workers, stepped synchronously (step,
full batches) and asynchronously (recv/send, half the envs per batch), one worker per
core and two, in at least 2 interleaved rounds of --seconds each.

--backend ray runs the Ray section alone: ENV_ID on Multiprocessing, on Ray on this machine and
on a simulated 3-node Ray cluster (started and stopped by the bench, one worker per node), 3
workers each: steps/s, and for Ray the bytes per env step sent to the workers (actions) and
received from them (observation rows, rewards, flags, infos), per worker with its node and host;
--ray-address ADDR (with --placement) adds a row on your own cluster. --cluster DIR runs that
section over CartPole, Breakout and NetHack and stores it as DIR/<UTC time>.json; `python -m
puffer_core.bench.results` renders the docs' table from the newest in bench-results/cluster/.
"""


@click.command("bench", help=BENCH_HELP)
@click.argument("env_id", required=False)
@click.option("--num-envs", default=16, show_default=True, type=NUM_ENVS, help="Envs per setting.")
@click.option("--seconds", default=3.0, show_default=True, type=click.FloatRange(0.1, 3600), help="Time per setting.")
@click.option("--rounds", default=1, show_default=True, type=Bounded(1, 1000), help="Interleaved repetitions.")
@click.option("--no-peers", is_flag=True, help="Skip the peers (AsyncVectorEnv, PufferLib, the native batch, EnvPool).")
@click.option(
    "--peer-python",
    type=click.Path(exists=True, dir_okay=False),
    help="An interpreter with EnvPool installed: its rows run there (ENV_ID and --standard).",
)
@click.option("--ray", "include_ray", is_flag=True, help="Also measure the Ray backend.")
@click.option("--no-adapters", is_flag=True, help="Skip the to_gymnasium / to_sb3 rows.")
@click.option("--training", "training_only", is_flag=True, help="Only the training section (see below).")
@click.option("--no-training", is_flag=True, help="--standard without the training section.")
@click.option("--uneven", "uneven_only", is_flag=True, help="Only the uneven-cores section (see below).")
@click.option("--no-uneven", is_flag=True, help="--standard without the uneven-cores section.")
@click.option("--step-time", "step_time_only", is_flag=True, help="Only where ENV_ID's step time goes (see below).")
@click.option("--standard", "out_dir", type=click.Path(file_okay=False), help="Run the standard set into DIR.")
@click.option(
    "--learning",
    "learning_dir",
    type=click.Path(file_okay=False),
    help="Run the learning section (NetHack trained over seeds against a random policy) into DIR.",
)
@click.option(
    "--minutes",
    type=click.FloatRange(0, 30, min_open=True),
    help="With --learning: training time per seed.  [default: 30]",
)
@click.option("--seeds", type=Bounded(1, 20), help="With --learning: train seeds 0 to N-1.  [default: 3]")
@click.option(
    "--keep",
    type=click.Path(file_okay=False),
    help="With --learning: keep the first seed's curve plot and recording in DIR.",
)
@click.option(
    "--backend",
    type=click.Choice(["ray"]),
    help="ray: only the Ray section (see below): steps/s and bytes per step, this machine against a cluster.",
)
@ray_options
@click.option(
    "--cluster",
    "cluster_dir",
    type=click.Path(file_okay=False),
    help="Run the Ray section over the standard envs into DIR (the docs' bytes-per-step table).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON.")
def bench_cmd(
    env_id: str | None,
    num_envs: int,
    seconds: float,
    rounds: int,
    no_peers: bool,
    peer_python: str | None,
    include_ray: bool,
    no_adapters: bool,
    training_only: bool,
    no_training: bool,
    uneven_only: bool,
    no_uneven: bool,
    step_time_only: bool,
    out_dir: str | None,
    learning_dir: str | None,
    minutes: float | None,
    seeds: int | None,
    keep: str | None,
    backend: str | None,
    ray_address: str | None,
    placement: str | None,
    cluster_dir: str | None,
    as_json: bool,
) -> None:
    # deferred: loads only for this command (puffer's start-up stays light)
    from puffer_core.bench import vectorization as bench

    ray_kwargs = ray_vector_kwargs("ray" if cluster_dir is not None else backend, ray_address, placement)
    if cluster_dir is not None or backend == "ray":
        _bench_cluster(env_id, cluster_dir, seconds, rounds, ray_kwargs, as_json)
        return
    if learning_dir is not None:
        if env_id is not None or out_dir is not None or training_only or uneven_only:
            raise click.UsageError(
                "--learning is a run of its own: give it without ENV_ID, --standard, --training or --uneven"
            )
        _bench_learning(learning_dir, minutes, seeds, keep, as_json)
        return
    given = [
        name for name, value in (("--minutes", minutes), ("--seeds", seeds), ("--keep", keep)) if value is not None
    ]
    if given:
        raise click.UsageError(
            f"{', '.join(given)} set{'s' if len(given) == 1 else ''} the learning section: give --learning DIR too"
        )
    if training_only:
        _bench_training(as_json)
        return
    if uneven_only:
        _bench_uneven(env_id, out_dir, seconds, max(2, rounds), as_json)
        return
    if out_dir is None and env_id is None:
        raise click.UsageError("give an ENV_ID (e.g. classic/cartpole), --standard DIR or --training")
    if step_time_only:
        _bench_step_time(env_id, out_dir, num_envs, seconds, as_json)
        return
    if out_dir is not None:
        sections = {"include_peers": not no_peers, "include_training": not no_training, "include_uneven": not no_uneven}
        sections["peer_python"] = _peer_python(peer_python, no_peers)
        _bench_standard(out_dir, seconds, rounds, as_json, **sections)
        return
    require_known_env(env_id)  # every row would fail alike, each with the same error
    with _progress_callback("bench", hidden=as_json) as progress:
        rows = bench.run_bench(
            env_id,
            num_envs=num_envs,
            seconds=seconds,
            include_peers=not no_peers,
            progress=progress,
            rounds=rounds,
            include_ray=include_ray,
            include_adapters=not no_adapters,
            peer_python=_peer_python(peer_python, no_peers),
        )
    if as_json:
        print_json(rows)
    else:
        print_table(console, bench_table(rows))


@click.command("autotune")
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
@click.option(
    "--backend",
    type=click.Choice(["multiprocessing", "ray"]),
    default="multiprocessing",
    show_default=True,
    help="The backend whose settings are tried beside Serial.",
)
@ray_options
@env_kwargs_option
@click.option("--json", "as_json", is_flag=True, help="Print every row and the best as JSON.")
def autotune_cmd(
    env_id: str,
    num_envs: int | None,
    seconds: float,
    backend: str,
    ray_address: str | None,
    placement: str | None,
    kwargs: tuple[str, ...],
    as_json: bool,
) -> None:
    """Measure vector settings on ENV_ID and print the fastest as a vector.make(...) call.

    Serial and Multiprocessing with 1, cores - 1, cores and 2 x cores workers, full and
    half batches (EnvPool-style), the main process stepping a share or not: each setting
    is built and stepped with random actions in at least two interleaved rounds within
    --seconds, and keeps its best round. Each row reports steps/s, RAM per env (the main
    process and workers' memory over the envs) and the share of steps that ended an
    episode. An env with native batches (puffer envs says which) is measured both ways:
    Serial and Multiprocessing stepping its native batches too (vector_kwargs={"native":
    True} in the call printed). --backend ray tries the Ray backend at those worker and batch settings instead of
    Multiprocessing, on this machine or on the cluster --ray-address names (--placement: how
    its workers are placed). From Python: puffer_core.vector.autotune(env, num_envs, budget).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # deferred: loads only for this command (puffer's start-up stays light)
    from puffer_core.vector.autotuner import autotune, summary_lines

    ray_kwargs = ray_vector_kwargs(backend, ray_address, placement)  # a usage error with another backend
    ray = ray_kwargs if backend == "ray" else None
    env_kwargs = parse_env_kwargs_option(env_id, kwargs)
    require_known_env(env_id)
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

        result = autotune(env_id, num_envs, seconds, progress=advance, verbose=False, ray=ray, **env_kwargs)
    if as_json:
        print_json(result)
        return
    print_table(console, autotune_table(result))
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


def _peer_python(path: str | None, no_peers: bool) -> str | None:
    """``--peer-python``, checked: an interpreter that imports envpool (a usage error otherwise)."""
    if path is None:
        return None
    if no_peers:
        raise click.UsageError("--peer-python runs peers' rows, and --no-peers leaves them out: give one")
    probe = subprocess.run([path, "-c", "import envpool"], capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["it did not run"])[-1]
        raise click.UsageError(f"--peer-python {path} cannot import envpool ({last}); pip install envpool there")
    return path


def _bench_standard(out_dir: str, seconds: float, rounds: int, as_json: bool, **options: Any) -> None:
    """The standard set (``puffer_core.bench.vectorization.run_standard``) into ``out_dir``."""
    # deferred: loads only for this command (puffer's start-up stays light)
    from puffer_core.bench import vectorization as bench

    with _progress_callback("bench", hidden=as_json) as progress:
        results = bench.run_standard(out_dir, seconds=seconds, rounds=rounds, progress=progress, **options)
    if as_json:
        print_json(results)
    else:
        console.print(f"wrote {out_dir.rstrip('/')}/{results['run']}.json", highlight=False)


def _bench_learning(out_dir: str, minutes: float | None, seeds: int | None, keep: str | None, as_json: bool) -> None:
    """The learning section (``puffer_core.bench.learning.learning_runs``) into ``out_dir``."""
    # deferred: loads only for this command (puffer's start-up stays light)
    from puffer_core.atomic import private_directory
    from puffer_core.bench import learning
    from puffer_core.bench.runs import write_run
    from puffer_core.env.environments import unavailable_reason

    missing = [name for name in ("torch", "matplotlib") if importlib.util.find_spec(name) is None]
    if missing:
        raise click.ClickException(
            f"--learning trains: it needs {', '.join(missing)} (pip install 'puffer-core[train]')"
        )
    reason = unavailable_reason(learning.LEARNING_ENV)
    if reason:
        raise click.ClickException(f"--learning trains {learning.LEARNING_ENV}: {reason}")
    private_directory(out_dir)  # refused now, not after an hour and a half of training
    minutes = learning.DEFAULT_MINUTES if minutes is None else minutes
    chosen = tuple(range(seeds)) if seeds is not None else learning.DEFAULT_SEEDS
    with _progress_callback("learning", hidden=as_json) as progress:
        section = learning.learning_runs(minutes=minutes, seeds=chosen, keep=keep, progress=progress)
    document = write_run(out_dir, {"learning": section})
    if as_json:
        print_json(document)
    else:
        print_markdown(console, learning.render_markdown(section))
        console.print(f"wrote {out_dir.rstrip('/')}/{document['run']}.json", highlight=False)


def _bench_cluster(
    env_id: str | None, out_dir: str | None, seconds: float, rounds: int, ray_kwargs: dict, as_json: bool
) -> None:
    """The Ray section (``puffer_core.bench.cluster``): one env, or the standard set into ``out_dir``."""
    # deferred: loads only for this command (puffer's start-up stays light)
    from puffer_core.bench import cluster as bench_cluster

    if (env_id is None) == (out_dir is None):
        raise click.UsageError("give an ENV_ID with --backend ray, or --cluster DIR without one")
    if "placement" in ray_kwargs and "address" not in ray_kwargs:
        raise click.UsageError("--placement places the workers on your cluster: give its --ray-address too")
    with _progress_callback("ray", hidden=as_json) as progress:
        if out_dir is not None:
            document = bench_cluster.run_cluster_standard(out_dir, seconds, rounds, progress, **ray_kwargs)
        else:
            require_known_env(env_id)
            rows = bench_cluster.run_cluster(env_id, seconds=seconds, rounds=rounds, progress=progress, **ray_kwargs)
    if out_dir is not None:
        if as_json:
            print_json(document)
        else:
            console.print(f"wrote {out_dir.rstrip('/')}/{document['run']}.json", highlight=False)
    elif as_json:
        print_json(rows)
    else:
        print_table(console, cluster_table(rows))


def _bench_uneven(env_id: str | None, out_dir: str | None, seconds: float, rounds: int, as_json: bool) -> None:
    if env_id is not None or out_dir is not None:
        raise click.UsageError("--uneven measures its own test env: give it without ENV_ID or --standard")
    # deferred: loads only for this command (puffer's start-up stays light)
    from puffer_core.bench import uneven as bench_uneven

    with _progress_callback("uneven cores", hidden=as_json) as progress:
        result = bench_uneven.run_uneven(seconds, rounds, progress=progress)
    if as_json:
        print_json(result)
    else:
        print_table(console, uneven_table(result))


def _bench_step_time(env_id: str | None, out_dir: str | None, num_envs: int, seconds: float, as_json: bool) -> None:
    if env_id is None or out_dir is not None:
        raise click.UsageError("--step-time measures one env: give an ENV_ID, without --standard")
    require_known_env(env_id)
    # deferred: loads only for this command (puffer's start-up stays light)
    from puffer_core.bench import step_time

    with _progress_callback("step time", hidden=as_json) as progress:
        section = step_time.run_step_time(
            env_id, num_envs, step_time.default_settings(num_envs), seconds, progress=progress
        )
    if as_json:
        print_json(section)
    else:
        print_markdown(console, step_time.render_markdown(section))


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


# --------------------------------------------------------------------------- tables


def bench_table(rows: list[dict], title: str | None = None) -> Table:
    """``puffer bench``'s rows (``puffer_core.bench.vectorization.run_bench``) as a table."""
    from puffer_core.bench.vectorization import annotation, format_ratio

    env = rows[0].get("env") if rows else ""
    table = Table(title=title or f"puffer bench {env}", show_lines=False)
    table.add_column("configuration", justify="left")
    for column in ("workers", "batch", "steps/s", "vs raw", "vs Serial", "vs AsyncVectorEnv", "vs PufferLib"):
        table.add_column(column, justify="right")
    for row in rows:
        cells = [str(row["num_workers"]), str(row["batch_size"])]
        if row["kind"] == "restart" and row.get("latency_seconds") is not None:
            name = f"{escape(row['name'])} [dim](median of {len(row['latencies'])}, seconds)[/dim]"
            table.add_row(name, *cells, f"{row['latency_seconds']:.3f} s", *[""] * 4)
        elif row.get("sps") is None:
            table.add_row(escape(row["name"]), *cells, f"[red]failed[/red] {escape(row.get('error') or '')}", *[""] * 4)
        else:
            ratios = ("ratio_vs_raw", "ratio_vs_serial", "ratio_vs_async", "ratio_vs_pufferlib")
            name = escape(row["name"]) + annotation(row, "[dim]", "[/dim]")
            table.add_row(name, *cells, f"{row['sps']:,.0f}", *(format_ratio(row.get(key)) for key in ratios))
    return table


def cluster_table(rows: list[dict]) -> Table:
    """The Ray section's rows (``puffer_core.bench.cluster.run_cluster``), each Ray row followed by
    its workers' bytes per step."""
    from puffer_core.bench.cluster import format_bytes

    env = rows[0].get("env") if rows else ""
    table = Table(title=f"puffer bench {env} --backend ray (bytes per env step)")
    table.add_column("configuration", justify="left")
    for column in ("workers", "steps/s", "to workers", "from workers", "of which rows", "of which infos"):
        table.add_column(column, justify="right")
    for row in rows:
        if row.get("sps") is None:
            table.add_row(
                escape(row["name"]), str(row["num_workers"]), f"[red]failed[/red] {escape(row['error'] or '')}"
            )
            continue
        if row["backend"] != "ray":
            table.add_row(escape(row["name"]), str(row["num_workers"]), f"{row['sps']:,.0f}", "shared memory", "")
            continue
        sizes = ("sent_bytes_per_step", "received_bytes_per_step", "row_bytes", "info_bytes_per_step")
        table.add_row(
            escape(row["name"]),
            str(row["num_workers"]),
            f"{row['sps']:,.0f}",
            *(format_bytes(row.get(key)) for key in sizes),
        )
        for worker in row.get("workers", []):
            where = f"{worker.get('host') or '?'}, node {(worker.get('node_id') or '?')[:8]}"
            table.add_row(
                f"[dim]  worker {worker['worker']} ({escape(where)})[/dim]",
                "",
                "",
                format_bytes(worker.get("sent_bytes_per_step")),
                format_bytes(worker.get("received_bytes_per_step")),
            )
    return table


def uneven_table(result: dict[str, Any]) -> Table:
    """The uneven-cores section (``puffer_core.bench.uneven.run_uneven``): one row per layout."""
    from puffer_core.bench.uneven import headline, layout_cells

    table = Table(title=headline(result))
    for column in ("workers", "envs", "async batch", "sync steps/s", "async steps/s", "async / sync", "ideal"):
        table.add_column(column, justify="right")
    for row in result["layouts"]:
        table.add_row(*layout_cells(row))
    return table


def autotune_table(result: dict[str, Any]) -> Table:
    """Autotune's rows (``puffer_core.vector.autotuner``), fastest first, the best marked."""
    from puffer_core.vector.autotuner import COLUMNS, table_rows, table_title

    table = Table(title=table_title(result))
    for column in COLUMNS:
        table.add_column(column, justify="left" if column == "backend" else "right")
    for row, cells in table_rows(result):
        if row["sps"] is None:
            table.add_row(*cells[:3], f"[red]failed[/red] {escape(row['error'] or '')}", *cells[4:])
            continue
        best = row["name"] == result["best"]["name"]
        table.add_row(*(escape(cell) for cell in cells), style="bold green" if best else None)
    return table
