"""The memory probe: a cue, blank steps, then a reward for the action that matches the cue.

A feed-forward policy cannot pass it (the cue is gone when the query comes), a recurrent
one that carries its state through the episode, and zeroes it where episodes and agents
start afresh, reaches V = 1. ``classic/probe_memory`` (Gymnasium) and
``classic/probe_memory_2agents`` (PettingZoo Parallel API by duck typing, so no pettingzoo
install is needed); pure numpy, deterministic given the seed.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from puffer_core.errors import APIUsageError
from puffer_core.plugins.builtin.parallel_probe import ParallelProbe

__all__ = ["MemoryProbeEnv", "MemoryProbeTwoAgentEnv", "memory_space"]


def memory_space() -> spaces.Box:
    """The memory probe's observation: ``[cue, query]``."""
    return spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)


class _MemoryRun:
    """One agent's memory-probe episode: the cue's step, ``blank_steps`` blank steps, the query step."""

    def __init__(self, cue: float, blank_steps: int):
        self.cue, self.length, self.t = cue, blank_steps + 2, 0

    @property
    def observation(self) -> np.ndarray:
        t = min(self.t, self.length - 1)  # the observation an episode ends on repeats the query
        return np.array([self.cue if t == 0 else 0.0, 1.0 if t == self.length - 1 else 0.0], dtype=np.float32)

    def act(self, action: Any) -> tuple[float, bool]:
        """The reward for ``action`` at the current step, and whether that step was the query (the last)."""
        if self.t >= self.length:
            raise APIUsageError("probe_memory: the episode is over; call reset() first")
        if int(action) not in (0, 1):
            raise APIUsageError(f"probe_memory: action {int(action)} is not in Discrete(2)")
        self.t += 1
        if self.t < self.length:
            return 0.0, False
        return (1.0 if int(action) == int(self.cue > 0) else -1.0), True


def _blank_steps(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= 10_000:
        raise APIUsageError(f"probe_memory: blank_steps must be an int in [0, 10000], got {value!r}")
    return int(value)


class MemoryProbeEnv(gymnasium.Env):
    """The memory probe: the first observation shows a cue, +1 or -1 (random per episode), then
    ``blank_steps`` observations show nothing, then the query: action 1 for cue +1, action 0 for
    cue -1 earns +1, the other action -1, and the episode ends; every other step earns 0.

    The observation ``[cue, query]`` shows the cue only on the first step and the query flag only
    on the last, so a policy without memory is at chance (mean return 0); with memory, V = 1.
    """

    metadata = {"render_modes": []}

    def __init__(self, blank_steps: int = 4):
        self.blank_steps = _blank_steps(blank_steps)
        self.observation_space = memory_space()
        self.action_space = spaces.Discrete(2)
        self._run = _MemoryRun(0.0, self.blank_steps)
        self._run.t = self._run.length  # stepping before reset() says to reset

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._run = _MemoryRun(float(2 * self.np_random.integers(2) - 1), self.blank_steps)
        return self._run.observation, {}

    def step(self, action):
        reward, last = self._run.act(action)
        return self._run.observation, reward, last, False, {}


class MemoryProbeTwoAgentEnv(ParallelProbe):
    """The memory probe for two agents, each with its own cue (PettingZoo Parallel API by duck
    typing). ``agent_1`` sees one blank step fewer, so it leaves a step before ``agent_0`` and its
    row is masked (zeroed) for that step: a recurrent learner must zero the state of masked rows.
    """

    metadata = {"render_modes": [], "name": "probe_memory_2agents", "is_parallelizable": True}

    def __init__(self, blank_steps: int = 4):
        self.blank_steps = _blank_steps(blank_steps)
        super().__init__(["agent_0", "agent_1"], memory_space(), spaces.Discrete(2))
        self._rng = np.random.default_rng()
        self._runs: dict[str, _MemoryRun] = {}

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        blanks = {"agent_0": self.blank_steps, "agent_1": max(self.blank_steps - 1, 0)}
        self._runs = {agent: _MemoryRun(float(2 * self._rng.integers(2) - 1), n) for agent, n in blanks.items()}
        self.agents = list(self.possible_agents)
        return {agent: run.observation for agent, run in self._runs.items()}, {agent: {} for agent in self.agents}

    def step(self, actions: dict[str, Any]):
        rewards, terminations = {}, {}
        for agent in self.agents:
            rewards[agent], terminations[agent] = self._runs[agent].act(actions[agent])
        observations = {agent: self._runs[agent].observation for agent in rewards}
        self.agents = [agent for agent in self.agents if not terminations[agent]]
        return observations, rewards, terminations, dict.fromkeys(rewards, False), {agent: {} for agent in rewards}

    def render(self) -> None:
        return None

    def close(self) -> None:
        return None
