"""How every bench section times a setting: steps/second over a fixed wall-clock span,
after a warm-up, with actions drawn before the clock starts."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from puffer_core._multiagent import is_multiagent
from puffer_core.cli.rollout import random_actions

__all__ = ["random_action_batches", "time_async", "time_gym_vector", "time_raw", "time_sb3", "time_steps"]


def random_action_batches(space: Any, rows: int, count: int, seed: int) -> np.ndarray:
    """``count`` batches of ``rows`` random flat actions, drawn once so that drawing costs no step time."""
    rng = np.random.default_rng(seed)
    flat = random_actions(space, rows * count, rng)
    return flat.reshape(count, rows, *flat.shape[1:])


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
        obs, _ = env.reset(seed=seed)
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
                    _, _, terms, truncs, _ = step(acts)
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
