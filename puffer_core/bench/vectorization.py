"""Vectorization benchmark: Puffer Core's backends next to their peers, in one run.

``run_bench(env_id)`` measures, on the same env and random actions:

* a single raw env loop (the env as its plugin makes it, no emulation, no vectorization);
* emulation overhead (``puffer_core.bench.emulation``);
* Serial and Multiprocessing at a few worker / batch settings (and Ray on request);
* the machine's ceilings (``puffer_core.bench.ceiling``): one Serial process per CPU, free
  running and in lock-step;
* the adapters to the ecosystem (``to_gymnasium``, ``to_sb3``) over Multiprocessing, each
  next to the same vector env stepped directly;
* the cost of ``send``'s action checks: Multiprocessing with them on, alternating on the
  same vector env with ``check_actions=False``;
* peers (``puffer_core.bench.peers``): gymnasium's ``AsyncVectorEnv`` (shared memory on)
  and, when ``pufferlib`` is importable, PufferLib's Serial and Multiprocessing at their
  usual settings.

Puffer Core's own configurations are built by ``puffer_core.bench.cases``.

Every row is a dict ``{name, kind, backend, num_envs, num_workers, batch_size, sps,
ratio_vs_raw, ratio_vs_serial, ratio_vs_async, ratio_vs_pufferlib}``; ratios are this
row's steps/second over the baseline's (PufferLib's fastest setting, Serial or
Multiprocessing, for ``ratio_vs_pufferlib``) and ``None`` where the baseline did not run. Steps count agent
rows. Each setting runs ``rounds`` times, interleaved with the others, and keeps its best
round (``puffer_core.vector.timing.run_rounds``), which makes the comparison robust to a noisy
machine.

``run_standard(out_dir)`` runs the standard set (CartPole, and Breakout / NetHack when
their plugins and packages are installed) and stores it as one dated JSON file
(``puffer_core.bench.runs``; ``puffer_core.bench.results`` renders the pages made from such files).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
from collections.abc import Callable

from puffer_core.atomic import private_directory
from puffer_core.bench import step_time as bench_step_time, training as bench_training, uneven as bench_uneven
from puffer_core.bench.cases import puffer_cases
from puffer_core.bench.emulation import emulation_overhead, floor_overhead
from puffer_core.bench.faults import restart_latency
from puffer_core.bench.peers import PUFFERLIB_INSTALL, peer_cases, pufferlib_version
from puffer_core.bench.runs import available_envs, fastest_pufferlib, write_run
from puffer_core.env.environments import make_raw
from puffer_core.plugins.apis import is_multiagent
from puffer_core.vector.checks import available_cpus
from puffer_core.vector.settings import STANDARD
from puffer_core.vector.timing import Progress, Turn, error_summary, run_rounds, time_raw

__all__ = ["annotation", "format_ratio", "render_markdown", "run_bench", "run_standard"]


def _emulation_rows(env_id: str, seconds: float) -> list[dict]:
    """Emulated vs raw single env (single-agent envs only)."""
    env = make_raw(env_id)
    multi = is_multiagent(env)
    with contextlib.suppress(Exception):
        env.close()
    if multi:
        return []
    # Calibrate the step count to the time budget from a quick raw measurement.
    probe = make_raw(env_id)
    try:
        sps = time_raw(probe, min(0.2, seconds), 0.05, 0)
    finally:
        with contextlib.suppress(Exception):
            probe.close()
    steps = max(2000, int(sps * seconds))
    result = emulation_overhead(lambda: make_raw(env_id), steps)
    # The emulator alone beside it: what the flat buffer costs, apart from episode statistics;
    # and the least any Python emulator with episode statistics costs, where it applies.
    bare = emulation_overhead(lambda: make_raw(env_id), steps, episode_stats=False)
    floor = floor_overhead(lambda: make_raw(env_id), steps)
    return [
        {
            "name": "emulated single env (EpisodeStats + emulation)",
            "kind": "emulation",
            "backend": "emulation",
            "num_envs": 1,
            "num_workers": 1,
            "batch_size": 1,
            "sps": result["emulated_sps"],
            "raw_sps": result["raw_sps"],
            "overhead": result["ratio"],
            "overhead_without_stats": bare["ratio"],
            "overhead_floor": None if floor is None else floor["ratio"],
            "error": None,
        }
    ]


def _emulation_rows_or_error(env_id: str, seconds: float) -> list[dict]:
    """``_emulation_rows``, or one row with the error that stopped them."""
    try:
        return _emulation_rows(env_id, seconds)
    except Exception as exc:
        row = {"name": "emulated single env", "kind": "emulation", "backend": "emulation"}
        return [{**row, "num_envs": 1, "num_workers": 1, "batch_size": 1, "sps": None, "error": error_summary(exc)}]


def _add_ratios(rows: list[dict]) -> list[dict]:
    def best(predicate: Callable[[dict], bool]) -> float | None:
        values = [r["sps"] for r in rows if predicate(r) and r.get("sps")]
        return max(values) if values else None

    baselines = {
        "ratio_vs_raw": best(lambda r: r["kind"] == "raw"),
        "ratio_vs_serial": best(lambda r: r["backend"] == "serial"),
        "ratio_vs_async": best(lambda r: r["backend"] == "gymnasium-async"),
        "ratio_vs_pufferlib": (fastest_pufferlib(rows) or {}).get("sps"),
    }
    for row in rows:  # an adapter row carries its own vector env's direct steps/second
        if row["kind"] == "adapter":
            base = row.get("backend_sps")
            row["ratio_vs_backend"] = round(row["sps"] / base, 3) if row.get("sps") and base else None
        if row["kind"] == "action-check":  # and the action-check row its unchecked steps/second
            base, short = row.get("unchecked_sps"), row.get("checked_short_sps")
            row["ratio_vs_unchecked"] = round(short / base, 3) if short and base else None
    for row in rows:
        for key, base in baselines.items():
            # The emulation row is its own interleaved raw-vs-emulated measurement: its
            # figure is ``overhead``, not a ratio over other rows' loops.
            usable = base and row.get("sps") and row["kind"] != "emulation"
            row[key] = round(row["sps"] / base, 3) if usable else None
        if row["kind"] == "emulation" and row.get("overhead"):
            # Its vs raw is that measurement's (the same games, actions and rounds), so the
            # column reads as the step time says: another raw loop, another game, differs by more.
            row["ratio_vs_raw"] = round(1 / row["overhead"], 3)
        if row.get("sps") is not None:
            row["sps"] = round(row["sps"], 1)
    return rows


def run_bench(
    env_id: str,
    num_envs: int = 16,
    seconds: float = 3.0,
    include_peers: bool = True,
    progress: Progress | None = None,
    *,
    rounds: int = 1,
    warmup: float | None = None,
    include_ray: bool = False,
    include_emulation: bool = True,
    settings: list[tuple[int, int]] | None = None,
    seed: int = 0,
    include_adapters: bool = True,
    include_action_check: bool = True,
    include_restart: bool = True,
    peer_python: str | None = None,
) -> list[dict]:
    """Measure every configuration on ``env_id``; see the module docstring for the rows.

    ``seconds`` is the measuring time per configuration and round; ``progress(name, i,
    total)`` is called before each measurement. ``settings`` overrides the
    Multiprocessing (num_workers, batch_size) pairs; ``include_adapters`` adds ``to_gymnasium``
    and ``to_sb3`` rows, each next to its vector env stepped directly (``ratio_vs_backend``);
    ``include_action_check`` a Multiprocessing row with ``send``'s action checks on, next to
    the same vector env with ``check_actions=False`` (``ratio_vs_unchecked``, ``check_us``);
    ``peer_python`` an interpreter with EnvPool, whose rows then run there.
    ``include_restart`` a row with the median seconds from a worker's SIGKILL to the next
    batch under ``on_fault="restart"`` (``latency_seconds``). A configuration that fails to build or
    run gets ``sps=None`` and its ``error`` text instead of stopping the run.
    """
    warmup = min(1.0, seconds / 5) if warmup is None else warmup
    cases = puffer_cases(env_id, num_envs, seed, settings, include_ray, include_adapters, include_action_check)
    if include_peers:
        cases += peer_cases(env_id, num_envs, seed, peer_python)
    done = len(cases) * rounds
    total = done + int(include_emulation) + int(include_restart)
    ticks = progress if progress is None else lambda name, turns, _: progress(name, turns, total)

    def measure(turn: Turn) -> float:
        case, env = cases[turn.index], None
        try:
            env = case.build()
            return case.measure(env, seconds, warmup)
        finally:
            if env is not None:
                with contextlib.suppress(Exception):
                    env.close()

    measured = run_rounds([case.name for case in cases], measure, rounds, progress=ticks)
    rows = [case.row(m) for case, m in zip(cases, measured)]
    if include_emulation:
        if progress is not None:
            progress("emulation overhead", done, total)
        done += 1
        rows[1:1] = _emulation_rows_or_error(env_id, seconds)
    if include_restart:
        if progress is not None:
            progress("restart latency", done, total)
        rows.append(_restart_row(env_id, num_envs))
    for row in rows:
        row["env"] = env_id
    return _add_ratios(rows)


def _restart_row(env_id: str, num_envs: int) -> dict:
    """Seconds from a worker's SIGKILL to the next batch under on_fault="restart" (bench_faults)."""
    row = {"name": "on_fault='restart': SIGKILL → next batch", "kind": "restart", "backend": "multiprocessing"}
    row.update(num_envs=num_envs, num_workers=min(available_cpus(), num_envs), batch_size=num_envs, sps=None)
    try:
        result = restart_latency(env_id, num_envs=num_envs, trials=3)
    except Exception as exc:
        return {**row, "error": error_summary(exc)}
    return {
        **row,
        "error": None,
        "latency_seconds": result["median_seconds"],
        "latencies": result["kill_to_batch_seconds"],
    }


