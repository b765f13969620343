"""Vector backends: API, determinism across backends, autoreset, async batches, arguments."""

from __future__ import annotations

import functools
import multiprocessing
import os
import time

import gymnasium
import numpy as np
import pytest

from puffer_core import vector
from puffer_core.errors import APIUsageError, WorkerError
from puffer_core.testing import CountingEnv, FaultEnv, TinyParallelEnv, rollout

MP = "multiprocessing"


def cartpole():
    return gymnasium.make("CartPole-v1")


def assert_same(a, b):
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.fixture(scope="module")
def serial_cartpole():
    with vector.make(cartpole, num_envs=6, backend="serial") as env:
        yield rollout(env, 200, seed=7)


@pytest.mark.parametrize("workers", [2, 4])  # 4: uneven split (2, 2, 1, 1)
def test_multiprocessing_matches_serial(serial_cartpole, workers):
    with vector.make(cartpole, num_envs=6, num_workers=workers, backend=MP) as env:
        got = rollout(env, 200, seed=7)
    assert serial_cartpole["term"].sum() >= 6, "the run must include autoresets"
    assert_same(serial_cartpole, got)


def test_seed_matters(serial_cartpole):
    with vector.make(cartpole, num_envs=6, backend="serial") as env:
        other = rollout(env, 5, seed=8)
    assert not np.array_equal(other["obs"][0], serial_cartpole["obs"][0])
    # env i is seeded with seed + i: env 1 under seed 7 starts like env 0 under seed 8.
    np.testing.assert_array_equal(serial_cartpole["obs"][0][1], other["obs"][0][0])


def test_make_seed_is_used_by_first_reset():
    with vector.make(cartpole, num_envs=2, seed=7) as env:
        obs, _ = env.reset()
        first = obs.copy()
    with vector.make(cartpole, num_envs=2) as env:
        obs, _ = env.reset(seed=7)
    np.testing.assert_array_equal(first, obs)


def test_env_id_string_builds_with_puffer_make():
    with vector.make("classic/cartpole", num_envs=4, num_workers=2, backend=MP, seed=1) as mp_env:
        got = rollout(mp_env, 50, seed=1)
    with vector.make("classic/cartpole", num_envs=4, backend="serial") as serial:
        want = rollout(serial, 50, seed=1)
    assert_same(want, got)


@pytest.mark.parametrize("backend", ["serial", MP])
def test_next_step_autoreset(backend):
    creator = functools.partial(CountingEnv, episode_length=3)
    with vector.make(creator, num_envs=2, num_workers=2 if backend == MP else None, backend=backend) as env:
        obs, _ = env.reset(seed=10)
        np.testing.assert_array_equal(obs[:, 0], [0, 0])
        np.testing.assert_array_equal(obs[:, 3], [10, 11])  # env i seeded with seed + i
        for t in (1, 2):
            obs, rew, term, trunc, _ = env.step(np.array([1, 2]))
            assert obs[0, 0] == t and not term.any()
        obs, rew, term, trunc, infos = env.step(np.array([1, 2]))
        assert term.all() and not trunc.any() and obs[0, 0] == 3
        np.testing.assert_array_equal(rew, [2.0, 3.0])
        assert sorted(i["env_id"] for i in infos) == [0, 1]
        assert all(i["episode_length"] == 3 for i in infos)
        np.testing.assert_array_equal(
            [i["episode_return"] for i in sorted(infos, key=lambda i: i["env_id"])], [6.0, 9.0]
        )
        # The step after the end resets: the action is ignored, reward 0, flags False.
        noise_before = obs[:, 4].copy()
        obs, rew, term, trunc, infos = env.step(np.array([2, 2]))
        np.testing.assert_array_equal(obs[:, 0], [0, 0])
        np.testing.assert_array_equal(obs[:, 1], [-1, -1])  # no action reached the env
        np.testing.assert_array_equal(obs[:, 2], [0, 0])
        np.testing.assert_array_equal(obs[:, 3], [10, 11])  # unseeded autoreset: same env, RNG continues
        assert not np.array_equal(obs[:, 4], noise_before)
        np.testing.assert_array_equal(rew, [0.0, 0.0])
        assert not term.any() and not trunc.any()
        assert infos == []
        obs, *_ = env.step(np.array([2, 1]))
        np.testing.assert_array_equal(obs[:, 1], [2, 1])


