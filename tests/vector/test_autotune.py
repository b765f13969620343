"""`puffer_core.vector.autotune` and `puffer autotune`: the grid, the rows, the best and its
make(...) call, on classic/cartpole with a tiny budget. Structure only: speed is the
benchmark's business, never asserted here."""

from __future__ import annotations

import ast
import json
import os

import numpy as np
import pytest
from plugin_site import run_puffer

import puffer_core
from puffer_core import vector
from puffer_core.env.factory import has_native_batches
from puffer_core.errors import APIUsageError, UnknownEnvError
from puffer_core.vector import autotuner
from puffer_core.vector.autotuner import make_call
from puffer_core.vector.settings import Setting, ray_grid, settings_grid

ROW_KEYS = {"name", "backend", "num_workers", "batch_size", "main_share", "sps", "ram_per_env_mb", "reset_fraction"}


@pytest.fixture(scope="module")
def tuned():
    calls = []
    result = vector.autotune(
        "classic/cartpole",
        num_envs=4,
        budget=3.0,
        cpus=2,
        verbose=False,
        progress=lambda name, done, total: calls.append((name, done, total)),
    )
    return result, calls


def test_every_row_has_steps_memory_and_resets(tuned):
    result, _ = tuned
    # CartPole has native batches (gymnasium's numpy vector env): both ways are measured.
    assert [row["name"] for row in result["rows"]] == [s.name for s in settings_grid(4, cpus=2, native=True)]
    assert {"Serial native", "Multiprocessing w=2 b=4 native"} <= {row["name"] for row in result["rows"]}
    for row in result["rows"]:
        assert ROW_KEYS <= set(row), row
        assert row["error"] is None, row
        assert row["sps"] > 0 and len(row["sps_rounds"]) == 2  # two interleaved rounds, the best kept
        assert row["sps"] == max(row["sps_rounds"])
        assert row["ram_per_env_mb"] > 0 and row["ram_source"] in ("pss", "rss")
        assert 0 < row["reset_fraction"] < 0.5  # random CartPole episodes last about 20 steps


def test_the_best_is_the_fastest_row(tuned):
    result, _ = tuned
    fastest = max(result["rows"], key=lambda row: row["sps"])
    assert result["best"] == fastest and fastest["ratio_vs_best"] == 1.0
    assert all(0 < row["ratio_vs_best"] <= 1.0 for row in result["rows"])
    setting = next(s for s in settings_grid(4, cpus=2, native=True) if s.name == fastest["name"])
    assert result["make_kwargs"] == setting.make_kwargs(4)
    assert (result["env"], result["num_envs"], result["cpus"], result["rounds"]) == ("classic/cartpole", 4, 2, 2)


def test_the_make_call_builds_a_working_vector_env(tuned):
    result, _ = tuned
    call = ast.parse(result["make_call"], mode="eval").body
    assert isinstance(call, ast.Call) and ast.unparse(call.func) == "puffer_core.vector.make"
    assert [ast.literal_eval(arg) for arg in call.args] == ["classic/cartpole"]
    assert {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords} == result["make_kwargs"]
    envs = eval(result["make_call"], {"puffer_core": puffer_core})  # what a user pastes
    try:
        envs.async_reset(0)
        obs = envs.recv()[0]
        envs.send(np.zeros(envs.batch_size, dtype=np.int64))
        assert envs.recv()[0].shape == obs.shape == (envs.batch_size, 4)
    finally:
        envs.close()


def test_progress_counts_every_measurement_once(tuned):
    result, calls = tuned
    total = len(result["rows"]) * 2
    assert [c[1] for c in calls] == list(range(total + 1))
    assert {c[2] for c in calls} == {total} and calls[-1][0] == "done"


def test_verbose_prints_the_table_and_the_call(tuned, capsys):
    result, _ = tuned
    autotuner.print_result(result)  # what verbose=True prints
    out = capsys.readouterr().out
    lines = out.rstrip().splitlines()
    assert lines[0] == "puffer autotune classic/cartpole (4 envs, 2 CPUs)"
    assert lines[1].split() == ["backend", "workers", "batch", "steps/s", "vs", "best", "RAM/env", "MB", "resets"]
    assert len(lines) == 2 + len(result["rows"]) + 4 and lines[-1] == result["make_call"]


def test_table_lists_every_row_fastest_first_and_marks_the_best(tuned):
    result, _ = tuned
    rows = autotuner.table_rows(result)
    assert [row["name"] for row, _ in rows] == [r["name"] for r in sorted(result["rows"], key=lambda r: -r["sps"])]
    assert all(len(cells) == len(autotuner.COLUMNS) for _, cells in rows)
    assert [cells[4] for _, cells in rows].count("best") == 1 and rows[0][1][4] == "best"
    assert "1+main" in [cells[1] for _, cells in rows]
    widths = {len(line) for line in autotuner.table_lines(result)[1:]}
    assert len(autotuner.table_lines(result)) == 2 + len(rows) and max(widths) > 40


def test_make_call_for_a_creator_and_env_kwargs():
    def make_env(**kwargs):
        raise AssertionError("never built")

    kwargs = Setting("serial", 1, 8).make_kwargs(8)
    call = make_call(make_env, kwargs, {"frameskip": 4, "name": 'a "quoted" é', "sizes": (1,), "flags": [True, None]})
    parsed = ast.parse(call, mode="eval").body
    assert ast.unparse(parsed.args[0]) == "make_env"
    values = {kw.arg: ast.literal_eval(kw.value) for kw in parsed.keywords}
    assert values == {**kwargs, "frameskip": 4, "name": 'a "quoted" é', "sizes": (1,), "flags": [True, None]}


