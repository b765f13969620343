"""The main job behind `puffer run`: an env vectorized, random actions, SPS and episode stats."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

import numpy as np
from gymnasium import spaces

from puffer_core import vector

__all__ = ["RunResult", "masked_random_actions", "random_actions", "run_random"]

#: Numeric info keys that say where an info came from rather than how an episode went.
NOT_STATISTICS = frozenset({"env_id", "agent", "agent_id", "worker"})


def random_actions(space: spaces.Space, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` uniformly random flat actions for a Discrete, MultiDiscrete or Box space."""
    if isinstance(space, spaces.Discrete):
        return rng.integers(0, space.n, size=count) + space.start
    if isinstance(space, spaces.MultiDiscrete):
        return rng.integers(0, space.nvec, size=(count, *space.nvec.shape)) + space.start
    if isinstance(space, spaces.MultiBinary):
        return rng.integers(0, 2, size=(count, *space.shape), dtype=np.int8)
    if isinstance(space, spaces.Box):
        low = np.where(np.isfinite(space.low), space.low, -1.0)
        high = np.where(np.isfinite(space.high), space.high, 1.0)
        if np.issubdtype(space.dtype, np.integer):
            return rng.integers(low, high + 1, size=(count, *space.shape)).astype(space.dtype)
        return rng.uniform(low, high, size=(count, *space.shape)).astype(space.dtype)
    raise TypeError(f"cannot sample random actions from {space!r}; emulated envs use Discrete/MultiDiscrete/Box")


def masked_random_actions(envs: Any) -> Callable[[np.ndarray, np.random.Generator], np.ndarray] | None:
    """For a Discrete action space whose observations carry an ``action_mask`` of its size
    (PettingZoo's board games: an illegal move ends the game at once), a sampler of random
    actions among the allowed ones, one per observation row; None for any other env."""
    space = envs.single_action_space
    if not isinstance(space, spaces.Discrete):
        return None
    probe = envs.unflatten_observation(
        np.zeros((1, *envs.single_observation_space.shape), envs.single_observation_space.dtype)
    )
    mask = probe.get("action_mask") if isinstance(probe, dict) else None
    if mask is None or mask.shape != (1, space.n):
        return None

    def sample(observations: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        allowed = envs.unflatten_observation(observations)["action_mask"] > 0
        # The allowed action with the highest uniform draw is a uniform pick among them; a row
        # with none allowed (an agent whose turn it is not) gets any action: it is ignored.
        draws = rng.random(allowed.shape)
        draws[~allowed] -= 1.0
        return draws.argmax(axis=1) + space.start

    return sample


@dataclass
class RunResult:
    env_id: str
    backend: str
    num_envs: int
    num_workers: int
    batch_size: int
    steps: int
    seconds: float
    episodes: int = 0
    #: mean of every numeric episode statistic (episode_return, episode_length, score, …)
    episode_means: dict[str, float] = field(default_factory=dict)

    @property
    def sps(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else float("inf")

    def to_json(self) -> dict[str, Any]:
        return {
            "env": self.env_id,
            "backend": self.backend,
            "num_envs": self.num_envs,
            "num_workers": self.num_workers,
            "batch_size": self.batch_size,
            "steps": self.steps,
            "seconds": round(self.seconds, 4),
            "steps_per_second": round(self.sps, 1),
            "episodes": self.episodes,
            "episode_means": {k: round(v, 4) for k, v in self.episode_means.items()},
        }


def _episode_infos(infos: Any) -> Iterable[dict]:
    """Episode-end info dicts from a vector env's infos, whatever nesting they come in."""
    if isinstance(infos, dict):
        if "episode_return" in infos:
            yield infos
            return
        for value in infos.values():
            yield from _episode_infos(value)
    elif isinstance(infos, (list, tuple)):
        for item in infos:
            yield from _episode_infos(item)


def run_random(
    env_id: str,
    steps: int = 10_000,
    num_envs: int = 1,
    seed: int | None = 0,
    backend: str = "serial",
    num_workers: int | None = None,
    batch_size: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    record: Any = None,
    **env_kwargs: Any,
) -> RunResult:
    """Step ``env_id`` with uniformly random actions for at least ``steps`` agent steps;
    ``record`` (a path or ``puffer_core.recording.Recording``) records env 0. Where the
    observations carry an action mask (``masked_random_actions``), the actions are drawn
    among the allowed ones."""
    rng = np.random.default_rng(seed)
    totals: dict[str, float] = defaultdict(float)
    episodes = 0
    done_steps = 0
    with vector.make(
        env_id,
        num_envs=num_envs,
        num_workers=num_workers,
        batch_size=batch_size,
        backend=backend,
        seed=seed,
        vector_kwargs=None if record is None else {"record": record},
        **env_kwargs,
    ) as envs:
        # Pre-draw actions in chunks: sampling per step would dominate cheap envs.
        chunk = random_actions(envs.single_action_space, envs.batch_size * 64, rng)
        sample_allowed = masked_random_actions(envs)
        rows = envs.batch_size
        cursor = 0
        start = time.perf_counter()
        envs.async_reset(seed)
        while done_steps < steps:
            obs, _rew, _term, _trunc, infos, env_ids, masks = envs.recv()
            live = int(np.count_nonzero(masks)) if masks is not None else len(env_ids)
            done_steps += live
            for info in _episode_infos(infos):
                episodes += 1
                for key, value in info.items():
                    if key in NOT_STATISTICS:
                        continue
                    if isinstance(value, (Real, np.number)) and not isinstance(value, bool):
                        totals[key] += float(value)
            if sample_allowed is not None:
                envs.send(sample_allowed(obs, rng))
            else:
                if cursor + rows > len(chunk):
                    chunk = random_actions(envs.single_action_space, rows * 64, rng)
                    cursor = 0
                envs.send(chunk[cursor : cursor + rows])
                cursor += rows
            if on_progress is not None:
                on_progress(live)
        seconds = time.perf_counter() - start
        result = RunResult(
            env_id=env_id,
            backend=backend,
            num_envs=envs.num_envs,
            num_workers=envs.num_workers,
            batch_size=envs.batch_size,
            steps=done_steps,
            seconds=seconds,
        )
    result.episodes = episodes
    result.episode_means = {key: total / episodes for key, total in sorted(totals.items())} if episodes else {}
    return result
