"""The command protocol (puffer_core/vector/mp/protocol.py, commands.py, worker.py): no
lost wake-up in thousands of hand-offs, spinning only where it pays, waits timed by the
other side's clock, infos through the mailbox or the data pipe."""

from __future__ import annotations

import functools
import os
import time

import gymnasium
import numpy as np
import pytest

from puffer_core import vector
from puffer_core.testing import CountingEnv
from puffer_core.vector.mp.protocol import DONE_NS, SLEEPING, spin_budget, usual_wait
from puffer_core.vector.mp.shared_memory import SLOTS

MP = "multiprocessing"


def cartpole():
    return gymnasium.make("CartPole-v1")


def test_a_spin_lasts_about_one_and_a_half_usual_waits_within_its_bounds():
    spin, floor = 100e-6, 20e-6
    assert spin_budget(spin, floor, 40e-6) == pytest.approx(60e-6)
    assert spin_budget(spin, floor, 1e-6) == floor  # at least the floor
    assert spin_budget(spin, floor, 90e-6) == spin  # at most the whole budget
    assert spin_budget(spin, spin, 1e-6) == spin  # each process has a core: the whole budget
    assert spin_budget(spin, floor, 250e-6) == 0.0  # waits much longer than a spin: sleep at once
    assert spin_budget(0.0, 0.0, 0.0) == 0.0  # spin_us=0: never


def test_the_usual_wait_follows_the_waits_and_forgets_old_ones():
    usual = 0.0
    for _ in range(20):
        usual = usual_wait(usual, 50e-6)
    assert usual == pytest.approx(50e-6, rel=1e-3)
    assert 0 < usual_wait(usual, 0.0) < usual  # one quick wait pulls it down, not to zero


def test_infos_larger_than_the_mailbox_use_the_pipe():
    with vector.make(cartpole, num_envs=4, num_workers=2, backend=MP, vector_kwargs={"info_buffer_bytes": 16}) as env:
        env.reset(seed=0)
        count = 0
        for _ in range(60):
            count += len(env.step(np.zeros(4, int))[4])
    assert count >= 4


@pytest.mark.parametrize(
    ("workers", "batch", "spin"), [(4, 4, 0), (4, 1, 0), (2, 1, 0), (2, 2, 100), (1, 2, 100), (3, 3, 50)]
)
def test_many_fast_steps_never_lose_a_wakeup(workers, batch, spin):
    # Thousands of hand-offs with a short timeout: a lost wake-up becomes a WorkerError.
    creator = functools.partial(CountingEnv, episode_length=7)
    with vector.make(
        creator,
        num_envs=workers * (2 if batch == 2 and workers == 1 else 1),
        num_workers=workers,
        batch_size=batch,
        backend=MP,
        vector_kwargs={"timeout": 3, "spin_us": spin},
    ) as env:
        env.async_reset(0)
        steps = np.zeros(env.num_envs, int)
        for i in range(1500):
            obs, *_, ids, _ = env.recv()
            np.testing.assert_array_equal(obs[:, 3], ids)  # rows are the envs they claim
            steps[ids] += 1
            env.send(np.ones(len(ids), int))
            if i % 300 == 299:
                env.async_reset(0)  # with commands still in flight
        assert steps.min() > 0
        assert env.lost_wakeups == 0


def _worker_sleeping(env, w=0):
    return bool(env._commands.from_w[w * SLOTS + SLEEPING])


def _fast_steps(env, count=30):
    for _ in range(count):
        env.send(np.ones(env.batch_size, int))
        env.recv()


@pytest.mark.parametrize("workers", [1, 2])
def test_workers_spin_their_whole_budget_only_when_every_process_has_a_core(monkeypatch, workers):
    # On 2 CPUs one worker and the main process have a core each: after a batch the worker
    # spins its whole spin_us (a wake-up costs both sides far more than spinning costs anyone).
    # Two workers share the cores with the main process: they spin only about as long as
    # their waits usually last, then sleep.
    monkeypatch.setattr("puffer_core.vector.mp.backend.available_cpus", lambda: 2)
    with vector.make(
        CountingEnv, num_envs=workers, num_workers=workers, backend=MP, vector_kwargs={"spin_us": 200_000}
    ) as env:
        env.async_reset(0)
        env.recv()
        _fast_steps(env)
        time.sleep(0.02)
        assert [_worker_sleeping(env, w) for w in range(workers)] == [workers == 2] * workers
        time.sleep(0.4)  # past the budget: every worker sleeps
        assert [_worker_sleeping(env, w) for w in range(workers)] == [True] * workers


def test_a_slow_wake_up_does_not_teach_a_worker_to_sleep(monkeypatch):
    # The worker times the main process's answer by the command's stamp, not by when it got
    # to run: a stall of its own (here SIGSTOP; in a VM, a slow wake-up) must not make it
    # think the main process is slow, stop spinning, and pay a slow wake-up every batch.
    import signal

    monkeypatch.setattr("puffer_core.vector.mp.backend.available_cpus", lambda: 2)
    with vector.make(CountingEnv, num_envs=1, num_workers=1, backend=MP, vector_kwargs={"spin_us": 50_000}) as env:
        env.async_reset(0)
        env.recv()
        _fast_steps(env)
        pid = env.pids[0]
        os.kill(pid, signal.SIGSTOP)
        try:
            env.send(np.ones(1, int))  # answered at once, but the worker runs only 1 s later
            time.sleep(1.0)  # counted as the main process's answer, this would stop all spinning
        finally:
            os.kill(pid, signal.SIGCONT)
        env.recv()
        time.sleep(0.01)
        assert not _worker_sleeping(env)  # still spinning for the next command


def test_completions_carry_the_workers_clock():
    # The main process's own wait estimate reads when a worker finished from its stamp.
    with vector.make(CountingEnv, num_envs=2, num_workers=2, backend=MP) as env:
        env.async_reset(0)
        env.recv()
        before = time.monotonic_ns()
        env.send(np.ones(2, int))
        env.recv()
        after = time.monotonic_ns()
        assert all(before <= env._commands.from_w[w * SLOTS + DONE_NS] <= after for w in range(2))
