"""Autoreset modes on every backend, against Gymnasium's own SyncVectorEnv.

Same seeds and the same actions must give the same trajectories as
``gymnasium.vector.SyncVectorEnv(..., autoreset_mode=...)`` over the raw envs: the
observations (flattened), rewards, terminations, truncations and, in same-step mode, the
final observations.
"""

from __future__ import annotations

import functools

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import concatenate, create_empty_array

import puffer_core
from puffer_core import vector
from puffer_core.env.environments import make_raw
from puffer_core.errors import APIUsageError
from puffer_core.testing import CountingEnv, TinyParallelEnv

MODES = ["next_step", "same_step", "disabled"]
BACKENDS = ["serial", "multiprocessing", pytest.param("ray", marks=pytest.mark.ray)]
STEPS = 40


def counting():
    return CountingEnv(episode_length=3)


# (what vector.make takes, a raw-env creator for SyncVectorEnv, an emulator for flattening)
CASES = {
    "counting": (counting, counting, lambda: puffer_core.emulation.emulate(counting())),
    "cartpole": (
        "classic/cartpole",
        lambda: make_raw("classic/cartpole"),
        lambda: puffer_core.make("classic/cartpole"),
    ),
    "probe_dict": (
        "classic/probe_dict",
        lambda: make_raw("classic/probe_dict", episode_length=4),
        lambda: puffer_core.make("classic/probe_dict"),
    ),
}


def unbatch(tree, i: int):
    """Env ``i``'s part of a batched (nested) observation."""
    if isinstance(tree, dict):
        return {key: unbatch(value, i) for key, value in tree.items()}
    if isinstance(tree, tuple):
        return tuple(unbatch(value, i) for value in tree)
    return tree[i]


def reference_run(raw_creator, emulator, num_envs: int, mode: str, seed: int, flat_actions: list) -> dict:
    """Gymnasium's SyncVectorEnv on the raw envs, observations flattened by ``emulator``."""
    envs = SyncVectorEnv([raw_creator] * num_envs, autoreset_mode=AutoresetMode[mode.upper()])
    flat = emulator.flatten_observation

    def rows(obs):
        return np.stack([flat(unbatch(obs, i)) for i in range(num_envs)])

    obs, _ = envs.reset(seed=seed)
    out = {"obs": [rows(obs)], "rew": [], "term": [], "trunc": [], "final": []}
    for actions in flat_actions:
        raw = [emulator.unflatten_action(a) for a in actions]
        batched = concatenate(envs.single_action_space, raw, create_empty_array(envs.single_action_space, num_envs))
        obs, rew, term, trunc, infos = envs.step(batched)
        out["obs"].append(rows(obs))
        out["rew"].append(rew.astype(np.float32))
        out["term"].append(term)
        out["trunc"].append(trunc)
        finals = {}
        if "final_obs" in infos:
            finals = {i: flat(ob) for i, ob in enumerate(infos["final_obs"]) if infos["_final_obs"][i]}
        out["final"].append(finals)
        if mode == "disabled" and (term | trunc).any():
            obs, _ = envs.reset(options={"reset_mask": term | trunc})
            out["obs"][-1] = rows(obs)
    envs.close()
    return out


def puffer_run(envs, mode: str, seed: int, flat_actions: list) -> dict:
    obs, _ = envs.reset(seed=seed)
    out = {"obs": [obs.copy()], "rew": [], "term": [], "trunc": [], "final": []}
    for actions in flat_actions:
        obs, rew, term, trunc, infos = envs.step(actions)
        out["obs"].append(obs.copy())
        out["rew"].append(rew.copy())
        out["term"].append(term.copy())
        out["trunc"].append(trunc.copy())
        out["final"].append({i["env_id"]: i["final_observation"] for i in infos if "final_observation" in i})
        if mode == "disabled" and (term | trunc).any():
            obs, _ = envs.reset(options={"reset_mask": term | trunc})
            out["obs"][-1] = obs.copy()
    return out


def random_flat_actions(space: gymnasium.Space, num_envs: int, steps: int) -> list:
    space = gymnasium.vector.utils.batch_space(space, num_envs)
    space.seed(5)
    return [space.sample() for _ in range(steps)]