def test_autoreset_rng_continues_identically_across_backends():
    creator = functools.partial(CountingEnv, episode_length=2)
    runs = []
    for backend, workers in (("serial", None), (MP, 3)):
        with vector.make(creator, num_envs=3, num_workers=workers, backend=backend) as env:
            runs.append(rollout(env, 20, seed=3))
    assert_same(*runs)


def test_async_batches_cover_every_env_and_rows_match_ids(start_method):
    # Workers 0 and 2 are slow, so the fastest workers make non-contiguous batches.
    creator = functools.partial(CountingEnv, episode_length=1000, delay=0.004, delay_seeds=(100, 101, 104, 105))
    kwargs = {"start_method": start_method}
    with vector.make(creator, num_envs=8, num_workers=4, batch_size=4, backend=MP, vector_kwargs=kwargs) as env:
        assert env.num_envs == 8 and env.batch_size == 4 and env.num_workers == 4
        env.async_reset(100)
        seen = []
        steps = np.zeros(8, int)
        noncontiguous = 0
        deadline = time.monotonic() + 10
        while len(set(seen)) < 8 or noncontiguous == 0 or len(seen) < 160:
            assert time.monotonic() < deadline, (sorted(set(seen)), noncontiguous)
            obs, rew, term, trunc, infos, ids, masks = env.recv()
            assert len(ids) == 4 and len(set(ids.tolist())) == 4
            assert obs.shape == (4, 5) and masks.all()
            np.testing.assert_array_equal(obs[:, 3], 100 + ids)  # each row is the env its id names
            np.testing.assert_array_equal(obs[:, 0], steps[ids])
            noncontiguous += int(np.any(np.diff(np.sort(ids)) != 1))
            seen.extend(ids.tolist())
            steps[ids] += 1
            env.send(np.ones(4, int))
    assert set(seen) == set(range(8))
    assert noncontiguous > 0, "fast workers should have been batched together"


def test_serial_batches_round_robin():
    creator = functools.partial(CountingEnv, episode_length=1000)
    with vector.make(creator, num_envs=6, batch_size=2, backend="serial") as env:
        env.async_reset(0)
        order = []
        for _ in range(6):
            obs, _, _, _, _, ids, _ = env.recv()
            np.testing.assert_array_equal(obs[:, 3], ids)
            order.append(ids.tolist())
            env.send(np.zeros(2, int))
    assert order == [[0, 1], [2, 3], [4, 5]] * 2


def test_infos_only_when_non_empty_and_name_their_env():
    with vector.make(cartpole, num_envs=4, num_workers=2, backend=MP) as env:
        env.reset(seed=0)
        ended = 0
        for _ in range(100):
            obs, rew, term, trunc, infos = env.step(np.zeros(4, int))
            ends = set(np.flatnonzero(term | trunc).tolist())
            assert {i["env_id"] for i in infos} == ends
            for info in infos:
                assert info["episode_length"] > 0 and info["episode_return"] == info["episode_length"]
            ended += len(infos)
    assert ended >= 4


def test_every_start_method_matches_serial(start_method):
    creator = functools.partial(CountingEnv, episode_length=4)
    kwargs = {"start_method": start_method}
    with vector.make(creator, num_envs=4, num_workers=2, backend=MP, vector_kwargs=kwargs) as env:
        assert env.start_method == start_method
        got = rollout(env, 12, seed=5)
    with vector.make(creator, num_envs=4, backend="serial") as env:
        want = rollout(env, 12, seed=5)
    assert_same(want, got)