# --------------------------------------------------------------------------- rendering


def annotation(row: dict, start: str = "", end: str = "") -> str:
    """What a row's own comparison says (emulation overhead, an adapter's cost), between ``start`` and ``end``."""
    if row["kind"] == "emulation" and row.get("overhead"):
        bare, floor = row.get("overhead_without_stats"), row.get("overhead_floor")
        without = f"; {bare:.3f}× without episode statistics" if bare else ""
        if floor:
            without += f"; floor {floor:.3f}×, the least a Python emulator with them costs"
        return f" {start}(step time {row['overhead']:.3f}× raw{without}){end}"
    if row["kind"] == "adapter" and row.get("ratio_vs_backend"):
        return f" {start}({row['ratio_vs_backend']:.3f}× the vector env stepped directly){end}"
    if row["kind"] == "action-check" and row.get("ratio_vs_unchecked"):
        return (
            f" {start}({row['ratio_vs_unchecked']:.3f}× check_actions=False; the check takes "
            f"{row['check_us']:.1f} µs per send = {row['check_share']:.2%} of the time){end}"
        )
    return ""


def _over_sps(row: dict, base: dict | None) -> float | None:
    return row["sps"] / base["sps"] if base is not None and row.get("sps") else None


def format_ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def render_markdown(results: dict[str, list[dict]], notes: list[str] | None = None, machine: dict | None = None) -> str:
    """A Markdown report of ``results`` measured on ``machine`` (default: this one)."""
    lines = ["# Puffer Core vectorization benchmark", ""]
    meta = machine or _machine()
    lines.append(
        f"Machine: {meta['cpus']} CPUs, Python {meta['python']}, {meta['platform']}. "
        "Steps/second count agent steps; ratios are over the same run's baseline."
    )
    lines.append("")
    for env_id, rows in results.items():
        num_envs = max((r["num_envs"] for r in rows if r["kind"] != "raw"), default=1)
        pufferlib = fastest_pufferlib(rows)
        lines += [
            f"## {env_id} ({num_envs} envs)",
            "",
            "| configuration | workers | batch | steps/s | vs raw | vs Serial | vs AsyncVectorEnv | vs PufferLib |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for row in rows:
            if row["kind"] == "restart" and row.get("latency_seconds") is not None:
                name, latency = f"{row['name']} (median of {len(row['latencies'])})", f"{row['latency_seconds']:.3f} s"
                lines.append(f"| {name} | {row['num_workers']} | {row['batch_size']} | {latency} | | | | |")
                continue
            if row.get("sps") is None:
                lines.append(
                    f"| {row['name']} | {row['num_workers']} | {row['batch_size']} | failed: "
                    f"{(row.get('error') or '').replace('|', '/')} | | | | |"
                )
                continue
            name = row["name"] + annotation(row)
            lines.append(
                f"| {name} | {row['num_workers']} | {row['batch_size']} | {row['sps']:,.0f} | "
                f"{format_ratio(row.get('ratio_vs_raw'))} | {format_ratio(row.get('ratio_vs_serial'))} | "
                f"{format_ratio(row.get('ratio_vs_async'))} | {format_ratio(_over_sps(row, pufferlib))} |"
            )
        lines.append("")
    for note in notes or []:
        lines.append(f"- {note}")
    return "\n".join(lines).rstrip() + "\n"


def _machine() -> dict:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}