def assert_same_trajectory(want: dict, got: dict) -> None:
    for key in ("obs", "rew", "term", "trunc"):
        np.testing.assert_array_equal(np.array(want[key]), np.array(got[key]), err_msg=key)
    for t, (a, b) in enumerate(zip(want["final"], got["final"])):
        assert sorted(a) == sorted(b), f"step {t}: final observations for envs {sorted(a)} vs {sorted(b)}"
        for i in a:
            np.testing.assert_array_equal(a[i], b[i], err_msg=f"step {t} env {i} final observation")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_trajectories_equal_gymnasium_sync_vector_env(request, case, mode, backend):
    if backend == "ray":
        request.getfixturevalue("local_ray")
    env, raw_creator, make_emulator = CASES[case]
    kwargs = {"episode_length": 4} if case == "probe_dict" else {}
    emulator = make_emulator()
    workers = None if backend == "serial" else 2
    with vector.make(env, num_envs=3, num_workers=workers, backend=backend, autoreset=mode, **kwargs) as envs:
        assert envs.autoreset_mode == mode
        actions = random_flat_actions(envs.single_action_space, 3, STEPS)
        got = puffer_run(envs, mode, 11, actions)
    want = reference_run(raw_creator, emulator, 3, mode, 11, actions)
    assert sum(t.any() for t in want["term"]) + sum(t.any() for t in want["trunc"]) >= 3, "episodes must end"
    assert_same_trajectory(want, got)


@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_same_step_row_holds_reset_observation_and_final_step_flags(backend):
    with vector.make(
        counting, num_envs=2, num_workers=None if backend == "serial" else 2, backend=backend, autoreset="same_step"
    ) as envs:
        envs.reset(seed=10)
        for _ in range(2):
            envs.step(np.array([1, 2]))
        obs, rew, term, trunc, infos = envs.step(np.array([1, 2]))
        assert term.all() and not trunc.any()
        np.testing.assert_array_equal(rew, [2.0, 3.0])  # the final step's rewards
        np.testing.assert_array_equal(obs[:, 0], [0, 0])  # t: already the reset observation
        by_env = {i["env_id"]: i for i in infos}
        assert sorted(by_env) == [0, 1]
        np.testing.assert_array_equal(by_env[0]["final_observation"][:3], [3, 1, 3])  # t, last action, sum
        assert by_env[1]["final_info"]["episode_return"] == 9.0
        assert by_env[1]["final_info"]["episode_length"] == 3
        obs, rew, term, trunc, infos = envs.step(np.array([2, 2]))  # no ignored action, unlike next_step
        np.testing.assert_array_equal(obs[:, 1], [2, 2])
        assert infos == []


@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_same_step_multi_agent_rows_get_their_final_observations(backend):
    with vector.make(
        TinyParallelEnv,
        num_envs=2,
        num_workers=None if backend == "serial" else 2,
        backend=backend,
        autoreset="same_step",
    ) as envs:
        obs, _ = envs.reset(seed=0)
        for _ in range(5):
            obs, rew, term, trunc, infos = envs.step(np.ones(6, int))
            assert infos == [] or all("final_observation" not in i for i in infos)
        obs, rew, term, trunc, infos = envs.step(np.ones(6, int))  # agent 2 leaves at t=6: episode over
        assert (term | trunc).all()
        finals = {i["env_id"]: i for i in infos if "final_observation" in i}
        assert sorted(finals) == list(range(6))  # every agent row of both envs
        assert finals[2]["agent"] == "agent_2"
        np.testing.assert_array_equal(finals[2]["final_observation"][:3], [6, 2, 1])
        np.testing.assert_array_equal(finals[0]["final_observation"], np.zeros(5))  # left at t=2: blank row
        assert finals[2]["final_info"]["episode_length"] == 6
        np.testing.assert_array_equal(obs[:, 0], np.zeros(6))  # reset observations: t = 0
        assert envs.step(np.ones(6, int))[1].tolist() == [2.0] * 6  # and they step on at once


@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_disabled_refuses_to_step_an_ended_env_and_stays_usable(backend):
    with vector.make(
        counting, num_envs=3, num_workers=None if backend == "serial" else 3, backend=backend, autoreset="disabled"
    ) as envs:
        envs.reset(seed=0)
        for _ in range(3):
            obs, rew, term, trunc, _ = envs.step(np.zeros(3, int))
        assert term.all()
        with pytest.raises(APIUsageError, match=r"env\(s\) 0, 1 and 2 ended.*reset_mask"):
            envs.step(np.zeros(3, int))
        obs, infos = envs.reset(options={"reset_mask": np.array([True, False, True])})
        np.testing.assert_array_equal(obs[:, 0], [0, 3, 0])  # env 1 keeps its last observation
        with pytest.raises(APIUsageError, match=r"env\(s\) 1 ended"):
            envs.step(np.zeros(3, int))
        obs, _ = envs.reset(options={"reset_mask": np.array([False, True, False])})
        obs, *_ = envs.step(np.zeros(3, int))
        np.testing.assert_array_equal(obs[:, 0], [1, 1, 1])