def test_emulated_spaces_box_and_multidiscrete_actions():
    from puffer_core.plugins.builtin.probes import ProbeDictEnv, ProbeMixedActionEnv

    for creator in (ProbeDictEnv, ProbeMixedActionEnv):
        runs = []
        for backend, workers in (("serial", None), (MP, 2)):
            with vector.make(creator, num_envs=4, num_workers=workers, backend=backend) as env:
                space = env.single_action_space
                rng = np.random.default_rng(0)
                env.reset(seed=2)
                obs_log = []
                for _ in range(40):
                    if isinstance(space, gymnasium.spaces.Box):
                        actions = rng.uniform(-1, 1, (4, *space.shape)).astype(space.dtype)
                    else:
                        actions = rng.integers(0, space.nvec, (4, *space.shape))
                    obs_log.append(env.step(actions)[0].copy())
                runs.append(np.array(obs_log))
                nested = env.unflatten_observation(obs_log[-1])
                assert nested is not None
        np.testing.assert_array_equal(runs[0], runs[1])


def test_multiagent_through_multiprocessing():
    runs = []
    for backend, workers in (("serial", None), (MP, 2)):
        with vector.make(TinyParallelEnv, num_envs=2, num_workers=workers, backend=backend) as env:
            assert env.num_envs == 6 and env.agents_per_env == 3 and env.batch_size == 6
            obs, _ = env.reset(seed=1)
            log = {"obs": [obs.copy()], "masks": [], "rew": [], "term": [], "agents": []}
            for step in range(14):
                actions = np.full(6, step % 4)
                _obs, rew, term, _trunc, infos = env.step(actions)
                env_ids = list(range(6))
                log["obs"].append(_obs.copy())
                log["rew"].append(rew.copy())
                log["term"].append(term.copy())
                log["agents"].append(sorted((i["env_id"], i["agent"]) for i in infos))
                for info in infos:
                    assert info["env_id"] in env_ids and info["agent"].startswith("agent_")
            runs.append(log)
    assert runs[0]["agents"] == runs[1]["agents"]
    for key in ("obs", "rew", "term"):
        np.testing.assert_array_equal(np.array(runs[0][key]), np.array(runs[1][key]), err_msg=key)
    # agent_0 of env 0 leaves after 2 steps: its row terminates at step 2 with an info.
    assert runs[1]["term"][1][0] and (0, "agent_0") in runs[1]["agents"][1]
    # Rows of env 1 carry env 1's seed.
    assert np.all(runs[1]["obs"][0][3:, 3] == 2)


def test_multiagent_masks_through_recv():
    with vector.make(TinyParallelEnv, num_envs=2, num_workers=2, backend=MP) as env:
        env.async_reset(0)
        masks_log = []
        for _ in range(6):
            *_, ids, masks = env.recv()
            masks_log.append(masks.copy())
            env.send(np.zeros(6, int))
    # Step 3: agent_0 left after step 2, so its rows are masked out; agents 1 and 2 live.
    np.testing.assert_array_equal(masks_log[3], [False, True, True] * 2)
    assert masks_log[0].all()


def test_pistonball_through_multiprocessing():
    from pettingzoo.butterfly import pistonball_v6 as pistonball

    def creator():
        return pistonball.parallel_env(n_pistons=3, max_cycles=20)

    with vector.make(creator, num_envs=2, num_workers=2, backend=MP) as env:
        assert env.num_envs == 6
        obs, _ = env.reset(seed=0)
        for _ in range(25):
            obs, rew, term, trunc, infos = env.step(np.zeros((6, *env.single_action_space.shape), np.float32))
        assert obs.shape[0] == 6


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("kwargs", "needles"),
    [
        ({"num_envs": 16, "num_workers": 4, "batch_size": 5}, ["batch_size 5", "multiple", "4", "8, 12 or 16"]),
        ({"num_envs": 4, "num_workers": 6}, ["num_workers 6", "num_workers ≤ 4"]),
        ({"num_envs": 4, "batch_size": 8}, ["batch_size 8", "≤ 4"]),
        ({"num_envs": 5, "num_workers": 2, "batch_size": 2}, ["split evenly", "num_workers", "batch_size 5"]),
        ({"num_envs": 0}, ["num_envs", "≥ 1"]),
        ({"num_envs": 2.5}, ["num_envs", "int"]),
        ({"num_envs": 2, "backend": "threads"}, ["backend", "'serial'", "'multiprocessing'", "'ray'"]),
        ({"num_envs": 6, "batch_size": 4, "backend": "serial"}, ["divide", "1, 2, 3 or 6"]),
        ({"num_envs": 2, "seed": -1}, ["seed"]),
    ],
)
def test_invalid_arguments_propose_valid_values(kwargs, needles):
    kwargs = {"backend": MP, **kwargs}
    before = multiprocessing.active_children()
    with pytest.raises(APIUsageError) as info:
        env = vector.make(cartpole, **kwargs)
        env.reset()  # seed is checked by the first reset
    message = str(info.value)
    for needle in needles:
        assert needle in message, (needle, message)
    assert multiprocessing.active_children() == before


