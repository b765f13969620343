"""``on_fault="restart"``: real crashes (an exception, ``os._exit``, SIGSEGV, SIGKILL from
outside, a hang) replace the worker; the run goes on, the affected rows come back truncated
with the fault in their infos, exactly once, and nothing leaks."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import tempfile
import time

import numpy as np
import pytest

from puffer_core import vector
from puffer_core.errors import APIUsageError, EnvCallError, WorkerError
from puffer_core.testing import CountingEnv, FaultEnv, TinyParallelEnv

MP = "multiprocessing"


def restarting(creator, num_envs=2, workers=2, seed=0, **kwargs):
    return vector.make(
        creator, num_envs=num_envs, num_workers=workers, backend=MP, seed=seed, on_fault="restart", **kwargs
    )


def faults_in(infos) -> list[dict]:
    return [info for info in infos if "fault" in info]


@pytest.mark.parametrize(
    ("mode", "cause"),
    [("raise", "raised RuntimeError"), ("exit", "exited with code 3"), ("segfault", "killed by signal SIGSEGV")],
)
def test_a_crash_truncates_the_workers_rows_and_the_run_goes_on(no_leaks, mode, cause):
    creator = functools.partial(FaultEnv, mode=mode, at=3, fault_seed=2, episode_length=1000)
    with restarting(creator, num_envs=4, workers=2) as envs:  # worker 1 holds envs 2 and 3
        old = list(envs.pids)
        no_leaks.extend(old)
        envs.reset(seed=0)
        for _ in range(2):
            _, _, _, truncations, infos = envs.step(np.ones(4, int))
            assert not truncations.any() and infos == []
        obs, rewards, terminals, truncations, infos = envs.step(np.ones(4, int))
        np.testing.assert_array_equal(truncations, [False, False, True, True])
        assert not terminals.any() and rewards[2:].tolist() == [0.0, 0.0]
        np.testing.assert_array_equal(obs[2:, 0], [0, 0])  # the re-created envs' reset observations
        assert [i["env_id"] for i in faults_in(infos)] == [2, 3]
        fault = infos[0]["fault"]
        assert (fault["worker"], fault["env"], fault["phase"], fault["restarts"]) == (1, 2, "step", 1)
        assert fault["cause"] == cause
        assert ("Traceback" in fault["traceback"]) == (mode == "raise")
        assert envs.pids[0] == old[0] and envs.pids[1] != old[1]
        no_leaks.extend(envs.pids)
        for _ in range(10):  # the replacement steps on; the faulty env was re-seeded, so it no longer faults
            _, _, _, truncations, infos = envs.step(np.ones(4, int))
            assert faults_in(infos) == [] and not truncations.any()
        assert envs.stats["faults"] == envs.stats["restarts"] == 1 and envs.stats["faults_by_env"] == {2: 1}
        assert envs.stats["restart_seconds"][0] > 0  # how long restarts take is puffer bench's to say


def test_a_hang_past_the_timeout_is_a_fault_too(no_leaks):
    creator = functools.partial(FaultEnv, mode="hang", at=2, fault_seed=1, hang_seconds=60, episode_length=100)
    with restarting(creator, vector_kwargs={"timeout": 1.0}) as envs:
        no_leaks.extend(envs.pids)
        envs.reset(seed=0)
        envs.step(np.zeros(2, int))
        start = time.monotonic()
        _, _, _, truncations, infos = envs.step(np.zeros(2, int))
        assert 0.9 < time.monotonic() - start < 10
        assert truncations.tolist() == [False, True]
        assert faults_in(infos)[0]["fault"]["cause"] == "silent for 1 s"
        no_leaks.extend(envs.pids)
        envs.step(np.zeros(2, int))


def test_an_env_that_keeps_faulting_raises_after_max_restarts(no_leaks):
    # Every env faults on its first reset, so each replacement faults again while it rebuilds.
    creator = functools.partial(FaultEnv, mode="raise", where="reset", at=1)
    envs = restarting(creator, vector_kwargs={"max_restarts": 3})
    no_leaks.extend(envs.pids)
    with pytest.raises(WorkerError) as info:
        envs.reset(seed=0)
    message = str(info.value)
    assert "faulted 3 times in a row" in message and "max_restarts=3" in message
    assert message.count("raised RuntimeError") == 3
    assert envs.closed
    assert info.value.env_index in (0, 1)


def test_the_same_seed_and_faults_give_the_same_run():
    creator = functools.partial(FaultEnv, mode="raise", at=4, jitter=3, episode_length=7)
    runs = []
    for _ in range(2):
        with restarting(creator, num_envs=4, seed=5) as envs:
            obs, _ = envs.reset()
            trace = [np.concatenate([obs.ravel(), np.zeros(4)])]
            for _ in range(30):
                obs, _, _, truncations, _ = envs.step(np.arange(4) % 3)
                trace.append(np.concatenate([obs.ravel(), truncations]))
            runs.append((np.array(trace), envs.stats["faults"]))
    assert runs[0][1] >= 4
    np.testing.assert_array_equal(runs[0][0], runs[1][0])


def test_async_batches_and_multi_agent_rows(no_leaks):
    class Dying(TinyParallelEnv):
        def step(self, actions):
            if self.first_seed == 1 and self.t == 2:
                os._exit(5)
            return super().step(actions)

    with restarting(Dying, num_envs=4, workers=2, batch_size=2) as envs:
        no_leaks.extend(envs.pids)
        envs.async_reset(0)
        faulted = []
        deadline = time.monotonic() + 20  # the other worker fills every batch meanwhile
        while len(faulted) < 6 and time.monotonic() < deadline:
            obs, rewards, terminals, truncations, infos, env_ids, masks = envs.recv()
            for info in faults_in(infos):
                faulted.append((info["env_id"], info["agent"]))
                assert truncations[list(env_ids).index(info["env_id"])]
            envs.send(np.zeros(len(env_ids), int))
        assert sorted(faulted) == [(row, f"agent_{row % 3}") for row in range(6)]  # envs 0 and 1, every agent row
        no_leaks.extend(envs.pids)


def test_a_worker_killed_while_idle_reports_with_its_next_results(no_leaks, start_method):
    creator = functools.partial(CountingEnv, episode_length=100)
    with restarting(creator, vector_kwargs={"start_method": start_method}) as envs:
        assert envs.start_method == start_method
        no_leaks.extend(envs.pids)
        envs.reset(seed=0)
        envs.step(np.zeros(2, int))
        os.kill(envs.pids[0], signal.SIGKILL)
        time.sleep(0.2)
        _, _, _, truncations, infos = envs.step(np.zeros(2, int))
        no_leaks.extend(envs.pids)
        assert truncations.tolist() == [True, False]
        assert faults_in(infos)[0]["fault"]["cause"] == "killed by signal SIGKILL"
        assert faults_in(infos)[0]["fault"]["phase"] in ("idle", "step")


class TempFolderEnv(CountingEnv):
    """Keeps a folder in the temp dir until closed, as each NetHack game does."""

    def __init__(self):
        super().__init__(episode_length=100)
        self.folder = tempfile.mkdtemp(prefix="game-")

    def close(self):
        shutil.rmtree(self.folder, ignore_errors=True)


def test_what_killed_workers_leave_in_the_temp_dir_goes_when_the_vector_env_closes(no_leaks):
    root = tempfile.gettempdir()

    def games() -> set[str]:  # games' folders straight in the temp dir (where they would be without ours)
        return {p for p in os.listdir(root) if p.startswith("game-")}

    before = games()
    with restarting(TempFolderEnv) as envs:
        no_leaks.extend(envs.pids)
        envs.reset(seed=0)
        folders = envs.get_attr("folder")
        scratch = os.path.dirname(folders[0])
        assert os.path.dirname(scratch) == root and os.path.basename(scratch).startswith("puffer-vector-")
        assert os.path.dirname(folders[1]) == scratch  # the workers share one
        for _ in range(2):  # each kill leaves the game's folder behind; the replacement makes another
            os.kill(envs.pids[0], signal.SIGKILL)
            _, _, _, truncations, infos = envs.step(np.zeros(2, int))
            no_leaks.extend(envs.pids)
            assert faults_in(infos) and truncations[0]
        assert len(os.listdir(scratch)) == 4
    assert not os.path.exists(scratch) and games() == before
    assert tempfile.gettempdir() == root  # the main process's own temp dir is untouched


def test_a_call_during_which_the_worker_dies_raises_and_the_envs_stay_usable(no_leaks):
    class Explosive(CountingEnv):
        def detonate(self):
            os._exit(9)

    with restarting(Explosive) as envs:
        no_leaks.extend(envs.pids)
        envs.reset(seed=0)
        with pytest.raises(EnvCallError, match=r"call\('detonate'\): worker 1 faulted .*exited with code 9.*restarted"):
            envs.call("detonate", env_indices=[1])
        no_leaks.extend(envs.pids)
        _, _, _, truncations, infos = envs.step(np.zeros(2, int))
        assert faults_in(infos)[0]["env_id"] == 1 and truncations[1]


def test_restart_is_refused_where_no_worker_can_be_replaced():
    with pytest.raises(APIUsageError, match="serial backend has none; use backend='multiprocessing'"):
        vector.make(CountingEnv, num_envs=2, on_fault="restart")
    with pytest.raises(APIUsageError, match="on_fault must be 'raise' or 'restart'"):
        vector.make(CountingEnv, num_envs=2, backend=MP, on_fault="retry")
    with pytest.raises(APIUsageError, match=r"max_restarts'\] must be ≥ 1 and ≤ 1,000,000, got 0"):
        vector.make(CountingEnv, num_envs=2, backend=MP, on_fault="restart", vector_kwargs={"max_restarts": 0})


@pytest.mark.slow
def test_100k_steps_with_a_fault_every_2000_steps(no_leaks):
    # Each env crashes (an exception, os._exit or SIGSEGV) 700-1,300 of its own steps after it was
    # made, and a restart re-makes both envs of its worker: each worker faults every ~1,000 vector
    # steps (4,000 of the run's steps), so the run sees a fault about every 2,000 steps.
    modes = ["raise", "exit", "segfault"]

    def creator():
        mode = modes[np.random.default_rng().integers(3)]
        return FaultEnv(mode=mode, at=700, jitter=600, episode_length=200)

    with restarting(creator, num_envs=4, workers=2, seed=1) as envs:
        no_leaks.extend(envs.pids)
        envs.reset()
        steps, seen = 0, []
        while steps < 100_000:
            _, _, _, truncations, infos = envs.step(np.zeros(4, int))
            steps += 4
            for info in faults_in(infos):
                seen.append((info["fault"]["worker"], info["fault"]["restarts"], info["env_id"]))
                assert truncations[info["env_id"]]
            no_leaks.extend(pid for pid in envs.pids if pid not in no_leaks)
        restarts = envs.stats["restarts"]
        assert 40 <= restarts <= 120, restarts
        # Each fault once per env of its worker: (worker, its restart count) pairs x 2 envs, no repeats.
        assert len(seen) == len(set(seen)) == 2 * restarts
        assert len(envs.stats["restart_seconds"]) == restarts


# ---------------------------------------------------------------- Ray: Ray's own actor restart


@pytest.mark.ray
@pytest.mark.parametrize(
    ("mode", "cause"),
    [("raise", "raised RuntimeError"), ("exit", "actor died"), ("segfault", "actor died")],
)
def test_ray_restarts_a_crashed_actor(local_ray, mode, cause):
    creator = functools.partial(FaultEnv, mode=mode, at=3, fault_seed=2, episode_length=1000)
    with vector.make(creator, num_envs=4, num_workers=2, backend="ray", seed=0, on_fault="restart") as envs:
        envs.reset(seed=0)
        for _ in range(2):
            envs.step(np.ones(4, int))
        obs, rewards, terminals, truncations, infos = envs.step(np.ones(4, int))
        np.testing.assert_array_equal(truncations, [False, False, True, True])
        np.testing.assert_array_equal(obs[2:, 0], [0, 0])
        assert [i["env_id"] for i in faults_in(infos)] == [2, 3]
        assert faults_in(infos)[0]["fault"]["cause"].startswith(cause)
        for _ in range(5):
            _, _, _, truncations, infos = envs.step(np.ones(4, int))
            assert faults_in(infos) == [] and not truncations.any()
        assert envs.stats["restarts"] == 1


@pytest.mark.ray
def test_ray_hang_and_repeated_faults(local_ray):
    creator = functools.partial(FaultEnv, mode="hang", at=2, fault_seed=1, hang_seconds=60, episode_length=100)
    with vector.make(
        creator, num_envs=2, num_workers=2, backend="ray", on_fault="restart", vector_kwargs={"timeout": 3.0}
    ) as envs:
        envs.reset(seed=0)
        envs.step(np.zeros(2, int))
        _, _, _, truncations, infos = envs.step(np.zeros(2, int))
        assert truncations.tolist() == [False, True]
        assert faults_in(infos)[0]["fault"]["cause"] == "silent for 3 s"
    creator = functools.partial(FaultEnv, mode="raise", where="reset", at=1)
    envs = vector.make(
        creator, num_envs=2, num_workers=2, backend="ray", on_fault="restart", vector_kwargs={"max_restarts": 2}
    )
    with pytest.raises(WorkerError, match="faulted 2 times in a row"):
        envs.reset(seed=0)
    assert envs.closed
