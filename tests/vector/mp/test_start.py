"""Multiprocessing's start methods: the default is safe where threads run, restarts never fork
a process with threads, and a script that forgot its ``__main__`` guard is told so.

The backend's behaviours under each start method (reset, step, async batches, calls,
restarts, close, a SIGKILLed owner) are the ``start_method``-parametrized tests of
test_vector.py, test_vector_calls.py, test_vector_restart.py and test_vector_faults.py.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest
from fork_guard import forking_on_purpose, is_fork_warning
from process_checks import parent_of

from puffer_core import vector
from puffer_core.errors import APIUsageError
from puffer_core.testing import CountingEnv
from puffer_core.vector.mp.start import default_start_method

MP = "multiprocessing"


@pytest.mark.parametrize(
    ("threads", "platform", "version", "method"),
    [
        (1, "linux", (3, 13), "fork"),
        (2, "linux", (3, 13), "forkserver"),  # torch's pool, Ray's threads, a notebook kernel's
        (1, "linux", (3, 14), "forkserver"),  # CPython's own default from 3.14
        (1, "darwin", (3, 11), "spawn"),  # fork is not safe on macOS even without threads
        (3, "darwin", (3, 13), "spawn"),
    ],
)
def test_the_default_start_method(threads, platform, version, method):
    assert default_start_method(threads, platform, version) == method


@pytest.fixture
def running_thread():
    """A real thread, alive for the whole test."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="test-thread")
    thread.start()
    yield thread
    stop.set()
    thread.join(5)


def test_with_a_thread_running_the_default_is_forkserver_and_nothing_forks(running_thread):
    assert running_thread.is_alive()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with vector.make(CountingEnv, num_envs=2, num_workers=2, backend=MP) as envs:
            assert envs.start_method == "forkserver"
            # Forked by the fork server, not by this process (Python 3.12+ would have warned here).
            assert all(parent_of(pid) != os.getpid() for pid in envs.pids)
            envs.reset(seed=0)
            obs, *_ = envs.step(np.ones(2, int))
            np.testing.assert_array_equal(obs[:, 0], [1, 1])
    assert [str(w.message) for w in caught if is_fork_warning(w)] == []


def _run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


def test_without_threads_the_default_is_fork():
    # numpy's OpenBLAS keeps a pool of threads on a machine with several cores: with one BLAS
    # thread (and torch's, Ray's... never imported) the process is single-threaded.
    single = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    done = _run_python(
        """
        import os
        from puffer_core import vector
        from puffer_core.testing import CountingEnv
        threads = len(os.listdir("/proc/self/task"))
        with vector.make(CountingEnv, num_envs=2, num_workers=1, backend="multiprocessing") as envs:
            print(threads, envs.start_method)
        """,
        **single,
    )
    assert done.returncode == 0, done.stderr
    threads, method = done.stdout.split()
    assert threads == "1"
    assert method == ("forkserver" if sys.version_info >= (3, 14) else "fork")


