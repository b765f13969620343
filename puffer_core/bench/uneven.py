"""Uneven cores: synchronous full batches against asynchronous ones when some workers are slower.

The machines this stack was designed for mix fast and slow cores (8 performance + 16
efficiency cores). A synchronous step (``batch_size == num_envs``) waits for the slowest
worker, so the fast cores idle for most of each step; with ``batch_size < num_envs``
(EnvPool-style ``recv``/``send``) whichever workers finish first make the next batch, and
the fast ones keep stepping.

``BusyEnv`` reproduces it on any machine: each step burns a set number of microseconds of
the stepping thread's CPU time (a busy-wait on the thread's CPU clock: it really uses the
CPU, and a step that shares its core with another process takes longer in wall time, as
real work does), ``slowdown`` times more in the envs whose first seed is in
``slow_seeds``. ``run_uneven`` puts the slow envs on half of the workers and measures,
in the same run and interleaved, the same vector env settings stepped synchronously
(``step``) and asynchronously (``recv``/``send``, half the envs per batch), for two
layouts: one worker per core (where the fast workers' idle time in synchronous steps is
the whole difference) and two workers per core (where the cores are shared, so a
synchronous step wastes no CPU and asynchronous batches gain only by stepping the cheap
envs more often). Each layout also gets ``ideal_ratio``: the async/sync ratio a machine
with no overhead would show for these step costs on this many cores.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from puffer_core import vector
from puffer_core.env.environments import SpecCreator
from puffer_core.specs.declarations import EnvSpec
from puffer_core.vector.checks import available_cpus
from puffer_core.vector.timing import Progress, Turn, run_rounds, time_async, time_gym_vector

__all__ = [
    "BUSY_SPEC",
    "BusyEnv",
    "busy_batch",
    "headline",
    "ideal_ratio",
    "layout_cells",
    "render_markdown",
    "run_uneven",
    "slow_seeds",
]


class BusyEnv(gymnasium.Env):
    """A step that costs ``step_us`` µs of CPU (``slowdown`` × that when the env's first seed
    is in ``slow_seeds``); observation ``[t / episode_length, slow]``, episodes of
    ``episode_length`` steps, reward 1 per step."""

    metadata: dict = {"render_modes": []}

    def __init__(
        self, step_us: float = 200.0, slowdown: float = 1.0, slow_seeds: tuple = (), episode_length: int = 500
    ):
        self.step_ns = int(step_us * 1000)
        self.slowdown = float(slowdown)
        self.slow_seeds = frozenset(int(s) for s in slow_seeds)
        self.episode_length = int(episode_length)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.cost_ns = self.step_ns
        self.t = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.t / self.episode_length, float(self.cost_ns > self.step_ns)], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:  # the first (seeded) reset decides; autoresets are unseeded
            self.cost_ns = int(self.step_ns * (self.slowdown if seed in self.slow_seeds else 1.0))
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        burn_cpu(self.cost_ns)
        self.t += 1
        return self._obs(), 1.0, self.t >= self.episode_length, False, {}


def busy_batch(num_envs: int, **kwargs: Any) -> Any:
    """``num_envs`` BusyEnvs as one native batch (gymnasium's SyncVectorEnv: env i seeded seed + i,
    so the slow envs are the same as one env at a time)."""
    from gymnasium.vector import SyncVectorEnv

    return SyncVectorEnv([functools.partial(BusyEnv, **kwargs)] * num_envs)


#: BusyEnv as a spec with native batches, for ``run_uneven(native=True)``.
BUSY_SPEC = EnvSpec("bench/busy", BusyEnv, batch_creator=busy_batch, description="a step that burns CPU time")


def burn_cpu(ns: int) -> None:
    """Busy-wait until this thread has used ``ns`` nanoseconds of CPU time."""
    clock = time.thread_time_ns
    end = clock() + ns
    while clock() < end:
        pass


def slow_seeds(num_envs: int, num_workers: int, seed: int) -> tuple[int, ...]:
    """First seeds of the envs on the second half of the workers (envs are split over the
    workers in order, evenly here; env ``i`` is first reset with ``seed + i``)."""
    per_worker = num_envs // num_workers
    first_slow = (num_workers - num_workers // 2) * per_worker
    return tuple(seed + i for i in range(first_slow, num_envs))


def ideal_ratio(worker_costs: list[float], cpus: int) -> float:
    """Async over sync steps/second with no overhead: each worker steps the same number of
    envs at CPU cost ``worker_costs[w]`` per batch; the cores are shared fairly.

    Sync: every worker steps once per batch, all starting together; a batch takes as long
    as the cores take to run them all (``_shared_makespan``). Async: every worker always
    has work, runs at ``min(1, cpus / workers)`` of a core, and counts each time it
    finishes."""
    workers = len(worker_costs)
    share = min(1.0, cpus / workers)
    async_rate = sum(share / cost for cost in worker_costs)  # worker-batches per unit of time
    sync_rate = workers / _shared_makespan(worker_costs, cpus)
    return async_rate / sync_rate


def _shared_makespan(costs: list[float], cpus: int) -> float:
    """Time for jobs of these CPU costs, started together, to finish on ``cpus`` cores shared fairly."""
    left, elapsed = sorted(costs), 0.0
    while left:
        rate = min(1.0, cpus / len(left))  # every job still running progresses at this rate
        smallest = left[0]
        elapsed += smallest / rate
        left = [c - smallest for c in left[1:]]
    return elapsed


def _layouts(cpus: int, envs_per_worker: int) -> list[tuple[int, int, int]]:
    """(workers, envs, batch) per layout: one worker per core, then two; half the envs per batch."""
    out = []
    for workers in dict.fromkeys((max(2, cpus), max(4, 2 * cpus))):
        envs = workers * envs_per_worker
        out.append((workers, envs, envs // 2))
    return out


def run_uneven(
    seconds: float = 3.0,
    rounds: int = 2,
    *,
    step_us: float = 200.0,
    slowdown: float = 3.0,
    envs_per_worker: int = 2,
    cpus: int | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    native: bool = False,
) -> dict[str, Any]:
    """Sync (``step``, full batch) against async (``recv``/``send``, half the envs per batch)
    on ``BusyEnv`` with half the workers ``slowdown`` × slower, per layout (see the module
    docstring); each setting measured ``rounds`` times, interleaved, keeping its best. With
    ``native``, each worker steps its envs as one native batch (``BUSY_SPEC``).

    Returns ``{"created", "cpus", "step_us", "slowdown", "seconds", "rounds", "native", "layouts"}``;
    each layout: ``num_workers``, ``num_envs``, ``batch_size``, ``slow_workers``,
    ``sync_sps``, ``async_sps``, ``ratio`` (async / sync), ``ideal_ratio`` and each round's
    figures.
    """
    cpus = cpus or available_cpus()
    layouts = _layouts(cpus, envs_per_worker)
    warmup = min(1.0, seconds / 5)
    # Sync and async of each layout side by side; alternate rounds reverse the order, so
    # either goes first as often.
    settings = [(layout, mode) for layout in layouts for mode in ("sync", "async")]

    def measure(turn: Turn) -> float:
        (workers, envs, batch), mode = settings[turn.index]
        return _measure(mode, workers, envs, batch, step_us, slowdown, seconds, warmup, seed, native)

    kind = ", native batches" if native else ""
    names = [f"uneven cores: {workers} workers, {mode}{kind}" for (workers, _, _), mode in settings]
    # fatal: a test env of our own, so a failure is a bug, not a row to report
    measured = run_rounds(names, measure, rounds, alternate=True, progress=progress, fatal=True)
    figures = {(layout[0], mode): m.figures for (layout, mode), m in zip(settings, measured)}
    return {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cpus": cpus,
        "step_us": step_us,
        "slowdown": slowdown,
        "seconds": seconds,
        "rounds": rounds,
        "native": native,
        "layouts": [_layout_row(w, e, b, step_us, slowdown, cpus, figures) for w, e, b in layouts],
    }


def _measure(
    mode: str,
    workers: int,
    envs: int,
    batch: int,
    step_us: float,
    slowdown: float,
    seconds: float,
    warmup: float,
    seed: int,
    native: bool = False,
) -> float:
    """Steps/second of one setting: ``step`` on full batches ("sync") or recv/send on half batches ("async")."""
    with vector.make(
        SpecCreator(BUSY_SPEC) if native else BusyEnv,
        vector_kwargs={"native": True} if native else None,
        num_envs=envs,
        num_workers=workers,
        batch_size=envs if mode == "sync" else batch,
        backend="multiprocessing",
        seed=seed,
        step_us=step_us,
        slowdown=slowdown,
        slow_seeds=slow_seeds(envs, workers, seed),
    ) as venv:
        space = venv.single_action_space
        if mode == "sync":
            return time_gym_vector(venv, seconds, warmup, venv.num_envs, space, seed)
        return time_async(venv, seconds, warmup, venv.batch_size, space, seed)


def _layout_row(
    workers: int,
    envs: int,
    batch: int,
    step_us: float,
    slowdown: float,
    cpus: int,
    figures: dict[tuple[int, str], list[float]],
) -> dict[str, Any]:
    per_worker = envs // workers
    slow = workers // 2
    costs = [per_worker * step_us] * (workers - slow) + [per_worker * step_us * slowdown] * slow
    sync, async_ = max(figures[(workers, "sync")]), max(figures[(workers, "async")])
    return {
        "num_workers": workers,
        "num_envs": envs,
        "batch_size": batch,
        "slow_workers": slow,
        "workers_per_cpu": round(workers / cpus, 2),
        "sync_sps": round(sync, 1),
        "async_sps": round(async_, 1),
        "ratio": round(async_ / sync, 3),
        "ideal_ratio": round(ideal_ratio(costs, cpus), 3),
        "sync_rounds": [round(x, 1) for x in figures[(workers, "sync")]],
        "async_rounds": [round(x, 1) for x in figures[(workers, "async")]],
    }


# --------------------------------------------------------------------------- rendering


def headline(result: dict[str, Any]) -> str:
    batches = ", each worker's envs one native batch" if result.get("native") else ""
    return (
        f"Uneven cores: half the workers {result['slowdown']:g}× slower (BusyEnv, {result['step_us']:g} µs of CPU "
        f"per fast step{batches}), {result['cpus']} CPUs, {result['rounds']} interleaved rounds, {result['created']}"
    )


def render_markdown(result: dict[str, Any]) -> str:
    """The section ``bench.md`` gets."""
    lines = [
        "## Uneven cores" + (", native batches" if result.get("native") else ""),
        "",
        headline(result) + ". Sync: `step` with `batch_size == num_envs`; async: `recv`/`send` with "
        "half the envs per batch. Ideal: the ratio with no overhead, on this many cores.",
        "",
        "| workers | envs | async batch | sync steps/s | async steps/s | async / sync | ideal |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += ["| " + " | ".join(layout_cells(row)) + " |" for row in result["layouts"]]
    return "\n".join(lines) + "\n"


def layout_cells(row: dict[str, Any]) -> list[str]:
    return [
        f"{row['num_workers']} ({row['slow_workers']} slow)",
        str(row["num_envs"]),
        str(row["batch_size"]),
        f"{row['sync_sps']:,.0f}",
        f"{row['async_sps']:,.0f}",
        f"{row['ratio']:.2f}×",
        f"{row['ideal_ratio']:.2f}×",
    ]
