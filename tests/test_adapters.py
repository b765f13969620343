"""Compatibility adapters, exercised through the plugin hook as `make` uses them."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from puffer_core.adapters import LegacyGymEnv, LegacyParallelEnv, to_gymnasium_space
from puffer_core.errors import SpaceError
from puffer_core.plugins import load_plugins
from puffer_core.specs.declarations import EnvSpec

SPEC = EnvSpec("test/env", lambda: None)


def adapt(env):
    return load_plugins(entry_points=[], environ={}).adapt(env, SPEC)


class OldStyleEnv:
    """An env written against gym 0.21: 4-tuple step, seed(), reset() returning obs only."""

    def __init__(self, limit=5):
        self.observation_space = spaces.Box(0, 10, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.limit = limit
        self.seeded_with = None
        self.t = 0

    def seed(self, seed=None):
        self.seeded_with = seed
        return [seed]

    def reset(self):
        self.t = 0
        return np.zeros(1, dtype=np.float32)

    def step(self, action):
        self.t += 1
        done = self.t >= self.limit
        info = {"TimeLimit.truncated": True} if done and action == 1 else {}
        return np.full(1, self.t, dtype=np.float32), 1.0, done, info


def test_old_gym_style_env_becomes_gymnasium():
    raw = OldStyleEnv()
    env = adapt(raw)
    assert isinstance(env, LegacyGymEnv) and isinstance(env, gymnasium.Env)
    obs, info = env.reset(seed=7)
    assert raw.seeded_with == 7 and info == {} and obs.shape == (1,)
    for _ in range(4):
        obs, reward, terminated, truncated, info = env.step(0)
        assert not (terminated or truncated)
    *_, terminated, truncated, _ = env.step(0)
    assert terminated and not truncated  # done without the TimeLimit mark is termination


def test_old_gym_truncation_mark_becomes_truncated():
    env = adapt(OldStyleEnv(limit=1))
    env.reset()
    _, _, terminated, truncated, _ = env.step(1)
    assert truncated and not terminated


def test_gymnasium_envs_are_left_alone():
    env = gymnasium.make("CartPole-v1")
    assert adapt(env) is None


class FakeGymBox:
    """Stands for a gym.spaces.Box from another package: converted by duck type."""

    def __init__(self):
        self.low = np.zeros(2)
        self.high = np.ones(2)
        self.dtype = np.float64


FakeGymBox.__name__ = "Box"


def test_space_conversion_by_duck_type_and_error_path():
    box = to_gymnasium_space(FakeGymBox())
    assert isinstance(box, spaces.Box) and box.shape == (2,) and box.dtype == np.float64

    class Graph:
        pass

    with pytest.raises(SpaceError, match=r"space\['a'\]: cannot convert"):
        to_gymnasium_space(type("Dict", (), {"spaces": {"a": Graph()}})())


class OldParallelEnv:
    """A pre-1.22 PettingZoo Parallel env: 4-tuple step with dones, reset without infos."""

    metadata = {"name": "old_parallel"}

    def __init__(self):
        self.possible_agents = ["a", "b"]
        self.agents = []
        self.observation_spaces = {a: FakeGymBox() for a in self.possible_agents}
        self.action_spaces = {a: type("Discrete", (), {"n": 3})() for a in self.possible_agents}
        self.t = 0

    def seed(self, seed=None):
        self.seed_value = seed

    def reset(self):
        self.agents = list(self.possible_agents)
        self.t = 0
        return {a: np.zeros(2) for a in self.agents}

    def step(self, actions):
        self.t += 1
        dones = {a: self.t >= 2 for a in self.agents}
        infos = {a: {} for a in self.agents}
        if self.t >= 2:
            infos["b"] = {"TimeLimit.truncated": True}
        obs = {a: np.full(2, self.t, dtype=float) for a in self.agents}
        self.agents = [a for a in self.agents if not dones[a]]
        return obs, {a: 1.0 for a in obs}, dones, infos


def test_old_pettingzoo_parallel_env_is_converted():
    raw = OldParallelEnv()
    env = adapt(raw)
    assert isinstance(env, LegacyParallelEnv)
    assert isinstance(env.observation_space("a"), spaces.Box)
    assert env.action_space("b") == spaces.Discrete(3)
    obs, infos = env.reset(seed=3)
    assert raw.seed_value == 3 and set(obs) == {"a", "b"} and infos == {"a": {}, "b": {}}
    env.step({"a": 0, "b": 0})
    obs, rewards, terminations, truncations, infos = env.step({"a": 0, "b": 0})
    assert terminations == {"a": True, "b": False} and truncations == {"a": False, "b": True}
    assert env.agents == []


def test_aec_envs_become_parallel():
    from pettingzoo.butterfly import pistonball_v6
    from pettingzoo.classic import connect_four_v3

    turn_based = adapt(connect_four_v3.env())
    obs, _ = turn_based.reset(seed=0)
    assert set(obs) == {"player_0", "player_1"}
    simultaneous = adapt(pistonball_v6.env(n_pistons=3))
    assert simultaneous.possible_agents == ["piston_0", "piston_1", "piston_2"]
    assert adapt(pistonball_v6.parallel_env(n_pistons=3)) is None  # modern parallel: nothing to do


class SeedlessParallelEnv(OldParallelEnv):
    """PettingZoo 1.22 style: reset(seed=) returns observations only; seed() raises."""

    def seed(self, seed=None):
        raise NotImplementedError("Calling seed externally is deprecated; call reset(seed=seed) instead")

    def reset(self, seed=None):
        self.reset_seed = seed
        return super().reset()


def test_pettingzoo_122_style_reset_gets_the_seed_and_infos():
    raw = SeedlessParallelEnv()
    env = adapt(raw)
    obs, infos = env.reset(seed=5)
    assert raw.reset_seed == 5 and set(obs) == {"a", "b"} and infos == {"a": {}, "b": {}}
