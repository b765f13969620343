"""Restart latency: how long a run under ``on_fault="restart"`` stalls when a worker dies.

A Multiprocessing vector env (one worker per core) steps for a while; then one worker is
killed with SIGKILL from outside, as the OOM killer or a crashing env would, and the next
``step`` is timed: fault noticed, process replaced, envs re-created and reset, batch
returned. Targets (the fault-tolerance issue): < 0.5 s for CartPole, < 2 s for NetHack.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import numpy as np

from puffer_core import vector
from puffer_core.env.random_actions import random_action_batches
from puffer_core.vector.checks import available_cpus

__all__ = ["render_line", "restart_latency"]


def restart_latency(env_id: str, num_envs: int = 8, trials: int = 5, seed: int = 0) -> dict[str, Any]:
    """Median seconds from a worker's SIGKILL to the next batch, over ``trials`` kills."""
    workers = min(available_cpus(), num_envs)
    latencies = []
    with vector.make(
        env_id,
        num_envs=num_envs,
        num_workers=workers,
        backend="multiprocessing",
        seed=seed,
        on_fault="restart",
        vector_kwargs={"max_restarts": trials + 1},
    ) as envs:
        actions = random_action_batches(envs.single_action_space, envs.num_envs, 64, seed)
        envs.reset()
        for trial in range(trials):
            for i in range(20):
                envs.step(actions[(trial * 20 + i) % 64])
            os.kill(envs.pids[trial % workers], signal.SIGKILL)
            started = time.perf_counter()
            envs.step(actions[trial % 64])
            latencies.append(time.perf_counter() - started)
        stats = envs.stats
    return {
        "env": env_id,
        "num_envs": num_envs,
        "num_workers": workers,
        "trials": trials,
        "kill_to_batch_seconds": [round(x, 4) for x in latencies],
        "median_seconds": round(float(np.median(latencies)), 4),
        "restarts": stats["restarts"],
    }


def render_line(result: dict[str, Any]) -> str:
    return (
        f"restart latency ({result['env']}, {result['num_envs']} envs on {result['num_workers']} workers, "
        f"SIGKILL → next batch): median {result['median_seconds']:.3f} s over {result['trials']} kills "
        f"({', '.join(f'{x:.3f}' for x in result['kill_to_batch_seconds'])})"
    )
