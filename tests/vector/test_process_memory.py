"""The memory of this process and its workers (puffer_core.vector.process_memory): /proc,
then psutil, then nothing."""

from __future__ import annotations

import os

import pytest

from puffer_core import vector
from puffer_core.vector import process_memory


def test_memory_of_this_process_and_of_workers():
    mb, source = process_memory.memory_mb(os.getpid())
    assert mb > 1 and source in ("pss", "rss")
    before = process_memory.child_pids()
    with vector.make("classic/cartpole", num_envs=2, num_workers=2, backend="multiprocessing") as envs:
        # The workers, and the fork server and resource tracker if this is the first vector env.
        started = process_memory.child_pids() - before
        assert set(envs.pids) <= started and len(started) <= 4
        assert all(process_memory.memory_mb(pid)[0] > 1 for pid in envs.pids)


def test_memory_falls_back_to_psutil_then_to_nothing(monkeypatch):
    import psutil

    def no_proc(path, *args, **kwargs):
        raise FileNotFoundError(path)

    monkeypatch.setattr(process_memory, "open", no_proc, raising=False)
    mb, source = process_memory.memory_mb(os.getpid())
    assert source == "rss" and mb == pytest.approx(psutil.Process().memory_info().rss / 2**20, rel=0.2)
    monkeypatch.setitem(__import__("sys").modules, "psutil", None)  # as if not installed
    assert process_memory.memory_mb(os.getpid()) is None
    assert process_memory.ram_per_env(4, set()) == (None, None)
