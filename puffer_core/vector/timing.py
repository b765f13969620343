"""The one timing harness: how the benches, autotune and the emulation overhead measure.

Interleaved rounds (``run_rounds``)
    Every setting is measured once per round, in turn with the others, and keeps every
    round's figure (its best is what counts): a burst of noise on a shared machine then
    hits one round of several settings rather than every round of one. A setting whose
    measurement raises keeps the error and is not measured again.

Steps per second (``time_steps`` and the drivers of each API over it)
    A step function run over a fixed wall-clock span after a warm-up, with the actions
    drawn before the clock starts.

CPU time of a step loop (``loop_seconds``, ``interleaved``)
    Two loops of single-env steps compared in alternating rounds on this thread's CPU
    clock, resets left out: the emulation overhead, where the difference is a fraction of
    a microsecond per step.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from puffer_core.env.random_actions import random_action_batches
from puffer_core.errors import one_line
from puffer_core.plugins.apis import is_multiagent

__all__ = [
    "Loop",
    "Measured",
    "Progress",
    "Turn",
    "error_summary",
    "interleaved",
    "loop_seconds",
    "run_rounds",
    "time_async",
    "time_gym_vector",
    "time_raw",
    "time_sb3",
    "time_steps",
]

#: ``progress(name, done, total)``: called before each measurement.
Progress = Callable[[str, int, int], None]
#: The longest error text a setting keeps.
ERROR_CHARS = 300


class Turn(NamedTuple):
    """One measurement of ``run_rounds``: which setting, in which round, and how many
    measurements are left, this one included (what a time budget is split over)."""

    index: int
    round: int
    left: int


@dataclass
class Measured:
    """One setting's figures, one per round it ran, and the error that stopped it (None: none)."""

    name: str
    figures: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def best(self) -> float | None:
        return max(self.figures) if self.figures else None


def run_rounds(
    names: Sequence[str],
    measure: Callable[[Turn], float],
    rounds: int,
    *,
    alternate: bool = False,
    progress: Progress | None = None,
    fatal: bool | Callable[[Turn, Exception], bool] = False,
) -> list[Measured]:
    """Measure every setting of ``names`` once per round, interleaved; ``measure(turn)``
    returns the figure of setting ``turn.index``.

    ``alternate`` reverses the order every other round, so that no setting always follows
    the same one. A setting whose measurement raises is given the error as one line and
    skipped in later rounds, unless ``fatal`` is True or ``fatal(turn, exc)`` says the whole
    run must stop: then the exception propagates. ``progress(name, done, total)`` is called before each turn,
    skipped ones included.
    """
    results = [Measured(name) for name in names]
    order = list(range(len(results)))
    total = len(results) * rounds
    done = 0
    for r in range(rounds):
        for index in order[::-1] if alternate and r % 2 else order:
            if progress is not None:
                progress(results[index].name, done, total)
            turn = Turn(index, r, total - done)
            done += 1
            if results[index].error is not None:
                continue
            try:
                results[index].figures.append(measure(turn))
            except Exception as exc:
                if fatal is True or (callable(fatal) and fatal(turn, exc)):
                    raise
                results[index].error = error_summary(exc)
    return results


def error_summary(exc: BaseException) -> str:
    """What a setting that failed reports: the exception as one line (a worker's quoted
    traceback cut to its last line), at most ``ERROR_CHARS`` long."""
    return one_line(f"{type(exc).__name__}: {exc}")[:ERROR_CHARS]


def time_async(
    env: Any, seconds: float, warmup: float, rows: int, space: Any, seed: int, count_masks: bool = True
) -> float:
    """Steps/second of a vector env driven through recv/send (Puffer's, or PufferLib's with
    ``count_masks=False``: its recv tuple differs, so every row counts)."""

    def step(actions: np.ndarray) -> int:
        out = env.recv()
        env.send(actions)
        masks = out[6] if count_masks else None
        return rows if masks is None else int(np.count_nonzero(masks))

    return time_steps(step, lambda: env.async_reset(seed), seconds, warmup, rows, space, seed)


def time_gym_vector(env: Any, seconds: float, warmup: float, rows: int, space: Any, seed: int) -> float:
    """Steps/second of a Gymnasium-style vector env driven through ``reset(seed=)`` / ``step``."""
    return time_steps(env.step, lambda: env.reset(seed=seed), seconds, warmup, rows, space, seed)


