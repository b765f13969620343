"""Vectorization benchmark: Puffer Core's backends next to their peers, in one run.

``run_bench(env_id)`` measures, on the same env and random actions:

* a single raw env loop (the env as its plugin makes it, no emulation, no vectorization);
* emulation overhead (``puffer_core.bench.emulation``) when that module is present;
* Serial and Multiprocessing at a few worker / batch settings (and Ray on request);
* the machine's ceilings (``puffer_core.bench.ceiling``): one Serial process per CPU, free
  running and in lock-step;
* the adapters to the ecosystem (``to_gymnasium``, ``to_sb3``) over Multiprocessing, each
  next to the same vector env stepped directly;
* the cost of ``send``'s action checks: Multiprocessing with them on, alternating on the
  same vector env with ``check_actions=False``;
* peers: gymnasium's ``AsyncVectorEnv`` (shared memory on) and, when ``pufferlib`` is
  importable (``PUFFERLIB_INSTALL``), PufferLib's Serial and Multiprocessing at their usual
  settings.

Every row is a dict ``{name, kind, backend, num_envs, num_workers, batch_size, sps,
ratio_vs_raw, ratio_vs_serial, ratio_vs_async, ratio_vs_pufferlib}``; ratios are this
row's steps/second over the baseline's (the best PufferLib Multiprocessing setting for
``ratio_vs_pufferlib``) and ``None`` where the baseline did not run. Steps count agent
rows. Each setting runs ``rounds`` times, interleaved with the others, and keeps its best
round, which makes the comparison robust to a noisy machine.

``run_standard(out_dir)`` runs the standard set (CartPole, and Breakout / NetHack when
their plugins and packages are installed) and stores it as one dated JSON file
(``puffer_core.bench.results``, which also renders the pages made from such files).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

import puffer_core
from puffer_core import vector
from puffer_core._multiagent import is_multiagent
from puffer_core.bench import training as bench_training
from puffer_core.bench import uneven as bench_uneven
from puffer_core.bench.ceiling import parallel_ceiling
from puffer_core.bench.emulation import emulation_overhead, floor_overhead
from puffer_core.bench.faults import restart_latency
from puffer_core.bench.results import write_run
from puffer_core.bench.settings import STANDARD, main_share_settings, mp_settings, unavailable_reason
from puffer_core.bench.timing import random_action_batches, time_async, time_gym_vector, time_raw, time_sb3
from puffer_core.environments import make_raw
from puffer_core.vector.base import available_cpus

__all__ = [
    "PUFFERLIB_INSTALL",
    "PUFFERLIB_REQUIREMENTS",
    "pufferlib_version",
    "render_markdown",
    "render_table",
    "run_bench",
    "run_standard",
]

Progress = Callable[[str, int, int], None]


#: How to get PufferLib 3.0's vectorization here: the ``pufferlib`` 3.0.0 sdist downloads
#: raylib while it builds (impossible offline) and pins numpy<2; ``pufferlib-core`` is a
#: wheel of the same 3.0 core (``pufferlib.vector``). Its torch==2.9.0 pin is only for
#: the trainer, hence ``--no-deps`` (any installed torch satisfies ``import pufferlib``).
#: ``noxfile.py`` installs these (read from here, so the pin lives in one place).
PUFFERLIB_REQUIREMENTS = ("pufferlib-core==3.0.23", "psutil")
PUFFERLIB_INSTALL = "pip install --no-deps " + " ".join(f"'{r}'" if "=" in r else r for r in PUFFERLIB_REQUIREMENTS)


def pufferlib_version() -> str | None:
    """The importable PufferLib's version when ``pufferlib.vector`` imports, else None."""
    try:
        if importlib.util.find_spec("pufferlib") is None:
            return None
        import pufferlib
        import pufferlib.vector
    except Exception:  # an install missing torch or psutil counts as absent, not as a crash
        return None
    return str(getattr(pufferlib, "__version__", "?"))


