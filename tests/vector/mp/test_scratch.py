"""The workers' temp dir (puffer_core/vector/mp/scratch.py): removed when the vector env closes
or fails, and, where its owner was killed outright, swept by the next vector env; never one of
a live process, of another user or of another pid namespace."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

from puffer_core import vector
from puffer_core.errors import WorkerError
from puffer_core.testing import CountingEnv
from puffer_core.vector.mp import scratch
from puffer_core.vector.mp.scratch import PREFIX, owner_gone, process_start, sweep_stale

NAMESPACE = os.stat("/proc/self/ns/pid").st_ino


def folder(parent, pid: int, start: int, namespace: int = NAMESPACE, tail: str = "abcd1234") -> str:
    """A folder named as ``make_scratch`` names one, with a file inside."""
    path = os.path.join(parent, f"{PREFIX}{namespace}-{pid}-{start}-{tail}")
    os.mkdir(path, 0o700)
    with open(os.path.join(path, "game.txt"), "w") as file:
        file.write("left behind")
    return path


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def test_only_folders_of_this_users_dead_processes_are_swept(tmp_path, sleeper):
    start = process_start(sleeper.pid)
    assert start is not None
    dead = folder(tmp_path, dead_pid(), 12345)
    reused = folder(tmp_path, sleeper.pid, start + 1, tail="reused00")  # its pid, another process's start
    live = folder(tmp_path, sleeper.pid, start, tail="live0000")
    mine = folder(tmp_path, os.getpid(), process_start(os.getpid()), tail="mine0000")
    elsewhere = folder(tmp_path, dead_pid(), 1, namespace=NAMESPACE + 1, tail="contain0")  # a container's pids
    unknown_start = folder(tmp_path, sleeper.pid, 0, tail="nostart0")
    other = (tmp_path / "puffer-vector-notours").as_posix()
    os.mkdir(other)
    assert sorted(sweep_stale(str(tmp_path))) == sorted([dead, reused])
    assert sorted(os.listdir(tmp_path)) == sorted(
        os.path.basename(p) for p in (live, mine, elsewhere, unknown_start, other)
    )


def test_a_zombie_owner_is_gone(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    start = process_start(proc.pid)
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    try:
        assert owner_gone(NAMESPACE, proc.pid, start)
    finally:
        proc.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's folder needs root")
def test_another_users_folder_and_a_symlink_are_left_alone(tmp_path):
    theirs = folder(tmp_path, dead_pid(), 1)
    os.chown(theirs, 65534, 65534)
    target = tmp_path / "target"
    target.mkdir()
    link = tmp_path / f"{PREFIX}{NAMESPACE}-{dead_pid()}-1-symlink0"
    link.symlink_to(target)
    assert sweep_stale(str(tmp_path)) == []
    assert os.path.isdir(theirs) and link.is_symlink() and target.is_dir()


def test_the_folder_goes_when_a_fault_closes_the_vector_env(no_leaks):
    envs = vector.make(CountingEnv, num_envs=2, num_workers=2, backend="multiprocessing")
    no_leaks.extend(envs.pids)
    made = [p for p in os.listdir(tempfile.gettempdir()) if p.startswith(PREFIX)]
    assert len(made) == 1 and scratch._NAME.fullmatch(made[0])
    envs.reset(seed=0)
    os.kill(envs.pids[0], signal.SIGKILL)
    with pytest.raises(WorkerError, match="SIGKILL"):
        for _ in range(50):
            envs.step(np.zeros(2, int))
    assert not os.path.exists(os.path.join(tempfile.gettempdir(), made[0]))  # no_leaks checks again


KILLED_OWNER = """
import multiprocessing.util, os, signal, tempfile
from puffer_core import vector
from puffer_core.testing import CountingEnv

# The fork server's socket goes in multiprocessing's temp dir: made first, under the short TMPDIR
# the test gives (pytest-xdist's temp dirs make the socket path too long for AF_UNIX).
multiprocessing.util.get_temp_dir()
tempfile.tempdir = {temp!r}
envs = vector.make(CountingEnv, num_envs=2, num_workers=2, backend="multiprocessing")
envs.reset(seed=0)
print([name for name in os.listdir({temp!r})], flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no close, no finalizer: what the OOM killer does
"""


def test_a_killed_owners_folder_is_swept_by_the_next_vector_env(no_leaks):
    temp = tempfile.gettempdir()  # no_leaks's own temp dir
    short = tempfile.mkdtemp(prefix="ptk-", dir="/tmp")  # the killed owner's multiprocessing files
    try:
        proc = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(KILLED_OWNER.format(temp=temp))],
            capture_output=True, text=True, env={**os.environ, "TMPDIR": short},
        )  # fmt: skip
    finally:
        shutil.rmtree(short, ignore_errors=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    left = [name for name in os.listdir(temp) if name.startswith(PREFIX)]
    assert len(left) == 1 and left[0] in proc.stdout
    envs = vector.make(CountingEnv, num_envs=2, num_workers=2, backend="multiprocessing")
    no_leaks.extend(envs.pids)
    try:
        now = [name for name in os.listdir(temp) if name.startswith(PREFIX)]
        assert left[0] not in now and len(now) == 1  # the dead one swept, its own made
    finally:
        envs.close()