def test_defaults_and_uneven_split():
    with vector.make(cartpole, num_envs=5, backend=MP) as env:
        assert env.num_workers == min(5, len(os.sched_getaffinity(0)))
        assert env.batch_size == 5
        obs, _ = env.reset(seed=0)
        assert obs.shape == (5, 4)
    with vector.make(cartpole, num_envs=5, num_workers=3, backend=MP) as env:
        assert env.num_workers == 3 and env._env_counts == [2, 2, 1]
        env.reset(seed=0)
        env.step(np.zeros(5, int))


def test_api_misuse_is_explained():
    for backend in ("serial", MP):
        with vector.make(cartpole, num_envs=4, num_workers=2 if backend == MP else None, backend=backend) as env:
            with pytest.raises(APIUsageError, match="reset"):
                env.send(np.zeros(4, int))
            with pytest.raises(APIUsageError, match="reset"):
                env.recv()
            env.async_reset(0)
            env.recv()
            with pytest.raises(APIUsageError, match="twice"):
                env.recv()
            with pytest.raises(APIUsageError, match="shape"):
                env.send(np.zeros(3, int))
            env.send(np.zeros(4, int))
            with pytest.raises(APIUsageError, match="twice"):
                env.send(np.zeros(4, int))
            env.recv()
    with vector.make(cartpole, num_envs=4, num_workers=2, batch_size=2, backend=MP) as env:
        with pytest.raises(APIUsageError, match="async_reset"):
            env.reset()


@pytest.mark.parametrize("backend", ["serial", MP])
def test_close_is_idempotent_and_final(backend):
    env = vector.make(cartpole, num_envs=2, backend=backend)
    env.reset(seed=0)
    env.close()
    env.close()
    assert env.closed
    with pytest.raises(APIUsageError, match="closed"):
        env.step(np.zeros(2, int))
    with vector.make(cartpole, num_envs=2, backend=backend) as env2:
        env2.reset()
    env2.close()


def test_reset_mid_flight_discards_old_results():
    creator = functools.partial(CountingEnv, episode_length=100)
    with vector.make(
        creator, num_envs=4, num_workers=2, batch_size=2, backend=MP, vector_kwargs={"timeout": 5}
    ) as env:  # a lost wake-up would surface as a WorkerError (timeout), not just a slow test
        env.async_reset(0)
        env.recv()
        env.send(np.ones(2, int))
        env.async_reset(50)  # one worker still stepping: its result is dropped
        seen = set()
        steps = np.zeros(4, int)
        deadline = time.monotonic() + 10
        while seen != {0, 1, 2, 3} or steps.sum() < 20:
            assert time.monotonic() < deadline, seen
            obs, *_, ids, _ = env.recv()
            np.testing.assert_array_equal(obs[:, 0], steps[ids])  # counted from the new reset
            np.testing.assert_array_equal(obs[:, 3], 50 + ids)
            seen.update(ids.tolist())
            steps[ids] += 1
            env.send(np.ones(2, int))
        assert seen == {0, 1, 2, 3}


def test_serial_env_raising_is_a_worker_error():
    creator = functools.partial(FaultEnv, mode="raise", where="step", at=2, fault_seed=1)
    env = vector.make(creator, num_envs=3, backend="serial")
    with pytest.raises(WorkerError) as info:
        env.reset(seed=0)
        for _ in range(20):
            env.step(np.zeros(env.num_envs, int))
    assert info.value.env_index == 1 and "deliberate failure" in info.value.cause
    env.close()