class _Case:
    """One configuration: builds its env lazily, measures, closes."""

    def __init__(
        self,
        name: str,
        kind: str,
        backend: str,
        num_envs: int,
        num_workers: int,
        batch_size: int,
        build: Callable[[], Any],
        measure: Callable[[Any, float, float], float],
    ):
        self.name, self.kind, self.backend = name, kind, backend
        self.num_envs, self.num_workers, self.batch_size = num_envs, num_workers, batch_size
        self.build, self.measure = build, measure
        self.results: list[float] = []
        self.error: str | None = None
        self.extra: dict[str, Any] = {}  # what a measurement adds to the row (an adapter's backend_sps)

    def row(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "backend": self.backend,
            "num_envs": self.num_envs,
            "num_workers": self.num_workers,
            "batch_size": self.batch_size,
            "sps": max(self.results) if self.results else None,
            "error": self.error,
            **self.extra,
        }


def _cases(
    env_id: str,
    num_envs: int,
    include_peers: bool,
    include_ray: bool,
    seed: int,
    settings: list[tuple[int, int]] | None,
    include_adapters: bool = True,
    include_action_check: bool = True,
) -> list[_Case]:
    def raw_creator() -> Any:
        return make_raw(env_id)

    def puffer_case(
        name: str, backend: str, workers: int | None, batch: int, kind: str = "puffer", **vector_kwargs: Any
    ) -> _Case:
        def build() -> Any:
            return vector.make(
                env_id,
                num_envs=num_envs,
                num_workers=workers,
                batch_size=batch,
                backend=backend,
                seed=seed,
                vector_kwargs=vector_kwargs or None,
            )

        def measure(env: Any, seconds: float, warmup: float) -> float:
            return time_async(env, seconds, warmup, env.batch_size, env.single_action_space, seed)

        return _Case(name, kind, backend, num_envs, workers or 1, batch, build, measure)

    cases = [
        _Case("raw env loop (1 env)", "raw", "raw", 1, 1, 1, raw_creator, lambda env, s, w: time_raw(env, s, w, seed)),
        puffer_case("Serial", "serial", None, num_envs),
    ]
    cases.extend(_ceiling_cases(env_id, num_envs, seed))
    for workers, batch in settings or mp_settings(num_envs):
        label = f"Multiprocessing w={workers} b={batch}"
        cases.append(puffer_case(label, "multiprocessing", workers, batch))
    for workers, batch in [] if settings else main_share_settings(num_envs):
        label = f"Multiprocessing w={workers}+main b={batch}"
        cases.append(puffer_case(label, "multiprocessing", workers, batch, main_share=True))
        even = num_envs // (workers + 1)
        if batch == num_envs and workers == 1 and even >= 2:  # the main process one env lighter
            label = f"Multiprocessing w={workers}+main({even - 1}) b={batch}"
            cases.append(puffer_case(label, "multiprocessing", workers, batch, main_share=even - 1))
    if include_ray and importlib.util.find_spec("ray") is not None:
        workers = min(num_envs, available_cpus())
        cases.append(puffer_case(f"Ray w={workers} b={num_envs}", "ray", workers, num_envs))
    if include_adapters:
        cases.extend(_adapter_cases(env_id, num_envs, seed))
    if include_action_check:
        cases.append(_action_check_case(env_id, num_envs, seed))
    if include_peers:
        probe = raw_creator()
        multi = is_multiagent(probe)
        with contextlib.suppress(Exception):
            probe.close()
        if not multi:
            cases.append(_async_vector_case(raw_creator, num_envs, seed))
            version = pufferlib_version()
            if version is not None:
                cases.extend(_pufferlib_cases(raw_creator, num_envs, seed, version))
    return cases