def test_a_failing_setting_is_reported_and_the_rest_still_measured():
    main_pid = os.getpid()

    def only_in_the_main_process():
        import gymnasium

        if os.getpid() != main_pid:
            raise RuntimeError("no envs in worker processes")
        return gymnasium.make("CartPole-v1")

    result = vector.autotune(only_in_the_main_process, num_envs=2, budget=1.0, cpus=2, verbose=False)
    rows = {row["name"]: row for row in result["rows"]}
    assert result["env"].endswith("only_in_the_main_process") and result["best"]["name"] == "Serial"
    assert rows["Serial"]["sps"] > 0
    workers_only = rows["Multiprocessing w=2 b=2"]
    assert workers_only["sps"] is None and "no envs in worker processes" in workers_only["error"]
    assert workers_only["ratio_vs_best"] is None and workers_only["sps_rounds"] == []


def test_an_env_that_cannot_be_built_raises_at_once():
    with pytest.raises(UnknownEnvError, match="classic/cartpol"):
        vector.autotune("classic/cartpol", num_envs=2, budget=1.0, verbose=False)
    with pytest.raises(APIUsageError, match="does not take kwarg foo"):
        vector.autotune("classic/cartpole", num_envs=2, budget=1.0, verbose=False, foo=1)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"budget": 0}, r"budget \(seconds\) must be a number in \(0, "),
        ({"budget": float("nan")}, r"budget \(seconds\) must be a number in \(0, "),
        ({"rounds": 1}, r"rounds \(interleaved, against noise\) must be ≥ 2, got 1"),
        ({"num_envs": 0}, "num_envs must be ≥ 1, got 0"),
        ({"cpus": True}, "cpus must be an int ≥ 1, got True"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(APIUsageError, match=message):
        vector.autotune("classic/cartpole", **{"num_envs": 2, "verbose": False, **kwargs})


def test_cli_json_prints_the_rows_and_the_best():
    proc = run_puffer(None, "autotune", "classic/cartpole", "--num-envs", "2", "--seconds", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [row["name"] for row in data["rows"]] == [s.name for s in settings_grid(2, native=True)]
    assert data["best"]["sps"] == max(row["sps"] for row in data["rows"])
    assert data["make_call"].startswith('puffer_core.vector.make("classic/cartpole", num_envs=2, ')
    assert proc.stderr == ""  # no progress bar in a pipe


@pytest.mark.slow
def test_cli_table_ends_with_the_make_call():
    proc = run_puffer(
        None, "autotune", "classic/cartpole", "--num-envs", "2", "--seconds", "1", "--kwarg", "sutton_barto_reward=true"
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.rstrip().splitlines()
    assert "puffer autotune classic/cartpole (2 envs" in proc.stdout and lines[-2] == "import puffer_core.vector"
    assert lines[-1].startswith('puffer_core.vector.make("classic/cartpole", num_envs=2, ')
    assert lines[-1].endswith(", sutton_barto_reward=True)")


@pytest.mark.ray
@pytest.mark.ray_cluster
def test_cli_tunes_the_ray_backend_on_a_cluster(ray_cluster):
    args = ["autotune", "classic/cartpole", "--backend", "ray", "--ray-address", ray_cluster.address]
    args += ["--placement", "spread", "--num-envs", "3", "--seconds", "10", "--json"]
    proc = run_puffer(None, *args, extra_env={"RAY_AUTH_MODE": "token"}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    cluster = {"address": ray_cluster.address, "placement": "spread"}
    assert [row["name"] for row in data["rows"]] == [s.name for s in ray_grid(3, vector_kwargs=cluster)]
    assert all(row["error"] is None and row["sps"] > 0 for row in data["rows"]), data["rows"]
    assert [row["ram_per_env_mb"] for row in data["rows"][1:]] == [None] * (len(data["rows"]) - 1)
    # a Ray setting's call to paste (when one is the best) names the cluster and the placement
    call = make_call("classic/cartpole", ray_grid(3, vector_kwargs=cluster)[1].make_kwargs(3))
    assert call.endswith(f'backend="ray", vector_kwargs={{"address": "{ray_cluster.address}", "placement": "spread"}})')


def test_a_native_setting_makes_a_call_that_steps_native_batches():
    setting = next(s for s in settings_grid(4, cpus=2, native=True) if s.native and s.backend == "multiprocessing")
    kwargs = setting.make_kwargs(4)
    assert kwargs["vector_kwargs"] == {"native": True} and setting.name.endswith(" native")
    call = make_call("classic/cartpole", kwargs, {})
    assert "vector_kwargs={'native': True}" in call or 'vector_kwargs={"native": True}' in call
    with vector.make("classic/cartpole", **kwargs) as envs:
        envs.reset(seed=0)
        envs.step(np.zeros(4, np.int64))


def test_an_env_without_native_batches_is_measured_one_env_at_a_time():
    assert not has_native_batches("classic/acrobot") and has_native_batches("classic/cartpole")
    assert not any(s.native for s in settings_grid(4, cpus=2))
