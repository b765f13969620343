"""Worker processes (puffer_core/vector/mp/processes.py): a fault is a WorkerError naming
worker, env and cause, fast; workers die with their owner; nothing is left behind."""

from __future__ import annotations

import functools
import gc
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import gymnasium
import numpy as np
import pytest
from process_checks import alive, default_sigint, shm_entries, wait_gone

from puffer_core import vector
from puffer_core.errors import WorkerError
from puffer_core.testing import CountingEnv, FaultEnv

MP = "multiprocessing"


def cartpole():
    return gymnasium.make("CartPole-v1")


def _run(env, steps=20):
    env.reset(seed=0)
    for _ in range(steps):
        env.step(np.zeros(env.num_envs, int))


@pytest.mark.parametrize("where", ["step", "reset"])
def test_env_raising_names_worker_env_and_traceback(no_leaks, where):
    # Env 3 (seed 3) raises on its 2nd step, or on its 2nd reset (the first autoreset).
    creator = functools.partial(FaultEnv, mode="raise", where=where, at=2, fault_seed=3, episode_length=3)
    env = vector.make(creator, num_envs=4, num_workers=2, backend=MP)
    no_leaks.extend(env.pids)
    start = time.monotonic()
    with pytest.raises(WorkerError) as info:
        _run(env)
    assert time.monotonic() - start < 5
    err = info.value
    assert err.worker == 1 and err.env_index == 3
    assert "worker 1" in str(err) and "env 3" in str(err) and where in str(err)
    assert "RuntimeError: FaultEnv: deliberate failure" in err.cause
    assert f"in {where}" in err.cause and "Traceback" in err.cause
    assert env.closed
    env.close()  # idempotent after a fault


def test_env_raising_at_construction(no_leaks):
    creator = functools.partial(FaultEnv, mode="raise", where="init")
    with pytest.raises(WorkerError) as info:
        vector.make(creator, num_envs=2, num_workers=2, backend=MP)
    assert info.value.env_index in (0, 1) and "init" in info.value.cause


def test_construction_failure_only_in_workers(no_leaks):
    calls = {"n": 0}
    parent = os.getpid()

    def creator():
        calls["n"] += 1
        if os.getpid() != parent:
            raise ValueError("no display in the worker")
        return CountingEnv()

    with pytest.raises(WorkerError) as info:
        vector.make(creator, num_envs=2, num_workers=1, backend=MP)
    assert info.value.worker == 0 and info.value.env_index == 0
    assert "ValueError: no display in the worker" in info.value.cause


def _async_until_worker_error(env, give_up: float) -> tuple[WorkerError, float]:
    """recv/send until a WorkerError (failing the test after ``give_up`` seconds without one):
    the error, and the seconds it took to come."""
    start = time.monotonic()
    with pytest.raises(WorkerError) as info:
        while time.monotonic() - start < give_up:
            env.recv()
            env.send(np.zeros(env.batch_size, int))
    return info.value, time.monotonic() - start


def test_sigkill_of_idle_worker(no_leaks):
    env = vector.make(CountingEnv, num_envs=4, num_workers=2, backend=MP)
    no_leaks.extend(env.pids)
    env.reset(seed=0)
    victim = env.pids[1]
    os.kill(victim, signal.SIGKILL)
    time.sleep(0.1)
    start = time.monotonic()
    with pytest.raises(WorkerError) as info:
        for _ in range(3):
            env.step(np.zeros(4, int))
    assert time.monotonic() - start < 5
    assert info.value.worker == 1
    assert "SIGKILL" in str(info.value) or "gone" in str(info.value)
    env.close()