def _ceiling_cases(env_id: str, num_envs: int, seed: int) -> list[_Case]:
    """Independent Serial processes, one per CPU, that never talk: what no backend can beat
    here; and the same processes waiting for each other after every batch: what no
    synchronous (full-batch) setting can beat."""
    processes = min(available_cpus(), num_envs)

    def case(name: str, backend: str, lockstep: bool) -> _Case:
        def measure(_: Any, seconds: float, warmup: float) -> float:
            return parallel_ceiling(env_id, num_envs, seconds, processes, seed, lockstep=lockstep)

        return _Case(name, "ceiling", backend, num_envs, processes, num_envs, lambda: None, measure)

    return [
        case(f"ceiling: {processes} independent Serial processes (no communication)", "independent", False),
        case(
            f"ceiling, lock-step: {processes} Serial processes that wait for each other after every batch",
            "independent-lockstep",
            True,
        ),
    ]


def _adapter_cases(env_id: str, num_envs: int, seed: int) -> list[_Case]:
    """``to_gymnasium`` and ``to_sb3`` over Multiprocessing (one worker per core, full batch).
    Each case alternates, on one vector env, between stepping it directly and through the
    adapter (same autoreset mode), so the ratio measures the adapter and not the noise
    between two sets of worker processes."""
    workers = min(available_cpus(), num_envs)
    setting = f"Multiprocessing w={workers} b={num_envs}"

    def case(name: str, mode: str, adapt: Callable[[Any], Any], timer: Callable[..., float]) -> _Case:
        def build() -> Any:
            envs = vector.make(
                env_id, num_envs=num_envs, num_workers=workers, backend="multiprocessing", seed=seed, autoreset=mode
            )
            return adapt(envs)

        def measure(adapter: Any, seconds: float, warmup: float) -> float:
            envs, space = adapter.envs, adapter.envs.single_action_space
            direct, adapted = [], []
            for _ in range(4):
                direct.append(time_gym_vector(envs, seconds / 4, warmup / 4, envs.num_envs, space, seed))
                adapted.append(timer(adapter, seconds / 4, warmup / 4, envs.num_envs, space, seed))
            this.extra["backend_sps"] = max(max(direct), this.extra.get("backend_sps", 0.0))
            return max(adapted)

        this = _Case(name, "adapter", "multiprocessing", num_envs, workers, num_envs, build, measure)
        return this

    cases = [case(f"to_gymnasium({setting})", "next_step", vector.to_gymnasium, time_gym_vector)]
    if _sb3_takes(env_id):
        cases.append(case(f"to_sb3({setting} same_step)", "same_step", vector.to_sb3, time_sb3))
    return cases


def _action_check_case(env_id: str, num_envs: int, seed: int) -> _Case:
    """Multiprocessing (one worker per core, full batch) with ``send``'s action checks on,
    alternating on one vector env with ``check_actions=False`` in eight short stretches
    (row: ``unchecked_sps`` and ``checked_short_sps``, the best stretch of each, and
    ``ratio_vs_unchecked``). The row's own steps/second is timed as every other row's (one
    stretch of ``seconds``): the best of many short stretches runs high, so only the ratio
    uses them. The check's own time per send, measured in-process, gives ``check_us`` and
    its share of a send at this throughput, ``check_share``: the same cost without the
    noise of the worker processes."""
    workers = min(available_cpus(), num_envs)

    def build() -> Any:
        return vector.make(env_id, num_envs=num_envs, num_workers=workers, backend="multiprocessing", seed=seed)

    def measure(envs: Any, seconds: float, warmup: float) -> float:
        space, rows = envs.single_action_space, envs.batch_size
        sps: dict[bool, list[float]] = {True: [], False: []}
        for pair in range(4):
            for checked in (True, False) if pair % 2 == 0 else (False, True):  # either goes first as often
                envs.check_actions = checked
                sps[checked].append(time_async(envs, seconds / 8, warmup / 8, rows, space, seed))
        envs.check_actions = True
        this.extra["unchecked_sps"] = max(max(sps[False]), this.extra.get("unchecked_sps", 0.0))
        this.extra["checked_short_sps"] = max(max(sps[True]), this.extra.get("checked_short_sps", 0.0))
        check_us = min(_action_check_us(envs, seed), this.extra.get("check_us", float("inf")))
        this.extra["check_us"] = round(check_us, 3)
        checked_sps = time_async(envs, seconds, warmup, rows, space, seed)
        this.extra["check_share"] = round(check_us * 1e-6 * checked_sps / rows, 5)  # check seconds per second
        return checked_sps

    name = f"Multiprocessing w={workers} b={num_envs} check_actions=True"
    this = _Case(name, "action-check", "multiprocessing", num_envs, workers, num_envs, build, measure)
    return this


