"""The machine's ceiling for vectorized stepping: independent processes that never talk.

``parallel_ceiling`` starts one process per CPU, each stepping its own Serial vector env
(its share of the envs) with random actions, all timed over the same window, and sums
their steps/second. No vector backend on the machine can beat that sum: any backend
runs the same env steps on the same cores and adds communication. Its ratio over one
Serial process is the most a multiprocess setting can gain here; ``puffer bench`` shows
it beside the Multiprocessing rows so a target above it reads as what it is.

With ``lockstep=True`` the processes wait for each other after every batch (a spinning
barrier in shared memory, nothing else): the ceiling of *synchronous* stepping, where a
full batch is only as fast as its slowest share. Envs whose step time varies (NetHack)
lose much more to that wait than envs whose step time is steady (CartPole).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from typing import Any

from puffer_core import vector
from puffer_core.env.random_actions import random_action_batches
from puffer_core.vector.checks import available_cpus, split_envs
from puffer_core.vector.mp.start import default_start_method

__all__ = ["parallel_ceiling"]


def _step_alone(
    env_id: str,
    num_envs: int,
    seed: int,
    index: int,
    barrier: Any,
    start_at: Any,
    seconds: float,
    out: Any,
    lockstep: Any,
) -> None:
    """Process ``index``: build, wait for the others, then step for ``seconds`` from the common
    start (``lockstep``: a shared array of batch counts plus a stop flag, or None)."""
    try:
        with vector.make(env_id, num_envs=num_envs, seed=seed) as envs:
            actions = random_action_batches(envs.single_action_space, envs.batch_size, 64, seed)
            envs.async_reset(seed)
            envs.recv()
            barrier.wait()
            while time.perf_counter() < start_at.value:
                pass
            end, steps, n = start_at.value + seconds, 0, 0
            while time.perf_counter() < end:
                envs.send(actions[n % 64])
                envs.recv()
                steps += envs.batch_size
                n += 1
                if lockstep is not None and not _wait_for_others(lockstep, index, n):
                    break
            if lockstep is not None:
                lockstep[-1] = 1  # time is up: nobody waits for this process any more
            out.put(("ok", steps / (time.perf_counter() - start_at.value)))
    except Exception as exc:  # reported to the parent, which raises it
        barrier.abort()  # the others (and the parent) stop waiting for this one
        out.put(("error", f"{type(exc).__name__}: {exc}"))


def _wait_for_others(counts: Any, me: int, batches: int) -> bool:
    """Publish ``batches`` done by process ``me``; spin (yielding) until every process has done
    as many. False when one has stopped (its time is up), so nobody waits for it."""
    counts[me] = batches
    others = range(len(counts) - 1)
    while any(counts[i] < batches for i in others):
        if counts[-1]:
            return False
        os.sched_yield()
    return True


def parallel_ceiling(
    env_id: str,
    num_envs: int,
    seconds: float = 3.0,
    processes: int | None = None,
    seed: int = 0,
    lockstep: bool = False,
) -> float:
    """Summed steps/second of ``processes`` (default: the CPUs) independent Serial vector envs
    of ``num_envs / processes`` envs each, stepped over the same ``seconds``; with ``lockstep``,
    each waits for all the others after every batch."""
    processes = processes or min(available_cpus(), num_envs)
    # The vector envs' own start method: fork only while this process runs no other thread
    # (a fork beside one may deadlock the child), forkserver else.
    ctx = multiprocessing.get_context(default_start_method())
    barrier = ctx.Barrier(processes + 1)
    start_at = ctx.Value("d", float("inf"), lock=False)
    # One batch count per process, then the stop flag; lock-free (each process writes its own slot).
    counts = ctx.Array("q", processes + 1, lock=False) if lockstep else None
    out = ctx.Queue()
    procs = [
        ctx.Process(
            target=_step_alone,
            args=(env_id, count, seed + i, i, barrier, start_at, seconds, out, counts),
            daemon=True,
        )
        for i, count in enumerate(split_envs(num_envs, processes))
    ]
    for proc in procs:
        proc.start()
    try:
        try:
            barrier.wait(timeout=120)
        except threading.BrokenBarrierError:
            pass  # a process failed while building: its error is on the queue
        else:
            start_at.value = time.perf_counter() + 0.05  # perf_counter is CLOCK_MONOTONIC: shared by the processes
        results = [out.get(timeout=seconds + 120) for _ in procs]
    finally:
        for proc in procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join()
    errors = [text for kind, text in results if kind == "error"]
    if errors:  # the cause first, not the others' broken barrier
        errors.sort(key=lambda text: text.startswith("BrokenBarrierError"))
        raise RuntimeError(f"a ceiling process failed: {errors[0]}")
    return sum(value for _, value in results)
