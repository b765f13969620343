"""Fixtures of the vector tests: the Multiprocessing start methods and a check that nothing is
left behind (tests/conftest.py fails any test whose code forks a process running threads)."""

from __future__ import annotations

import gc
import multiprocessing
import multiprocessing.forkserver
import os
import tempfile
import time

import pytest
from fork_guard import forking_on_purpose
from process_checks import alive, live_children, shm_entries

START_METHODS = ["fork", "forkserver", "spawn"]


@pytest.fixture(params=START_METHODS)
def start_method(request):
    """Each Multiprocessing start method in turn (``vector_kwargs={"start_method": ...}``)."""
    if request.param == "fork":
        with forking_on_purpose():
            yield request.param
    else:
        yield request.param


@pytest.fixture
def no_leaks(tmp_path, monkeypatch):
    """Yields a list the test adds worker pids to (replaced ones too). Afterwards every one of
    them is gone, this process has no child it did not have before, and /dev/shm, its file
    descriptors and its temp dir (where the vector env keeps the workers' own) are as they were.

    The fork server and resource tracker are multiprocessing's, one each per interpreter, and
    live as long as it: they are started first, so their pipes are not counted as a test's."""
    multiprocessing.forkserver.ensure_running()
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    shm = shm_entries()
    fds = len(os.listdir("/proc/self/fd"))
    children = live_children()
    pids: list[int] = []
    yield pids
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (multiprocessing.active_children() or any(map(alive, pids))):
        time.sleep(0.05)
    # A WorkerError's traceback holds views of the shared mapping in a reference cycle, and so
    # (before Python 3.13's trackfd) the mapping's dup of its memfd: the collector frees them.
    gc.collect()
    assert [pid for pid in pids if alive(pid)] == []
    assert multiprocessing.active_children() == []
    assert live_children() <= children
    assert shm_entries() == shm
    assert len(os.listdir("/proc/self/fd")) <= fds
    assert [p.name for p in temp.iterdir() if p.name.startswith("puffer-vector-")] == []
