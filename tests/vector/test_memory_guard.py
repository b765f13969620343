"""puffer_core.vector.memory_guard: many envs are measured before they are built and refused, in one line, when
they would not fit; real NetHack is the env measured (a few MiB each, its game allocated at its first reset)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from puffer_core import vector
from puffer_core.env.factory import EnvFactory
from puffer_core.errors import APIUsageError
from puffer_core.vector import memory_guard
from puffer_core.vector.memory_guard import CHECK_FROM, OVERRIDE, available_memory, check_memory, estimate_memory

pytest.importorskip("nle")


def test_one_nethack_env_is_measured_at_a_few_mebibytes():
    total, per_env, buffers = estimate_memory(EnvFactory("nethack/score"), 1024)
    assert 1 * 2**20 < per_env < 32 * 2**20, per_env  # its game's state, allocated at reset
    assert buffers > 1024 and total == per_env * 1024 + buffers


def test_the_memory_available_is_memavailable_or_a_tighter_container_limit():
    available, source = available_memory()
    assert available > 0 and source in ("MemAvailable", "this container's memory limit")
    with open("/proc/meminfo") as meminfo:
        free = next(int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:"))
    assert available <= free * 1.5


def test_envs_that_would_not_fit_are_refused_in_one_line_before_any_is_built(monkeypatch):
    monkeypatch.setattr(memory_guard, "available_memory", lambda: (2**30, "MemAvailable"))  # a 1 GiB machine
    with pytest.raises(APIUsageError) as caught:
        check_memory(EnvFactory("nethack/score"), 4096, environ={})
    message = str(caught.value)
    assert message.startswith("num_envs=4,096 of nethack/score would take about ") and "\n" not in message
    assert "per env, measured" in message and "1.0 GiB is available (MemAvailable)" in message
    assert f"or set {OVERRIDE}=1 to build them anyway" in message and "fit)" in message
    check_memory(EnvFactory("nethack/score"), 4096, environ={OVERRIDE: "1"})  # asked for: not checked
    check_memory(EnvFactory("nethack/score"), CHECK_FROM - 1, environ={})  # a few envs: not measured


def test_vector_make_refuses_65536_nethack_envs_at_once():
    """The issue's example: about 200 GiB asked for on this 24 GiB machine, refused in a second or two."""
    probe = ("import puffer_core.vector as v\ntry:\n    v.make('nethack/score', num_envs=65536)\n"
             "except Exception as e:\n    print(type(e).__name__, e)\n")  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin"})  # fmt: skip
    assert proc.stdout.startswith("APIUsageError num_envs=65,536 of nethack/score would take about "), proc.stdout
    assert "GiB is available" in proc.stdout


def test_a_few_envs_build_without_a_measurement():
    with vector.make("classic/cartpole", num_envs=8) as envs:
        assert envs.num_envs == 8
