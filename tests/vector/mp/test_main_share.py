"""Multiprocessing with ``main_share``: the main process steps a share of the envs itself
(inside ``send`` for full batches, inside ``recv`` between worker batches for async ones)
while the workers step theirs; every guarantee of the backend holds."""

from __future__ import annotations

import functools
import time

import gymnasium
import numpy as np
import pytest

from puffer_core import vector
from puffer_core.errors import APIUsageError, WorkerError
from puffer_core.testing import CountingEnv, FaultEnv, TinyParallelEnv, rollout
from puffer_core.vector.mp.main_share import wants_main_share

MP = "multiprocessing"


def cartpole():
    return gymnasium.make("CartPole-v1")


def assert_same(a: dict, b: dict) -> None:
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.parametrize(("num_envs", "workers"), [(4, 1), (5, 2), (3, 2)])  # even and uneven splits
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_trajectories_equal_serial(num_envs, workers, mode):
    with vector.make(cartpole, num_envs=num_envs, backend="serial", autoreset=mode) as serial:
        want = rollout(serial, 150, seed=3)
    with vector.make(
        cartpole, num_envs=num_envs, num_workers=workers, backend=MP, autoreset=mode, vector_kwargs={"main_share": True}
    ) as envs:
        assert envs.num_workers == workers and len(envs.pids) == workers
        got = rollout(envs, 150, seed=3)
    assert want["term"].sum() >= num_envs
    assert_same(want, got)


def test_multi_agent_rows_and_zero_copy():
    with vector.make(TinyParallelEnv, num_envs=3, backend="serial") as serial:
        want = rollout(serial, 30, seed=1)
    with vector.make(
        TinyParallelEnv, num_envs=3, num_workers=1, backend=MP, vector_kwargs={"main_share": True}
    ) as envs:
        got = rollout(envs, 30, seed=1)
        obs, *_ = envs.step(np.zeros(9, int))
        assert np.shares_memory(obs, envs._obs)  # the shared buffer itself, main share's rows included
    assert_same(want, got)


def test_async_batches_count_the_main_share_as_one_more_worker():
    creator = functools.partial(CountingEnv, episode_length=1000, delay=0.002, delay_seeds=(100, 101))
    with vector.make(
        creator, num_envs=6, num_workers=2, batch_size=2, backend=MP, vector_kwargs={"main_share": True}
    ) as envs:  # workers hold envs 0-1 (slow), 2-3; main 4-5
        envs.async_reset(100)
        seen, steps = set(), np.zeros(6, int)
        deadline = time.monotonic() + 30
        # The main share is ready at once, so the first batches may all be its own while the
        # workers are still being scheduled: step until every unit has come back at least
        # twice (on a busy machine that takes longer, never forever).
        while (len(seen) < 6 or steps.min() < 2 or steps.sum() < 120) and time.monotonic() < deadline:
            obs, _, _, _, _, ids, _ = envs.recv()
            assert len(ids) == 2 and ids.tolist() in ([0, 1], [2, 3], [4, 5])
            np.testing.assert_array_equal(obs[:, 0], steps[ids])  # each row's own step count: no mix-ups
            seen.update(ids.tolist())
            steps[ids] += 1
            envs.send(np.ones(2, int))
        assert seen == set(range(6)), steps
        assert steps[:2].sum() < steps[2:].sum() / 2  # the slow worker fell behind: batches did not wait for it


def test_async_main_share_steps_between_worker_batches():
    # The main share's envs are slow (20 ms a step), the worker's fast. recv steps the main
    # share env by env and serves the worker between them, so the worker comes back about
    # once per main env, not once per main share.
    creator = functools.partial(CountingEnv, episode_length=1000, delay=0.02, delay_seeds=(104, 105, 106, 107))
    with vector.make(
        creator, num_envs=8, num_workers=1, batch_size=4, backend=MP, vector_kwargs={"main_share": True}
    ) as envs:  # the worker holds envs 0-3, the main 4-7 (slow)
        envs.async_reset(100)
        batches, steps = {0: 0, 4: 0}, np.zeros(8, int)
        # Until the main share has come back 6 times (bounded: a starved one never does), however busy the machine.
        for _ in range(400):
            if batches[4] == 6:
                break
            obs, _, _, _, _, ids, _ = envs.recv()
            np.testing.assert_array_equal(obs[:, 0], steps[ids])  # each row's own step count
            steps[ids] += 1
            batches[int(ids[0])] += 1
            started = time.monotonic()
            envs.send(np.ones(4, int))
            if ids[0] == 4:
                assert time.monotonic() - started < 0.04  # send only queues the main share's 80 ms
        assert batches[4] == 6, batches  # serving the worker never starves the main share
        assert batches[0] >= 2.5 * batches[4], batches