def test_sigkill_while_stepping_names_the_env(no_leaks):
    creator = functools.partial(CountingEnv, episode_length=100, delay=3.0, delay_seeds=(2,))
    env = vector.make(creator, num_envs=4, num_workers=2, backend=MP)
    no_leaks.extend(env.pids)
    env.reset(seed=0)
    victim = env.pids[1]
    threading.Timer(0.5, os.kill, (victim, signal.SIGKILL)).start()
    start = time.monotonic()
    with pytest.raises(WorkerError) as info:
        env.step(np.zeros(4, int))
    assert time.monotonic() - start < 2.5
    err = info.value
    assert err.worker == 1 and err.env_index == 2
    assert "killed by signal SIGKILL" in str(err) and "env 2" in str(err)


def test_a_dead_worker_is_noticed_while_the_main_share_fills_every_batch(no_leaks):
    # 1 worker + the main share, async batches of one unit: once the worker is dead the main
    # share alone can answer every recv, so only the late check (the worker's sentinel,
    # looked at once its command runs late) can notice.
    env = vector.make(
        CountingEnv, num_envs=4, num_workers=1, batch_size=2, backend=MP, vector_kwargs={"main_share": True}
    )
    no_leaks.extend(env.pids)
    env.async_reset(0)
    env.recv()
    env.send(np.zeros(2, int))
    os.kill(env.pids[0], signal.SIGKILL)
    err, seconds = _async_until_worker_error(env, give_up=10)
    assert seconds < 5
    assert err.worker == 0 and "SIGKILL" in str(err)
    assert env.closed


def test_worker_exiting(no_leaks):
    creator = functools.partial(FaultEnv, mode="exit", where="step", at=2, fault_seed=0)
    env = vector.make(creator, num_envs=2, num_workers=2, backend=MP)
    no_leaks.extend(env.pids)
    with pytest.raises(WorkerError) as info:
        _run(env)
    assert info.value.worker == 0 and "exited with code 3" in str(info.value)


def test_hang_past_timeout(no_leaks):
    creator = functools.partial(FaultEnv, mode="hang", where="step", at=2, fault_seed=1, hang_seconds=60)
    env = vector.make(creator, num_envs=2, num_workers=2, backend=MP, vector_kwargs={"timeout": 1.0})
    no_leaks.extend(env.pids)
    start = time.monotonic()
    with pytest.raises(WorkerError) as info:
        _run(env)
    elapsed = time.monotonic() - start
    assert 0.9 < elapsed < 4
    err = info.value
    assert err.worker == 1 and err.env_index == 1 and err.cause == "timeout"
    assert "silent for 1 s" in str(err) and "timeout" in str(err)


def test_hang_in_async_batches(no_leaks):
    # batch_size < num_envs: the hung worker must not hide behind the healthy ones.
    creator = functools.partial(
        FaultEnv, mode="hang", where="step", at=3, fault_seed=0, hang_seconds=60, episode_length=1000
    )
    env = vector.make(creator, num_envs=4, num_workers=4, batch_size=1, backend=MP, vector_kwargs={"timeout": 1.0})
    no_leaks.extend(env.pids)
    env.async_reset(0)
    err, seconds = _async_until_worker_error(env, give_up=5)
    assert seconds < 4
    assert err.worker == 0 and err.env_index == 0


def test_keyboard_interrupt_then_close(no_leaks):
    creator = functools.partial(CountingEnv, delay=5.0, delay_seeds=(0,))
    env = vector.make(creator, num_envs=2, num_workers=2, backend=MP)
    no_leaks.extend(env.pids)
    env.reset(seed=0)
    previous = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            with env:
                env.step(np.zeros(2, int))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert env.closed


_SCRIPT = textwrap.dedent(
    """
    import functools, os, sys, threading, time
    import numpy as np
    from puffer_core import vector
    from puffer_core.testing import CountingEnv
    {head}
    def make():
        return vector.make(functools.partial(CountingEnv, delay={delay}), num_envs=4, num_workers=2,
                           backend="multiprocessing", vector_kwargs={vector_kwargs!r})
    {make}
    env.reset(seed=0)
    print(env.start_method, " ".join(map(str, env.pids)), flush=True)
    {tail}
    """
)
#: the vector env made in a thread that then ends (PDEATHSIG would fire with that thread)
_IN_A_THREAD = (
    "box = []; maker = threading.Thread(target=lambda: box.append(make())); maker.start(); maker.join(); env = box[0]"
)