def _action_check_us(envs: Any, seed: int, calls: int = 20_000) -> float:
    """Microseconds ``send`` spends checking one batch of valid actions (checks on minus off)."""
    actions = random_action_batches(envs.single_action_space, envs.batch_size, 1, seed)[0]
    per_call = {}
    for checked in (True, False, True, False):
        envs.check_actions = checked
        start = time.perf_counter()
        for _ in range(calls):
            envs._check_actions(actions, envs.batch_size)
        elapsed = (time.perf_counter() - start) / calls
        per_call[checked] = min(elapsed, per_call.get(checked, elapsed))
    envs.check_actions = True
    return max(0.0, per_call[True] - per_call[False]) * 1e6


def _sb3_takes(env_id: str) -> bool:
    """SB3 is importable and the env's flat observation holds numbers, not mixed-dtype bytes."""
    if importlib.util.find_spec("stable_baselines3") is None:
        return False

    env = puffer_core.make(env_id)
    try:
        return not env.obs_layout.mixed_dtypes
    finally:
        with contextlib.suppress(Exception):
            env.close()


def _async_vector_case(raw_creator: Callable[[], Any], num_envs: int, seed: int) -> _Case:
    def build() -> Any:
        from gymnasium.vector import AsyncVectorEnv

        return AsyncVectorEnv([raw_creator] * num_envs, shared_memory=True)

    def measure(env: Any, seconds: float, warmup: float) -> float:
        return time_gym_vector(env, seconds, warmup, num_envs, env.single_action_space, seed)

    return _Case(
        "gymnasium AsyncVectorEnv (shared memory)",
        "peer",
        "gymnasium-async",
        num_envs,
        num_envs,
        num_envs,
        build,
        measure,
    )