def time_sb3(env: Any, seconds: float, warmup: float, rows: int, space: Any, seed: int) -> float:
    """Steps/second of a Stable-Baselines3 VecEnv driven as SB3 drives it (``step`` is
    step_async + step_wait; seeds go through ``seed`` before ``reset``)."""

    def reset() -> None:
        env.seed(seed)
        env.reset()

    return time_steps(env.step, reset, seconds, warmup, rows, space, seed)


def time_steps(
    step: Callable[[np.ndarray], Any],
    reset: Callable[[], Any],
    seconds: float,
    warmup: float,
    rows: int,
    space: Any,
    seed: int,
) -> float:
    """Steps/second of ``step(a batch of actions)`` after ``reset()``, over ``seconds`` after
    ``warmup``; a ``step`` that returns an int says how many rows it stepped, else ``rows``."""
    actions = random_action_batches(space, rows, 64, seed)
    reset()
    n = 0
    deadline = time.perf_counter() + warmup
    while time.perf_counter() < deadline:
        step(actions[n % 64])
        n += 1
    steps = 0
    start = time.perf_counter()
    end = start + seconds
    while True:
        for _ in range(8):
            stepped = step(actions[n % 64])
            n += 1
            steps += stepped if isinstance(stepped, int) else rows
        now = time.perf_counter()
        if now >= end:
            return steps / (now - start)


def time_raw(env: Any, seconds: float, warmup: float, seed: int) -> float:
    """Steps/second of one raw Gymnasium env (or PettingZoo Parallel env: agent steps)."""
    multi = is_multiagent(env)
    if multi:
        env.reset(seed=seed)
        for agent in env.possible_agents:
            env.action_space(agent).seed(seed)
        pool = {agent: [env.action_space(agent).sample() for _ in range(256)] for agent in env.possible_agents}
    else:
        env.reset(seed=seed)
        env.action_space.seed(seed)
        pool = [env.action_space.sample() for _ in range(1024)]
        if all(isinstance(a, (int, np.integer)) for a in pool):
            pool = [int(a) for a in pool]
    step, reset = env.step, env.reset

    def run(until: float) -> tuple[int, float]:
        count = 0
        i = 0
        while True:
            for _ in range(16):
                if multi:
                    acts = {agent: pool[agent][i % 256] for agent in env.agents}
                    step(acts)
                    count += len(acts)
                    if not env.agents:
                        reset()
                else:
                    _, _, term, trunc, _ = step(pool[i % 1024])
                    count += 1
                    if term or trunc:
                        reset()
                i += 1
            now = time.perf_counter()
            if now >= until:
                return count, now

    run(time.perf_counter() + warmup)
    start = time.perf_counter()
    count, now = run(start + seconds)
    return count / (now - start)


#: A single-env step loop: (step, reset, actions).
Loop = tuple[Callable, Callable, list]


def loop_seconds(step: Callable, reset: Callable, actions: list, start: int, count: int) -> float:
    """CPU seconds of this thread spent in ``count`` steps (actions from ``start`` on, cycled);
    resets are run but not timed (their length varies from episode to episode and would
    swamp a per-step difference)."""
    n = len(actions)
    clock = time.thread_time  # CPU time of this thread: other processes on the box do not count
    elapsed = 0.0
    t0 = clock()
    for i in range(start, start + count):
        _, _, terminated, truncated, _ = step(actions[i % n])
        if terminated or truncated:
            elapsed += clock() - t0
            reset()
            t0 = clock()
    return elapsed + clock() - t0


def interleaved(raw: Loop, emulated: Loop, steps: int, rounds: int = 10) -> dict:
    """Time ``steps`` steps of each loop in ``rounds`` alternating rounds (``run_rounds``);
    returns raw_sps, emulated_sps (totals over all rounds) and ratio (median of the
    per-round emulated/raw time ratios, robust to a round disturbed by noise). Both loops
    must already be reset; an error in either propagates."""
    per_round = max(1, steps // rounds)
    loops = (raw, emulated)

    def measure(turn: Turn) -> float:
        return loop_seconds(*loops[turn.index], turn.round * per_round, per_round)

    gc_was_enabled = gc.isenabled()
    gc.disable()  # a collection landing in one loop only would bias the ratio
    try:
        for loop in loops:  # warm-up both
            loop_seconds(*loop, 0, min(per_round, 200))
        raw_times, emulated_times = (
            m.figures for m in run_rounds(("raw", "emulated"), measure, rounds, alternate=True, fatal=True)
        )
    finally:
        if gc_was_enabled:
            gc.enable()
    total = per_round * rounds
    return {
        "raw_sps": total / sum(raw_times),
        "emulated_sps": total / sum(emulated_times),
        "ratio": statistics.median(e / r for r, e in zip(raw_times, emulated_times)),
    }