@pytest.fixture
def start_script():
    """Starts a script holding a 2-worker vector env: (process, worker pids). A script a
    failed test leaves running is killed (its workers die with it)."""
    procs = []

    def start(tail, head="", delay=0.001, vector_kwargs=None, make="env = make()", start_method=None):
        script = _SCRIPT.format(tail=tail, head=head, delay=delay, vector_kwargs=vector_kwargs or {}, make=make)
        proc = subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, preexec_fn=default_sigint
        )
        procs.append(proc)
        method, *pids = proc.stdout.readline().split()
        assert len(pids) == 2, (method, pids)
        if start_method is not None:
            assert method == start_method
        return proc, [int(pid) for pid in pids]

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


@pytest.mark.parametrize(
    ("start_method", "head", "make"),
    [
        ("fork", "", "env = make()"),
        ("forkserver", "", "env = make()"),
        ("spawn", "", "env = make()"),
        ("fork", "", _IN_A_THREAD),
        ("forkserver", "del os.pidfd_open  # as on a kernel without pidfds: the lifeline is a pipe", "env = make()"),
    ],
    ids=["fork", "forkserver", "spawn", "fork-made-in-a-thread", "forkserver-without-pidfd"],
)
def test_workers_die_with_a_sigkilled_owner_even_in_the_middle_of_a_step(start_script, start_method, head, make):
    # Every env's step takes a minute, so the workers are busy in it (not asleep on their
    # command pipe, whose EOF would also end them) when the process that owns them dies:
    # PDEATHSIG, or the watcher on the owner's lifeline, must end them at once.
    kwargs = {"start_method": start_method}
    proc, pids = start_script("env.step(np.zeros(4, int))", head, 60.0, kwargs, make, start_method)
    time.sleep(0.5)
    assert all(map(alive, pids))  # stepping, not faulted
    proc.kill()
    proc.wait(5)
    assert wait_gone(pids, seconds=3) == []


def test_ctrl_c_in_the_parent_leaves_nothing_behind(start_script):
    shm = shm_entries()
    proc, pids = start_script("while True: env.step(np.zeros(4, int))")
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(10) != 0  # KeyboardInterrupt traceback, then exit
    assert wait_gone(pids) == []
    assert shm_entries() == shm


def test_forgotten_env_is_cleaned_at_exit(start_script):
    proc, pids = start_script("print('bye')")
    assert proc.wait(10) == 0
    assert wait_gone(pids) == []


def test_no_leaks_after_close(no_leaks, start_method):
    # no_leaks checks, after the test: no worker left (nor any child of ours), no fd, nothing
    # in /dev/shm, and the vector env's temp dir for its workers removed.
    env = vector.make(cartpole, num_envs=4, num_workers=4, backend=MP, vector_kwargs={"start_method": start_method})
    no_leaks.extend(env.pids)
    env.reset(seed=0)
    env.step(np.zeros(4, int))
    env.close()
    assert multiprocessing.active_children() == []
    assert [pid for pid in no_leaks if alive(pid)] == []  # at once, not only eventually


def test_a_dropped_vector_env_stops_its_workers_at_once(no_leaks):
    # Its parts report faults to it through weak references: no reference cycle keeps a vector
    # env nobody closed (and its workers, pipes and mapping) alive until the collector runs.
    gc.disable()
    try:
        env = vector.make(CountingEnv, num_envs=6, num_workers=2, backend=MP, vector_kwargs={"main_share": True})
        no_leaks.extend(env.pids)
        env.reset(seed=0)
        env.step(np.zeros(6, int))
        del env
        assert [pid for pid in no_leaks if alive(pid)] == []
    finally:
        gc.enable()
