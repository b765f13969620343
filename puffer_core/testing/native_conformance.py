"""The contract of an ``EnvSpec.batch_creator`` (a native batch), checked by ``check_env`` for
every env that declares one: the env's single spaces, next-step autoreset, shapes and dtypes of
a batch step, seeding by ``reset(seed=S)``, and a vector env hosting it on two workers."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from puffer_core import vector
from puffer_core.env.environments import make_batch_from_spec, make_raw
from puffer_core.plugins import PluginSet
from puffer_core.testing.assertions import assert_trees_equal
from puffer_core.vector.native_group import native_spaces_problem

__all__ = ["BATCH_ENVS", "native_contract", "native_determinism", "native_multiprocessing_run"]

#: Envs in the native batch the checks make.
BATCH_ENVS = 3


def _batch(env_id: str, plugins: PluginSet) -> Any:
    return make_batch_from_spec(plugins.get_spec(env_id), BATCH_ENVS)


def native_contract(env_id: str, plugins: PluginSet, steps: int) -> str:
    """The batch steps the env the creator makes alone, in next-step autoreset, with batch-shaped results."""
    env = make_raw(env_id, plugins=plugins)
    try:
        spaces = (env.observation_space, env.action_space)
    finally:
        env.close()
    batch = _batch(env_id, plugins)
    try:
        problem = native_spaces_problem(batch, *spaces)
        assert problem is None, f"the native batch does not step the env: {problem}"
        assert batch.num_envs == BATCH_ENVS, f"batch_creator({BATCH_ENVS}) made {batch.num_envs} envs"
        obs, info = batch.reset(seed=0)
        assert isinstance(info, dict), "reset() info must be a dict (of arrays)"
        _assert_batch_of(batch, obs, "reset()")
        ended = np.zeros(BATCH_ENVS, bool)
        resets = 0
        batch.action_space.seed(0)
        for count in range(1, steps + 1):
            obs, rewards, terminals, truncations, info = batch.step(batch.action_space.sample())
            _assert_batch_of(batch, obs, f"step {count}")
            for name, values in (("rewards", rewards), ("terminations", terminals), ("truncations", truncations)):
                assert np.shape(values) == (BATCH_ENVS,), f"step {count}: {name} of shape {np.shape(values)}"
            assert isinstance(info, dict), f"step {count}: info must be a dict (of arrays)"
            # Next-step autoreset: an env that ended steps its reset now, with no reward and no flags.
            if ended.any():
                resets += int(ended.sum())
                assert not np.any(np.asarray(rewards)[ended]), f"step {count}: a reset step paid a reward"
                assert not np.any((np.asarray(terminals) | np.asarray(truncations))[ended]), (
                    f"step {count}: a reset step ended its episode"
                )
            ended = np.asarray(terminals, bool) | np.asarray(truncations, bool)
        return f"{steps} steps of {BATCH_ENVS} envs, {resets} resets next step"
    finally:
        batch.close()


def _assert_batch_of(batch: Any, obs: Any, where: str) -> None:
    """``obs`` is a batch of ``BATCH_ENVS`` observations of the env (the batched space holds it)."""
    assert batch.observation_space.contains(obs), (
        f"{where}: the observations are not {BATCH_ENVS} of the env's (outside the batch's observation_space "
        f"{batch.observation_space})"
    )


def native_determinism(env_id: str, plugins: PluginSet, steps: int) -> str:
    """The same seed and actions give the same observations."""
    runs = []
    for _ in range(2):
        batch = _batch(env_id, plugins)
        try:
            observations = [copy.deepcopy(batch.reset(seed=123)[0])]
            batch.action_space.seed(0)
            for _ in range(steps):
                observations.append(copy.deepcopy(batch.step(batch.action_space.sample())[0]))
        finally:
            batch.close()
        runs.append(observations)
    for i, (a, b) in enumerate(zip(*runs)):
        assert_trees_equal(a, b, f"step {i} observations")
    return f"{len(runs[0])} batches of observations identical"


def native_multiprocessing_run(env_id: str, steps: int) -> str:
    """``vector.make(..., vector_kwargs={"native": True})`` on 2 workers: reset and ``steps`` random steps."""
    with vector.make(
        env_id, num_envs=4, num_workers=2, backend="multiprocessing", seed=0, vector_kwargs={"native": True}
    ) as envs:
        envs.reset(seed=0)
        envs.action_space.seed(0)
        for _ in range(steps):
            envs.step(envs.action_space.sample())
    return f"{steps} steps, one native batch on each of 2 workers"