def run_standard(
    out_dir: str | os.PathLike,
    seconds: float = 3.0,
    rounds: int = 2,
    progress: Progress | None = None,
    envs: dict[str, int] | None = None,
    include_peers: bool = True,
    include_training: bool = True,
    include_uneven: bool = True,
    peer_python: str | None = None,
    include_step_time: bool = True,
) -> dict:
    """Run the standard set; store it in ``out_dir`` as one dated JSON file (``bench.runs.write_run``).

    Returns the stored document. Envs whose plugin or package is missing are listed under
    ``skipped`` rather than failing the run. ``include_training`` adds the training section
    (``puffer_core.bench.training``) when torch, matplotlib and Stable-Baselines3 import;
    ``include_uneven`` the uneven-cores section (``puffer_core.bench.uneven``: synchronous
    against asynchronous batches with half the workers 3× slower), ``seconds`` per setting
    and at least two rounds; ``peer_python`` an interpreter with EnvPool for its rows;
    ``include_step_time`` where each env's step time goes (``puffer_core.bench.step_time``: its
    layers, and the cores' time of its fastest setting). The learning section
    (``puffer_core.bench.learning``) is a run of its own.
    """
    private_directory(out_dir)  # refused now, not after minutes of measuring
    results: dict[str, list[dict]] = {}
    notes: list[str] = []
    wanted = available_envs(envs or STANDARD, notes)
    for env_id, num_envs in wanted.items():
        results[env_id] = run_bench(env_id, num_envs=num_envs, seconds=seconds, include_peers=include_peers,
                                    progress=progress, rounds=rounds, peer_python=peer_python)  # fmt: skip
    step_time = None
    if include_step_time:
        step_time = {
            env_id: bench_step_time.run_step_time(
                env_id, wanted[env_id], bench_step_time.fastest_setting(rows), seconds, progress=progress
            )
            for env_id, rows in results.items()
        }
    if include_peers and pufferlib_version() is None:
        notes.append(f"PufferLib is not importable here, so its rows are absent (`{PUFFERLIB_INSTALL}` adds them)")
    uneven = uneven_native = None
    if include_uneven:
        uneven = bench_uneven.run_uneven(seconds, max(2, rounds), progress=progress)
        uneven_native = bench_uneven.run_uneven(seconds, max(2, rounds), progress=progress, native=True)
    training = None
    if include_training:
        missing = [m for m in ("torch", "matplotlib", "stable_baselines3") if importlib.util.find_spec(m) is None]
        if missing:
            notes.append(f"training section skipped: needs {', '.join(missing)} (pip install 'puffer-core[train,sb3]')")
        else:
            training = bench_training.run_training(progress=progress)
    sections = {"seconds": seconds, "rounds": rounds, "results": results, "uneven": uneven, "training": training}
    sections["uneven_native"] = uneven_native
    sections["step_time"] = step_time
    return write_run(out_dir, {**sections, "skipped": notes})
