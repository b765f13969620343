"""Small deterministic envs for testing vector backends (and for plugin authors who want
to check their own vectorization code): they make row mix-ups, wrong seeding, wrong
autoreset and fault handling visible.

``CountingEnv``
    Observation ``[t, last_action, action_sum, first_seed, noise]``: ``t`` counts steps in
    the episode, ``first_seed`` is the seed of the env's latest seeded reset (so a row tells
    which env it came from; autoresets are unseeded), ``noise`` is drawn from the env's RNG (so seeding and RNG
    continuation show). The episode terminates after ``episode_length`` steps.
``FaultEnv``
    A ``CountingEnv`` that misbehaves on cue: raises, hangs or exits in ``reset`` or
    ``step``, in the env whose first seed is ``fault_seed`` (or in every env).
``TinyParallelEnv``
    A PettingZoo-Parallel-style env with 3 agents that leave one by one.
``rollout``
    A vector env's trajectory, for comparing backends, settings or code paths.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

__all__ = ["CountingEnv", "FaultEnv", "TinyParallelEnv", "rollout"]


class CountingEnv(gymnasium.Env):
    metadata: dict = {"render_modes": []}

    def __init__(self, episode_length: int = 5, delay: float = 0.0, delay_seeds: tuple = (), n_actions: int = 3):
        self.episode_length = int(episode_length)
        self.delay = float(delay)
        self.delay_seeds = tuple(delay_seeds)
        self.observation_space = spaces.Box(-1e9, 1e9, shape=(5,), dtype=np.float64)
        self.action_space = spaces.Discrete(n_actions)
        self.first_seed = -1
        self.t = 0
        self.last_action = -1
        self.action_sum = 0

    def _obs(self) -> np.ndarray:
        noise = float(self.np_random.random())
        return np.array([self.t, self.last_action, self.action_sum, self.first_seed, noise], dtype=np.float64)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self.first_seed = seed
        self.t = 0
        self.last_action = -1
        self.action_sum = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.delay and (not self.delay_seeds or self.first_seed in self.delay_seeds):
            time.sleep(self.delay)
        action = int(action)
        self.t += 1
        self.last_action = action
        self.action_sum += action
        terminated = self.t >= self.episode_length
        return self._obs(), float(action + 1), terminated, False, {}


class FaultEnv(CountingEnv):
    """``mode``: "raise", "hang", "exit" (``os._exit(3)``) or "segfault" (reads address 0);
    ``where``: "step", "reset" or "init"; ``at``: the step (or reset) count that triggers it,
    plus a number drawn below ``jitter`` from the first seed (so envs fault at different,
    reproducible steps); ``fault_seed``: only the env whose first seed is this misbehaves
    (None: every env, also each one re-created after a restart)."""

    def __init__(
        self,
        mode: str = "raise",
        where: str = "step",
        at: int = 3,
        fault_seed: int | None = None,
        episode_length: int = 5,
        hang_seconds: float = 600.0,
        jitter: int = 0,
    ):
        super().__init__(episode_length=episode_length)
        self.mode, self.where, self.at, self.fault_seed = mode, where, at, fault_seed
        self.hang_seconds = hang_seconds
        self.jitter = int(jitter)
        self.steps = 0
        self.resets = 0
        if where == "init":
            self._fault("init")

    def _fault(self, where: str) -> None:
        if self.mode == "raise":
            raise RuntimeError(f"FaultEnv: deliberate failure in {where} (env first seeded {self.first_seed})")
        if self.mode == "hang":
            time.sleep(self.hang_seconds)
        elif self.mode == "exit":
            os._exit(3)
        elif self.mode == "segfault":
            ctypes.string_at(0)  # a real segmentation fault (a SIGSEGV sent by kill, a handler may survive)

    def _mine(self) -> bool:
        return self.fault_seed is None or self.first_seed == self.fault_seed

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        out = super().reset(seed=seed, options=options)
        if seed is not None and self.jitter:
            self.at = self.at + int(np.random.default_rng(seed).integers(self.jitter))
            self.jitter = 0  # drawn once, from the first seed
        self.resets += 1
        if self.where == "reset" and self.resets >= self.at and self._mine():
            self._fault("reset")
        return out

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.steps += 1
        if self.where == "step" and self.steps >= self.at and self._mine():
            self._fault("step")
        return super().step(action)


class TinyParallelEnv:
    """Three agents; agent ``i`` leaves after ``lengths[i]`` steps; the episode ends when all
    have left. Observation: ``[t, agent index, action received, first_seed, noise]``."""

    metadata: dict = {"render_modes": [], "name": "tiny_parallel_v0", "is_parallelizable": True}
    render_mode = None

    def __init__(self, lengths: tuple = (2, 4, 6)):
        self.possible_agents = [f"agent_{i}" for i in range(len(lengths))]
        self.lengths = dict(zip(self.possible_agents, lengths))
        self._obs_space = spaces.Box(-1e9, 1e9, shape=(5,), dtype=np.float32)
        self._act_space = spaces.Discrete(4)
        self.agents: list = []
        self.t = 0
        self.first_seed = -1
        self.rng = np.random.default_rng()

    def observation_space(self, agent: Any) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: Any) -> spaces.Space:
        return self._act_space

    def _ob(self, agent: str, action: int) -> np.ndarray:
        i = self.possible_agents.index(agent)
        return np.array([self.t, i, action, self.first_seed, self.rng.random()], dtype=np.float32)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
            self.first_seed = seed
        self.t = 0
        self.agents = list(self.possible_agents)
        return {a: self._ob(a, -1) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        self.t += 1
        obs = {a: self._ob(a, int(actions[a])) for a in self.agents}
        rewards = {a: float(int(actions[a]) + 1) for a in self.agents}
        terms = {a: self.t >= self.lengths[a] for a in self.agents}
        truncs = {a: False for a in self.agents}
        infos: dict = {a: {} for a in self.agents}
        self.agents = [a for a in self.agents if not terms[a]]
        return obs, rewards, terms, truncs, infos

    def close(self) -> None:
        pass


def rollout(envs: Any, steps: int, seed: int, rng_seed: int = 0) -> dict[str, np.ndarray]:
    """``steps`` synchronous steps of ``envs`` after ``reset(seed)``, with random actions
    from ``rng_seed`` (``envs.single_action_space`` is Discrete): the observations (the
    reset's first), rewards, terminals and truncations, copied and stacked under ``obs``,
    ``rew``, ``term`` and ``trunc``. Equal for two runs means the same trajectory."""
    rng = np.random.default_rng(rng_seed)
    obs, _ = envs.reset(seed=seed)
    out: dict[str, list] = {"obs": [obs.copy()], "rew": [], "term": [], "trunc": []}
    n = envs.single_action_space.n
    for _ in range(steps):
        obs, rewards, terminals, truncations, _ = envs.step(rng.integers(0, n, envs.num_envs))
        out["obs"].append(obs.copy())
        out["rew"].append(rewards.copy())
        out["term"].append(terminals.copy())
        out["trunc"].append(truncations.copy())
    return {key: np.array(value) for key, value in out.items()}
