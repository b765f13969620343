"""The gym 0.26 adapter on the real gym 0.26.2 package (`nox -s tests_gym026`, numpy<2)."""

from __future__ import annotations

import numpy as np
import pytest

gym = pytest.importorskip("gym", minversion="0.26", reason="run with `nox -s tests_gym026` (gym 0.26.2, numpy<2)")

import gymnasium  # noqa: E402

from puffer_core.plugins import load_plugins  # noqa: E402
from puffer_core.specs.declarations import EnvSpec  # noqa: E402

pytestmark = pytest.mark.gym026


def test_gym026_env_adapted_through_shimmy():
    plugins = load_plugins(entry_points=[], environ={})
    raw = gym.make("CartPole-v1")
    env = plugins.adapt(raw, EnvSpec("gym/cartpole", lambda: raw, api="gym"))
    assert isinstance(env, gymnasium.Env)
    assert isinstance(env.observation_space, gymnasium.spaces.Box)
    obs, info = env.reset(seed=42)
    again, _ = env.reset(seed=42)
    np.testing.assert_array_equal(obs, again)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert obs.shape == (4,) and reward == 1.0 and not truncated


def test_gym026_env_through_make_and_emulation(monkeypatch):
    import puffer_core
    from puffer_core import hookimpl
    from puffer_core.plugins import manager

    class GymPlugin:
        @hookimpl
        def puffer_envs(self):
            return [EnvSpec("gymtest/cartpole", lambda: gym.make("CartPole-v1"), api="gym")]

    loaded = load_plugins(entry_points=[], environ={})
    loaded.pm.register(GymPlugin(), name="gymtest")
    for spec in GymPlugin().puffer_envs():
        loaded.env_specs[spec.id] = spec
        loaded.env_owner[spec.id] = "gymtest"
    monkeypatch.setattr(manager, "_cached", loaded)
    env = puffer_core.make("gymtest/cartpole")
    obs, _ = env.reset(seed=1)
    assert obs.shape == (4,)
    total = 0.0
    for _ in range(600):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        total += reward
        if terminated or truncated:
            break
    assert terminated or truncated
    assert info["episode_return"] == total