def _pufferlib_cases(raw_creator: Callable[[], Any], num_envs: int, seed: int, version: str) -> list[_Case]:
    cases = []
    cpus = available_cpus()

    def case(name: str, backend_name: str, workers: int, batch: int) -> _Case:
        def build() -> Any:
            import pufferlib.emulation
            import pufferlib.vector

            kwargs: dict[str, Any] = {}
            if backend_name == "Multiprocessing":
                kwargs = {"num_workers": workers, "batch_size": batch, "overwork": True}
            # PufferLib's workers end without closing their envs, so what an env keeps in the
            # temp dir (NetHack: a folder per game) would stay: its envs get a scratch temp
            # dir, which closing the case removes.
            scratch = tempfile.mkdtemp(prefix="puffer-bench-pufferlib-")
            try:
                with _temp_dir(scratch):
                    env = pufferlib.vector.make(
                        pufferlib.emulation.GymnasiumPufferEnv,
                        env_kwargs={"env_creator": raw_creator},
                        backend=getattr(pufferlib.vector, backend_name),
                        num_envs=num_envs,
                        seed=seed,
                        **kwargs,
                    )
            except BaseException:
                shutil.rmtree(scratch, ignore_errors=True)
                raise
            close = env.close

            def close_and_clean() -> None:
                try:
                    close()
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)

            env.close = close_and_clean
            return env

        def measure(env: Any, seconds: float, warmup: float) -> float:
            rows = getattr(env, "agents_per_batch", batch)
            return _time_pufferlib(env, seconds, warmup, rows, env.single_action_space, seed)

        return _Case(
            f"PufferLib {version} {name}",
            "peer",
            f"pufferlib-{backend_name.lower()}",
            num_envs,
            workers,
            batch,
            build,
            measure,
        )

    cases.append(case("Serial", "Serial", 1, num_envs))
    for workers in sorted({1, min(cpus, num_envs)}):
        cases.append(case(f"Multiprocessing w={workers} b={num_envs}", "Multiprocessing", workers, num_envs))
    workers = min(cpus, num_envs)
    if workers > 1 and num_envs % workers == 0 and (num_envs // 2) % (num_envs // workers) == 0:
        cases.append(case(f"Multiprocessing w={workers} b={num_envs // 2}", "Multiprocessing", workers, num_envs // 2))
    return cases


@contextlib.contextmanager
def _temp_dir(path: str) -> Any:
    """``path`` as the temp dir of this process and of the processes it starts meanwhile."""
    saved_env, saved_module = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = path, path
    try:
        yield
    finally:
        tempfile.tempdir = saved_module
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env


def _time_pufferlib(env: Any, seconds: float, warmup: float, rows: int, space: Any, seed: int) -> float:
    return time_async(env, seconds, warmup, rows, space, seed, count_masks=False)


# --------------------------------------------------------------------------- the run


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


def _add_ratios(rows: list[dict]) -> list[dict]:
    def best(predicate: Callable[[dict], bool]) -> float | None:
        values = [r["sps"] for r in rows if predicate(r) and r.get("sps")]
        return max(values) if values else None

    baselines = {
        "ratio_vs_raw": best(lambda r: r["kind"] == "raw"),
        "ratio_vs_serial": best(lambda r: r["backend"] == "serial"),
        "ratio_vs_async": best(lambda r: r["backend"] == "gymnasium-async"),
        "ratio_vs_pufferlib": best(lambda r: r["backend"] == "pufferlib-multiprocessing"),
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
) -> list[dict]:
    """Measure every configuration on ``env_id``; see the module docstring for the rows.

    ``seconds`` is the measuring time per configuration and round; ``progress(name, i,
    total)`` is called before each measurement. ``settings`` overrides the
    Multiprocessing (num_workers, batch_size) pairs; ``include_adapters`` adds ``to_gymnasium``
    and ``to_sb3`` rows, each next to its vector env stepped directly (``ratio_vs_backend``);
    ``include_action_check`` a Multiprocessing row with ``send``'s action checks on, next to
    the same vector env with ``check_actions=False`` (``ratio_vs_unchecked``, ``check_us``).
    ``include_restart`` a row with the median seconds from a worker's SIGKILL to the next
    batch under ``on_fault="restart"`` (``latency_seconds``). A configuration that fails to build or
    run gets ``sps=None`` and its ``error`` text instead of stopping the run.
    """
    warmup = min(1.0, seconds / 5) if warmup is None else warmup
    cases = _cases(env_id, num_envs, include_peers, include_ray, seed, settings, include_adapters, include_action_check)
    total = len(cases) * rounds + int(include_emulation) + int(include_restart)
    done = 0
    for _ in range(rounds):
        for case in cases:
            if case.error is not None:
                continue
            if progress is not None:
                progress(case.name, done, total)
            done += 1
            env = None
            try:
                env = case.build()
                case.results.append(case.measure(env, seconds, warmup))
            except Exception as exc:
                case.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            finally:
                if env is not None:
                    with contextlib.suppress(Exception):
                        env.close()
    rows = [case.row() for case in cases]
    if include_emulation:
        if progress is not None:
            progress("emulation overhead", done, total)
        done += 1
        try:
            rows[1:1] = _emulation_rows(env_id, seconds)
        except Exception as exc:
            rows.insert(
                1,
                {
                    "name": "emulated single env",
                    "kind": "emulation",
                    "backend": "emulation",
                    "num_envs": 1,
                    "num_workers": 1,
                    "batch_size": 1,
                    "sps": None,
                    "error": f"{type(exc).__name__}: {exc}"[:300],
                },
            )
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
        return {**row, "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
    return {
        **row,
        "error": None,
        "latency_seconds": result["median_seconds"],
        "latencies": result["kill_to_batch_seconds"],
    }


# --------------------------------------------------------------------------- rendering


def _annotation(row: dict, start: str = "", end: str = "") -> str:
    """What a row's own comparison says: emulation overhead, or an adapter's cost."""
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


def _fmt_ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def render_table(rows: list[dict], title: str | None = None) -> Any:
    """A rich Table of benchmark rows."""
    from rich.table import Table

    env = rows[0].get("env") if rows else ""
    table = Table(title=title or f"puffer bench {env}", show_lines=False)
    for column, justify in (
        ("configuration", "left"),
        ("workers", "right"),
        ("batch", "right"),
        ("steps/s", "right"),
        ("vs raw", "right"),
        ("vs Serial", "right"),
        ("vs AsyncVectorEnv", "right"),
        ("vs PufferLib", "right"),
    ):
        table.add_column(column, justify=justify)
    for row in rows:
        if row["kind"] == "restart" and row.get("latency_seconds") is not None:
            name = f"{row['name']} [dim](median of {len(row['latencies'])}, seconds)[/dim]"
            table.add_row(
                name, str(row["num_workers"]), str(row["batch_size"]), f"{row['latency_seconds']:.3f} s", *[""] * 4
            )
            continue
        if row.get("sps") is None:
            table.add_row(
                row["name"],
                str(row["num_workers"]),
                str(row["batch_size"]),
                f"[red]failed[/red] {row.get('error') or ''}",
                "",
                "",
                "",
                "",
            )
            continue
        name = row["name"] + _annotation(row, "[dim]", "[/dim]")
        table.add_row(
            name,
            str(row["num_workers"]),
            str(row["batch_size"]),
            f"{row['sps']:,.0f}",
            _fmt_ratio(row.get("ratio_vs_raw")),
            _fmt_ratio(row.get("ratio_vs_serial")),
            _fmt_ratio(row.get("ratio_vs_async")),
            _fmt_ratio(row.get("ratio_vs_pufferlib")),
        )
    return table


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
            name = row["name"] + _annotation(row)
            lines.append(
                f"| {name} | {row['num_workers']} | {row['batch_size']} | {row['sps']:,.0f} | "
                f"{_fmt_ratio(row.get('ratio_vs_raw'))} | {_fmt_ratio(row.get('ratio_vs_serial'))} | "
                f"{_fmt_ratio(row.get('ratio_vs_async'))} | {_fmt_ratio(row.get('ratio_vs_pufferlib'))} |"
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
) -> dict:
    """Run the standard set; store it in ``out_dir`` as one dated JSON file (``bench.results.write_run``).

    Returns the stored document. Envs whose plugin or package is missing are listed under
    ``skipped`` rather than failing the run. ``include_training`` adds the training section
    (``puffer_core.bench.training``) when torch, matplotlib and Stable-Baselines3 import;
    ``include_uneven`` the uneven-cores section (``puffer_core.bench.uneven``: synchronous
    against asynchronous batches with half the workers 3× slower), ``seconds`` per setting
    and at least two rounds.
    """
    results: dict[str, list[dict]] = {}
    notes: list[str] = []
    for env_id, num_envs in (envs or STANDARD).items():
        reason = unavailable_reason(env_id)
        if reason:
            notes.append(reason)
            continue
        results[env_id] = run_bench(
            env_id, num_envs=num_envs, seconds=seconds, include_peers=include_peers, progress=progress, rounds=rounds
        )
    if include_peers and pufferlib_version() is None:
        notes.append(f"PufferLib is not importable here, so its rows are absent (`{PUFFERLIB_INSTALL}` adds them)")
    uneven = None
    if include_uneven:
        uneven = bench_uneven.run_uneven(seconds, max(2, rounds), progress=progress)
    training = None
    if include_training:
        missing = [m for m in ("torch", "matplotlib", "stable_baselines3") if importlib.util.find_spec(m) is None]
        if missing:
            notes.append(f"training section skipped: needs {', '.join(missing)} (pip install 'puffer-core[train,sb3]')")
        else:
            training = bench_training.run_training(progress=progress)
    sections = {"seconds": seconds, "rounds": rounds, "results": results, "uneven": uneven, "training": training}
    return write_run(out_dir, {**sections, "skipped": notes})
