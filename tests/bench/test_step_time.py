"""Where a step's time goes (puffer_core.bench.step_time): the layers of one env's step, and
the cores' time per step under a vector env."""

from __future__ import annotations

import json
import os
import time

import gymnasium
import pytest
from plugin_site import run_puffer

from puffer_core.bench import step_time
from puffer_core.bench.step_time import core_budget, fastest_setting, layer_times, process_cpu_seconds

CARTPOLE_LEVELS = ["send/recv", "EnvGroup", "GymnasiumEmulator", "EpisodeStats", "TimeLimit", "OrderEnforcing",
                   "CartPoleEnv"]  # fmt: skip


class Burner(gymnasium.Wrapper):
    """A layer that burns 300 µs of this thread's CPU on every step: the cost the bench must pin on it."""

    def step(self, action):
        end = time.thread_time() + 300e-6
        while time.thread_time() < end:
            pass
        return self.env.step(action)


def test_every_layer_of_cartpoles_step_is_a_level_top_first():
    layers = layer_times("classic/cartpole", steps=2000, rounds=4)
    assert [layer["layer"] for layer in layers] == CARTPOLE_LEVELS
    assert all(layer["level_us"] > 0 for layer in layers)
    assert layers[-1]["own_us"] == pytest.approx(layers[-1]["level_us"])
    assert layers[-1]["what"] == "the env itself (CartPoleEnv)"
    assert all(layer["spread_us"] >= 0 for layer in layers)
    assert layers[2]["what"].startswith("emulation") and layers[3]["what"].startswith("EpisodeStats")


def test_a_layers_own_time_lands_on_that_layer():
    def creator():
        return Burner(gymnasium.make("CartPole-v1"))

    from puffer_core import vector

    original = vector.make

    def make_with_burner(env, **kwargs):
        return original(creator, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(step_time.vector, "make", make_with_burner)
        layers = layer_times("classic/cartpole", steps=400, rounds=4)
    names = [layer["layer"] for layer in layers]
    assert "Burner" in names
    heaviest = max(layers, key=lambda layer: layer["own_us"])
    assert heaviest["layer"] == "Burner"  # every other layer costs microseconds, this one hundreds


def test_a_multi_agent_env_has_no_layers():
    assert layer_times("pettingzoo/rps", steps=200, rounds=2) == []


def test_process_cpu_seconds_counts_this_process():
    before = process_cpu_seconds(os.getpid())
    end = time.process_time() + 0.1
    while time.process_time() < end:
        pass
    assert process_cpu_seconds(os.getpid()) - before > 0.02  # the clock ticks every 10 ms


def test_the_cores_time_of_a_setting_adds_up():
    budget = core_budget("classic/cartpole", 4, [("mp", {"backend": "multiprocessing", "num_workers": 2})], 0.3)
    assert budget["num_envs"] == 4 and budget["cpus"] >= 1 and budget["serial_work_us"] > 0
    (row,) = budget["settings"]
    assert row["name"] == "mp" and row["steps_per_second"] > 0
    assert row["workers_us"] > 0  # the workers stepped the envs: their CPU is counted
    used = row["main_us"] + row["workers_us"]
    assert row["added_us"] == pytest.approx(used - row["work_us"])
    assert row["idle_us"] == pytest.approx(max(0.0, row["cores_us"] - used))


def test_the_fastest_multiprocessing_setting_is_budgeted_as_it_was_made():
    rows = [
        {"kind": "raw", "backend": "raw", "name": "raw", "sps": 9e9},
        {"kind": "puffer", "backend": "serial", "name": "Serial", "sps": 10.0, "num_workers": 1, "batch_size": 8},
        {"kind": "puffer", "backend": "multiprocessing", "name": "Multiprocessing w=1+main b=4", "sps": 30.0,
         "num_workers": 1, "batch_size": 4, "vector_kwargs": {"main_share": True}},
        {"kind": "puffer", "backend": "multiprocessing", "name": "w=2", "sps": 20.0, "num_workers": 2,
         "batch_size": 8},
    ]  # fmt: skip
    made = {"backend": "multiprocessing", "num_workers": 1, "batch_size": 4}
    assert fastest_setting(rows) == [  # and the same sleeping at once, as on a semaphore
        ("Multiprocessing w=1+main b=4", {**made, "vector_kwargs": {"main_share": True}}),
        ("Multiprocessing w=1+main b=4 spin_us=0", {**made, "vector_kwargs": {"main_share": True, "spin_us": 0}}),
    ]
    assert fastest_setting(rows[:2]) == []  # Serial fastest: no process to budget


def test_puffer_bench_step_time_prints_both_tables_and_json():
    proc = run_puffer(None, "bench", "classic/cartpole", "--step-time", "--num-envs", "2", "--seconds", "0.2")
    assert proc.returncode == 0, proc.stderr
    assert "| the env itself (CartPoleEnv) |" in proc.stdout and "| Multiprocessing (defaults) |" in proc.stdout
    proc = run_puffer(None, "bench", "classic/cartpole", "--step-time", "--num-envs", "2", "--seconds", "0.2",
                      "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    section = json.loads(proc.stdout)
    assert section["env"] == "classic/cartpole" and [layer["layer"] for layer in section["layers"]] == CARTPOLE_LEVELS
    budgeted = [row["name"] for row in section["cores"]["settings"]]
    assert budgeted == ["Multiprocessing (defaults)", "Multiprocessing b=1"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--step-time"], "give an ENV_ID"),
        (["classic/cartpole", "--step-time", "--standard", "out"], "--step-time measures one env"),
    ],
)
def test_step_time_is_refused_without_one_env(args, message):
    proc = run_puffer(None, "bench", *args)
    assert proc.returncode == 2 and message in proc.stderr