def test_a_fork_env_restarts_its_workers_from_the_fork_server_once_threads_run(no_leaks, running_thread):
    # The replacement comes in the middle of a run, when torch's or Ray's threads are up: it
    # must not fork this process then, whatever the env was started with.
    creator = functools.partial(CountingEnv, episode_length=100)
    with forking_on_purpose():  # the test asks for fork; the restart below is the backend's own doing
        envs = vector.make(
            creator, num_envs=2, num_workers=2, backend=MP, on_fault="restart", vector_kwargs={"start_method": "fork"}
        )
    with envs:
        no_leaks.extend(envs.pids)
        assert envs.start_method == "fork"
        assert [parent_of(pid) for pid in envs.pids] == [os.getpid()] * 2
        envs.reset(seed=0)
        os.kill(envs.pids[0], signal.SIGKILL)
        time.sleep(0.2)
        obs, _, _, truncations, infos = envs.step(np.ones(2, int))  # forks here would fail the test (conftest)
        no_leaks.extend(envs.pids)
        assert truncations.tolist() == [True, False] and infos[0]["fault"]["cause"] == "killed by signal SIGKILL"
        assert parent_of(envs.pids[0]) != os.getpid()  # from the fork server
        assert parent_of(envs.pids[1]) == os.getpid()  # the other worker is the one forked at the start
        obs, *_ = envs.step(np.ones(2, int))
        np.testing.assert_array_equal(obs[:, 0], [1, 2])  # the replacement steps its fresh env


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_an_unguarded_script_is_told_to_guard_its_code_first_and_briefly(tmp_path, method):
    # A forkserver or spawn worker imports the main module: without the guard, the script's
    # code would run again there (and start workers of its own). Each worker exits quietly;
    # the user reads the fix on the first line, not after a traceback per worker.
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            f"""
            from puffer_core import vector
            from puffer_core.testing import CountingEnv
            print("making", flush=True)
            envs = vector.make(CountingEnv, num_envs=2, num_workers=2, backend="multiprocessing",
                               vector_kwargs={{"start_method": "{method}"}})
            print("made", flush=True)
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "made" not in done.stdout.split()  # neither in the script nor in its workers, which stopped at the refusal
    fix = "train.py makes a vector env at import time, and every worker process imports the script again: "
    fix += "put the script's code under `if __name__ == '__main__':`"
    lines = done.stderr.splitlines()
    assert lines[0] == f"error: {fix}", done.stderr
    assert lines[-1].startswith(f"puffer_core.errors.WorkerError: {fix} (Multiprocessing: {method} worker ")
    assert len(lines) < 15 and done.stderr.count("Traceback") == 1, done.stderr


def test_a_vector_env_made_while_another_process_bootstraps_is_refused(tmp_path):
    # The user's own spawn child importing an unguarded script: not our worker, so an error it can catch.
    script = tmp_path / "own.py"
    script.write_text(
        textwrap.dedent(
            """
            import multiprocessing
            from puffer_core import vector
            from puffer_core.testing import CountingEnv
            if multiprocessing.current_process().name == "mine":
                try:
                    vector.make(CountingEnv, num_envs=2, num_workers=1, backend="multiprocessing")
                except Exception as exc:
                    print("refused:", exc, flush=True)
            if __name__ == "__main__":
                child = multiprocessing.get_context("spawn").Process(target=print, name="mine")
                child.start()
                child.join()
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "refused: a vector env was made while a worker process was importing the main module" in done.stdout


def test_a_creator_whose_module_a_fresh_process_cannot_import_is_named_with_the_fix(tmp_path):
    # A module that lives only in this process's sys.modules: cloudpickle sends its creator by
    # reference, and the spawn worker cannot import it. A lambda of the script itself would go by value.
    script = tmp_path / "made_here.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, types
            from puffer_core import vector
            from puffer_core.errors import WorkerError
            from puffer_core.testing import CountingEnv

            if __name__ == "__main__":
                module = types.ModuleType("only_in_memory")
                module.CountingEnv = CountingEnv
                exec("def creator():\\n    return CountingEnv()", module.__dict__)
                sys.modules["only_in_memory"] = module
                try:
                    vector.make(module.creator, num_envs=2, num_workers=1, backend="multiprocessing",
                                vector_kwargs={"start_method": "spawn"})
                except WorkerError as exc:
                    print("refused:", exc, flush=True)
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "No module named 'only_in_memory'" in done.stderr  # the worker's own traceback
    refused = done.stdout.strip()
    assert refused.startswith("refused: Multiprocessing: worker 0 ") and "while starting" in refused, refused
    assert "the modules the creator uses must import in a fresh process" in refused
    assert "vector_kwargs={'start_method': 'fork'}" in refused


def test_an_unknown_start_method_names_the_available_ones():
    message = r"^vector_kwargs\['start_method'\]='threads' is not available here; use one of 'fork'"
    with pytest.raises(APIUsageError, match=message):
        vector.make(CountingEnv, num_envs=2, backend=MP, vector_kwargs={"start_method": "threads"})