def test_async_main_share_fault():
    creator = functools.partial(FaultEnv, mode="raise", at=2, fault_seed=3, episode_length=100)
    envs = vector.make(creator, num_envs=4, num_workers=1, batch_size=2, backend=MP, vector_kwargs={"main_share": True})
    envs.async_reset(0)  # the worker holds envs 0-1, the main 2-3 (env 3 raises at its second step)
    with pytest.raises(WorkerError, match=r"the main process's share: env 3 raised RuntimeError in step"):
        for _ in range(10):
            envs.recv()
            envs.send(np.zeros(2, int))
    assert envs.closed
    with vector.make(
        creator,
        num_envs=4,
        num_workers=1,
        batch_size=2,
        backend=MP,
        on_fault="restart",
        vector_kwargs={"main_share": True},
    ) as envs:
        envs.async_reset(0)
        faults = []
        for _ in range(12):
            _, _, _, truncations, infos, ids, _ = envs.recv()
            faults += [i["env_id"] for i in infos if "fault" in i]
            if ids.tolist() == [2, 3] and truncations.any():
                assert truncations.tolist() == [True, True]
            envs.send(np.zeros(2, int))
        assert faults == [2, 3]
        assert envs.stats["restarts"] == 1


@pytest.mark.parametrize("then", ["call", "reset"])
def test_calls_and_resets_finish_the_main_share_queued_step_first(then):
    creator = functools.partial(CountingEnv, episode_length=1000)
    with vector.make(
        creator, num_envs=4, num_workers=1, batch_size=2, backend=MP, vector_kwargs={"main_share": True}
    ) as envs:  # the worker holds envs 0-1, the main 2-3
        envs.async_reset(0)
        sent = np.zeros(4, int)
        while sent[2] < 3:
            *_, ids, _ = envs.recv()
            envs.send(np.ones(2, int))
            sent[ids] += 1
        if then == "call":  # the third step of envs 2-3 is queued, not yet stepped
            assert envs.get_attr("action_sum")[2:] == (3, 3)
        else:
            envs.async_reset(50)
            assert envs.get_attr("t") == (0, 0, 0, 0)  # the queued step ran before the reset, not after
            steps = np.zeros(4, int)
            while steps.min() < 2:
                obs, *_, ids, _ = envs.recv()
                np.testing.assert_array_equal(obs[:, 0], steps[ids])  # counted from the new reset
                np.testing.assert_array_equal(obs[:, 3], 50 + ids)
                steps[ids] += 1
                envs.send(np.ones(2, int))


def test_calls_and_resets_reach_the_main_share():
    creator = functools.partial(CountingEnv, episode_length=3)
    with vector.make(
        creator, num_envs=4, num_workers=1, backend=MP, autoreset="disabled", vector_kwargs={"main_share": True}
    ) as envs:  # the worker holds envs 0-1, the main 2-3
        envs.reset(seed=0)
        assert envs.get_attr("first_seed") == (0, 1, 2, 3)
        envs.set_attr("delay", [0.5, 0.25], env_indices=[1, 3])
        assert envs.get_attr("delay") == (0.0, 0.5, 0.0, 0.25)
        envs.set_attr("delay", 0.0)
        for _ in range(3):
            _, _, terminals, _, _ = envs.step(np.zeros(4, int))
        assert terminals.all()
        obs, _ = envs.reset(seed=[None, None, 50, None], options={"reset_mask": np.array([False, True, True, False])})
        np.testing.assert_array_equal(obs[:, 0], [3, 0, 0, 3])
        np.testing.assert_array_equal(obs[:, 3], [0, 1, 50, 3])


