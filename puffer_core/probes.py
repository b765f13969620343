"""Tiny pure-numpy probe environments with awkward spaces, for tests and demos.

Each is deterministic given its seed and cheap enough to step a million times. The
reward is learnable from the observation, so they double as sanity checks for trainers.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

__all__ = ["ProbeDictEnv", "ProbeMixedActionEnv", "ProbeMultiAgentEnv"]


class ProbeDictEnv(gymnasium.Env):
    """Nested Dict/Tuple observation and Dict action; reward 1 when ``move`` hits the target."""

    metadata = {"render_modes": []}

    def __init__(self, episode_length: int = 32):
        self.episode_length = int(episode_length)
        self.observation_space = spaces.Dict(
            {
                "position": spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32),
                "inventory": spaces.Tuple(
                    (spaces.Discrete(5, start=1), spaces.MultiDiscrete([3, 4]), spaces.MultiBinary(3))
                ),
                "status": spaces.Dict(
                    {
                        "tick": spaces.Box(0, np.iinfo(np.int32).max, shape=(), dtype=np.int32),
                        "target": spaces.Discrete(4),
                    }
                ),
            }
        )
        self.action_space = spaces.Dict({"move": spaces.Discrete(4), "use": spaces.MultiDiscrete([2, 3])})
        self._tick = 0
        self._target = 0

    def _obs(self) -> dict[str, Any]:
        rng = self.np_random
        return {
            "position": rng.uniform(-1, 1, size=2).astype(np.float32),
            "inventory": (
                int(rng.integers(1, 6)),
                rng.integers(0, [3, 4]).astype(np.int64),
                rng.integers(0, 2, size=3).astype(np.int8),
            ),
            "status": {"tick": np.int32(self._tick), "target": self._target},
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._tick = 0
        self._target = int(self.np_random.integers(4))
        return self._obs(), {}

    def step(self, action):
        reward = 1.0 if int(action["move"]) == self._target else 0.0
        self._tick += 1
        self._target = int(self.np_random.integers(4))
        truncated = self._tick >= self.episode_length
        return self._obs(), reward, False, truncated, {}


class ProbeMixedActionEnv(gymnasium.Env):
    """Mixed discrete + continuous action (what PufferLib refuses); reward = -distance."""

    metadata = {"render_modes": []}

    def __init__(self, episode_length: int = 16):
        self.episode_length = int(episode_length)
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
        self.action_space = spaces.Tuple((spaces.Discrete(3), spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)))
        self._goal = np.zeros(3, dtype=np.float32)
        self._tick = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._tick = 0
        self._goal = self.np_random.uniform(-1, 1, size=3).astype(np.float32)
        return self._goal.copy(), {}

    def step(self, action):
        choice, vector = action
        guess = np.array([choice - 1, *np.asarray(vector, dtype=np.float32)], dtype=np.float32)
        reward = -float(np.abs(guess - self._goal).sum())
        self._tick += 1
        terminated = reward > -0.1
        self._goal = self.np_random.uniform(-1, 1, size=3).astype(np.float32)
        return self._goal.copy(), reward, terminated, self._tick >= self.episode_length, {}


class ProbeMultiAgentEnv:
    """A PettingZoo Parallel-API env where agent ``k`` leaves ``k`` steps before the end.

    Written against the Parallel API by duck typing, so the core needs no pettingzoo
    install to test multi-agent slots and masks. Reward: 1 when an agent echoes its bit.
    """

    metadata = {"render_modes": [], "name": "probe_multiagent", "is_parallelizable": True}
    render_mode = None

    def __init__(self, num_agents: int = 3, episode_length: int = 12):
        if num_agents < 1 or episode_length <= num_agents:
            raise ValueError("need num_agents >= 1 and episode_length > num_agents")
        self.possible_agents = [f"agent_{i}" for i in range(num_agents)]
        self.agents: list[str] = []
        self.episode_length = int(episode_length)
        self._obs_space = spaces.Dict(
            {"bit": spaces.Discrete(2), "clock": spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)}
        )
        self._act_space = spaces.Discrete(2)
        self._rng = np.random.default_rng()
        self._bits: dict[str, int] = {}
        self._tick = 0

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_space

    def _observe(self) -> dict[str, Any]:
        self._bits = {agent: int(self._rng.integers(2)) for agent in self.agents}
        clock = np.array([self._tick / self.episode_length], dtype=np.float32)
        return {agent: {"bit": bit, "clock": clock.copy()} for agent, bit in self._bits.items()}

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self._tick = 0
        return self._observe(), {agent: {} for agent in self.agents}

    def step(self, actions: dict[str, Any]):
        self._tick += 1
        rewards = {a: float(int(actions.get(a, -1)) == self._bits[a]) for a in self.agents}
        remaining = self.episode_length - self._tick
        terminations = {a: int(a.rsplit("_", 1)[1]) >= remaining for a in self.agents}
        truncations = {a: False for a in self.agents}
        infos: dict[str, dict] = {a: {} for a in self.agents}
        obs = self._observe()
        self.agents = [a for a in self.agents if not terminations[a]]
        return obs, rewards, terminations, truncations, infos

    def render(self) -> None:
        return None

    def close(self) -> None:
        return None