def test_masked_reset_seeds_only_the_masked_envs_like_gymnasium():
    with vector.make(counting, num_envs=3, autoreset="disabled") as envs:
        envs.reset(seed=0)
        obs, _ = envs.reset(seed=[None, 40, 50], options={"reset_mask": np.array([False, True, True])})
        np.testing.assert_array_equal(obs[:, 3], [0, 40, 50])  # first_seed column
        obs, _ = envs.reset(seed=100)
        np.testing.assert_array_equal(obs[:, 3], [100, 101, 102])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"reset_mask": np.array([True, False])}, r"must be a bool array of shape \(3,\), got dtype bool shape \(2,\)"),
        ({"reset_mask": np.array([1, 0, 1])}, r"must be a bool array of shape \(3,\), got dtype int64"),
        ({"reset_mask": np.zeros(3, bool)}, r"selects no env"),
        ("not a dict", r"options must be a dict"),
    ],
)
def test_bad_reset_options_are_one_line_errors(options, message):
    with vector.make(counting, num_envs=3, autoreset="disabled") as envs:
        envs.reset(seed=0)
        with pytest.raises(APIUsageError, match=message) as info:
            envs.reset(options=options)
        assert "\n" not in str(info.value)
        envs.step(np.zeros(3, int))  # still usable


@pytest.mark.parametrize(
    ("seed", "message"),
    [
        ([1, 2], r"one seed \(or None\) per env: 3, got 2"),
        ([1, -2, 3], r"seed\[1\] must be None or an int"),
        ("7", r"seed must be None, an int or a list"),
    ],
)
def test_bad_seeds_name_the_problem(seed, message):
    with vector.make(counting, num_envs=3) as envs, pytest.raises(APIUsageError, match=message):
        envs.reset(seed=seed)


def test_reset_options_reach_every_env_on_every_backend():
    for backend in ("serial", "multiprocessing"):
        with vector.make(LevelEnv, num_envs=2, num_workers=None if backend == "serial" else 2, backend=backend) as envs:
            obs, _ = envs.reset(seed=0, options={"level": 3})
            np.testing.assert_array_equal(obs[:, 3], [3000, 3000], err_msg=backend)
            obs, _ = envs.reset(seed=0)
            np.testing.assert_array_equal(obs[:, 3], [0, 1], err_msg=backend)


class LevelEnv(CountingEnv):
    """Shows ``options["level"]`` in the first-seed column of its observation."""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed, options=options)
        if options:
            self.first_seed = 1000 * options["level"]
        return self._obs(), {}


def test_mode_is_checked_and_disabled_needs_full_batches():
    with pytest.raises(APIUsageError, match="autoreset must be one of 'next_step', 'same_step', 'disabled'"):
        vector.make(counting, num_envs=2, autoreset="sometimes")
    with pytest.raises(APIUsageError, match="autoreset='disabled' needs batch_size == num_envs"):
        vector.make(counting, num_envs=4, num_workers=2, batch_size=2, backend="multiprocessing", autoreset="disabled")
    with vector.make(counting, num_envs=2, autoreset=AutoresetMode.SAME_STEP) as envs:
        assert envs.autoreset_mode == "same_step"


def test_same_step_with_async_batches_keeps_every_final_observation():
    creator = functools.partial(CountingEnv, episode_length=2)
    with vector.make(
        creator, num_envs=4, num_workers=2, batch_size=2, backend="multiprocessing", autoreset="same_step"
    ) as envs:
        envs.async_reset(0)
        finals = 0
        for _ in range(40):
            obs, rew, term, trunc, infos, ids, _ = envs.recv()
            ended = set(ids[term].tolist())
            assert {i["env_id"] for i in infos if "final_observation" in i} == ended
            finals += len(ended)
            assert (obs[:, 0] <= 1).all()  # t never reaches 2 in a returned row: reset within the step
            envs.send(np.ones(2, int))
        assert finals >= 15