def test_an_env_fault_in_the_main_share():
    creator = functools.partial(FaultEnv, mode="raise", at=2, fault_seed=3, episode_length=100)
    envs = vector.make(creator, num_envs=4, num_workers=1, backend=MP, vector_kwargs={"main_share": True})
    envs.reset(seed=0)
    envs.step(np.zeros(4, int))
    with pytest.raises(WorkerError, match=r"the main process's share: env 3 raised RuntimeError in step"):
        envs.step(np.zeros(4, int))
    assert envs.closed
    with vector.make(
        creator, num_envs=4, num_workers=1, backend=MP, on_fault="restart", vector_kwargs={"main_share": True}
    ) as envs:
        envs.reset(seed=0)
        envs.step(np.zeros(4, int))
        _, _, _, truncations, infos = envs.step(np.zeros(4, int))
        assert truncations.tolist() == [False, False, True, True]
        assert [i["env_id"] for i in infos if "fault" in i] == [2, 3]
        for _ in range(5):
            _, _, _, truncations, _ = envs.step(np.zeros(4, int))
            assert not truncations.any()


def test_the_auto_choice_and_bad_values():
    assert wants_main_share("auto", 16, None, cpus=2) is True  # 2 workers + the main process > 2 cores
    assert wants_main_share("auto", 16, 1, cpus=2) is False  # 1 worker + the main process fit
    assert wants_main_share("auto", 16, None, cpus=8) is True
    assert wants_main_share("auto", 16, 4, cpus=8) is False
    assert wants_main_share(False, 16, None, cpus=2) is False
    with pytest.raises(APIUsageError, match="main_share must be True, False, 'auto' or a number of envs"):
        wants_main_share("yes", 4, None, cpus=2)
    with pytest.raises(APIUsageError, match="main_share needs num_envs ≥ 2"):
        vector.make(CountingEnv, num_envs=1, backend=MP, vector_kwargs={"main_share": True})
    with vector.make(CountingEnv, num_envs=4, backend=MP, vector_kwargs={"main_share": "auto"}) as envs:
        cpus = vector.checks.available_cpus()
        assert envs.num_workers == max(1, min(4, cpus) - 1) and len(envs.pids) == envs.num_workers


def test_a_lighter_main_share_keeps_serial_trajectories():
    """main_share=k: the main process steps k envs, the workers share the rest."""
    with vector.make(cartpole, num_envs=6, backend="serial") as serial:
        want = rollout(serial, 120, seed=4)
    for workers, k in ((1, 2), (2, 1)):
        with vector.make(
            cartpole, num_envs=6, num_workers=workers, backend=MP, vector_kwargs={"main_share": k}
        ) as envs:
            assert envs._env_counts[-1] == k and sum(envs._env_counts) == 6 and len(envs.pids) == workers
            assert_same(want, rollout(envs, 120, seed=4))


@pytest.mark.parametrize(
    "k, batch, message",
    [
        (6, None, "main_share=6 envs for the main process leaves 0 for 1 worker"),
        (0, None, r"main_share'\] must be True, False, 'auto' or a number of envs \(an int ≥ 1 and ≤ 65,536\), got 0"),
        (-1, None, r"main_share'\] must be True, False, 'auto' or a number of envs \(an int ≥ 1 and ≤ 65,536\), got -"),
        (9, None, "main_share=9 envs for the main process is more than num_envs 6, leaving none for 1 worker"),
        (2, 3, "an uneven share\\) needs full batches"),
    ],
)
def test_a_bad_main_share_count_says_what_works(k, batch, message):
    with pytest.raises(APIUsageError, match=message):
        vector.make(
            "classic/cartpole", num_envs=6, num_workers=1, batch_size=batch, backend="multiprocessing",
            vector_kwargs={"main_share": k},
        )  # fmt: skip


def _plain(info: dict) -> dict:
    """An info with its arrays as lists (same_step infos carry the final observation), so that == compares it."""
    return {
        k: _plain(v) if isinstance(v, dict) else v.tolist() if isinstance(v, np.ndarray) else v for k, v in info.items()
    }


