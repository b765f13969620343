"""The Ray backend on a real local Ray instance (2 CPUs, no dashboard)."""

from __future__ import annotations

import builtins
import functools
import sys
import time

import gymnasium
import numpy as np
import pytest

from puffer_core import vector
from puffer_core.errors import MissingDependencyError, WorkerError
from puffer_core.testing import FaultEnv, TinyParallelEnv, rollout


def cartpole():
    return gymnasium.make("CartPole-v1")


@pytest.mark.ray
def test_ray_matches_serial_and_multiprocessing(local_ray):
    with vector.make(cartpole, num_envs=5, backend="serial") as env:
        want = rollout(env, 200, seed=4)
    with vector.make(cartpole, num_envs=5, num_workers=2, backend="ray") as env:  # uneven: 3, 2
        got = rollout(env, 200, seed=4)
    with vector.make(cartpole, num_envs=5, num_workers=2, backend="multiprocessing") as env:
        mp = rollout(env, 200, seed=4)
    for key in want:
        np.testing.assert_array_equal(want[key], got[key], err_msg=key)
        np.testing.assert_array_equal(want[key], mp[key], err_msg=key)


@pytest.mark.ray
def test_ray_async_batches_multiagent_and_infos(local_ray):
    with vector.make(TinyParallelEnv, num_envs=4, num_workers=2, batch_size=2, backend="ray") as env:
        assert env.num_envs == 12 and env.batch_size == 6
        env.async_reset(20)
        seen = set()
        agents = []
        deadline = time.monotonic() + 20
        while len(seen) < 12 or not {0, 9} <= {row for row, agent in agents if agent == "agent_0"}:
            assert time.monotonic() < deadline, (seen, agents)
            obs, rew, term, trunc, infos, ids, masks = env.recv()
            assert len(ids) == 6
            np.testing.assert_array_equal(obs[masks, 3], 20 + ids[masks] // 3)  # row ↔ env (seed + env index)
            seen.update(ids.tolist())
            agents += [(i["env_id"], i["agent"]) for i in infos]
            env.send(np.ones(6, int))
    assert seen == set(range(12))
    assert (0, "agent_0") in agents and (9, "agent_0") in agents


@pytest.mark.ray
def test_ray_env_raising(local_ray):
    creator = functools.partial(FaultEnv, mode="raise", where="step", at=2, fault_seed=1)
    env = vector.make(creator, num_envs=2, num_workers=1, backend="ray")
    env.reset(seed=0)
    with pytest.raises(WorkerError) as info:
        for _ in range(5):
            env.step(np.zeros(2, int))
    assert info.value.worker == 0 and info.value.env_index == 1
    assert "deliberate failure" in info.value.cause
    env.close()
    env.close()


@pytest.mark.ray
def test_ray_hang_past_timeout(local_ray):
    creator = functools.partial(FaultEnv, mode="hang", where="step", at=2, fault_seed=1, hang_seconds=30)
    env = vector.make(creator, num_envs=2, num_workers=1, backend="ray", vector_kwargs={"timeout": 1.0})
    env.reset(seed=0)
    start = time.monotonic()
    with pytest.raises(WorkerError) as info:
        for _ in range(5):
            env.step(np.zeros(2, int))
    assert time.monotonic() - start < 6
    assert info.value.worker == 0 and info.value.env_index == 1 and info.value.cause == "timeout"


@pytest.mark.ray
def test_ray_actor_death(local_ray):
    creator = functools.partial(FaultEnv, mode="exit", where="step", at=2, fault_seed=1)
    env = vector.make(creator, num_envs=2, num_workers=1, backend="ray")
    env.reset(seed=0)
    with pytest.raises(WorkerError) as info:
        for _ in range(5):
            env.step(np.zeros(2, int))
    assert info.value.worker == 0 and "died" in str(info.value)


def test_missing_ray_is_explained(monkeypatch):
    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "ray", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(MissingDependencyError, match=r"pip install 'puffer-core\[ray\]'"):
        vector.make(cartpole, num_envs=2, backend="ray")