def _per_env_async(envs, actions: np.ndarray) -> dict[int, dict[str, list]]:
    """Each env's observations, rewards, ends and infos over async recv/send pairs, the env's
    t-th action being ``actions[env, t]``: until every env has had 80 batches, or one is out
    of actions (3 processes on 2 cores may schedule a worker seldom; that is not a fault)."""
    out = {e: {"obs": [], "rew": [], "end": [], "infos": []} for e in range(envs.num_envs)}
    count = np.zeros(envs.num_envs, int)
    envs.async_reset(3)
    while count.min() < 80 and count.max() < actions.shape[1]:
        obs, rew, term, trunc, infos, ids, _ = envs.recv()
        for row, e in enumerate(ids.tolist()):
            out[e]["obs"].append(obs[row].copy())
            out[e]["rew"].append(float(rew[row]))
            out[e]["end"].append((bool(term[row]), bool(trunc[row])))
        for info in infos:
            out[info["env_id"]]["infos"].append((int(count[info["env_id"]]), _plain(info)))
        envs.send(actions[ids, count[ids]])
        count[ids] += 1
    return out


@pytest.mark.parametrize(
    ("workers", "main_share", "mode"),
    [(1, True, "next_step"), (2, True, "next_step"), (2, False, "next_step"), (1, True, "same_step")],
)  # same_step: the main share's envs step through EnvGroup.step, not its next-step shortcut
def test_one_unit_async_batches_step_each_env_as_serial_does(workers, main_share, mode):
    # batch_size = one unit's envs: recv hands out the unit's row views made once, oldest command
    # first; each env must see exactly the trajectory, episode infos included, that Serial gives it.
    num_envs = 2 * (workers + main_share)
    actions = np.random.default_rng(7).integers(0, 2, (num_envs, 2000))
    with vector.make(cartpole, num_envs=num_envs, backend="serial", autoreset=mode) as serial:
        obs, _ = serial.reset(seed=3)
        first = {"rew": [0.0], "end": [(False, False)], "infos": []}  # what recv gives right after a reset
        want = {e: {"obs": [obs[e].copy()], **{k: list(v) for k, v in first.items()}} for e in range(num_envs)}
        for t in range(actions.shape[1]):
            obs, rew, term, trunc, infos = serial.step(actions[:, t])
            for e in range(num_envs):
                want[e]["obs"].append(obs[e].copy())
                want[e]["rew"].append(float(rew[e]))
                want[e]["end"].append((bool(term[e]), bool(trunc[e])))
            for info in infos:
                want[info["env_id"]]["infos"].append((t + 1, _plain(info)))
    with vector.make(
        cartpole,
        num_envs=num_envs,
        num_workers=workers,
        batch_size=2,
        backend=MP,
        autoreset=mode,
        vector_kwargs={"main_share": main_share},
    ) as envs:
        got = _per_env_async(envs, actions)
    for e in range(num_envs):
        n = len(got[e]["obs"])
        assert n >= 5, (e, n)  # every unit came back
        np.testing.assert_array_equal(np.array(got[e]["obs"]), np.array(want[e]["obs"][:n]), err_msg=f"env {e}")
        assert got[e]["rew"] == want[e]["rew"][:n] and got[e]["end"] == want[e]["end"][:n], e
        assert got[e]["infos"] == [(t, i) for t, i in want[e]["infos"] if t < n], e
    assert sum(len(g["infos"]) for g in got.values()) >= num_envs  # episodes ended, and were reported


def test_one_unit_async_batches_are_rows_in_place_and_name_misuse():
    # recv and send check the call order only when something is off: they must still say what.
    with vector.make(
        cartpole, num_envs=4, num_workers=1, batch_size=2, backend=MP, vector_kwargs={"main_share": True}
    ) as envs:
        with pytest.raises(APIUsageError, match="async_reset"):
            envs.recv()
        with pytest.raises(APIUsageError, match="reset"):
            envs.send(np.zeros(2, int))
        envs.async_reset(0)
        obs, *_ = envs.recv()
        assert np.shares_memory(obs, envs._obs)  # one unit's rows are handed out in place, never gathered
        with pytest.raises(APIUsageError, match="twice"):
            envs.recv()
        with pytest.raises(APIUsageError, match="shape"):
            envs.send(np.zeros(3, int))
        with pytest.raises(APIUsageError, match=r"action 5 in row 0 (\(env \d\) )?is out of range"):
            envs.send(np.full(2, 5))  # the batch is the worker's or the main share's: either may come first
        envs.send(np.zeros(2, int))
        with pytest.raises(APIUsageError, match="twice"):
            envs.send(np.zeros(2, int))
    with pytest.raises(APIUsageError, match="closed"):
        envs.recv()
    with pytest.raises(APIUsageError, match="closed"):
        envs.send(np.zeros(2, int))
