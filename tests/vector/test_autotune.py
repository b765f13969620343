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
from rich.console import Console

import puffer_core
from puffer_core import vector
from puffer_core.bench import settings
from puffer_core.errors import APIUsageError, UnknownEnvError
from puffer_core.vector import autotuner
from puffer_core.vector.autotuner import Setting, make_call, settings_grid

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
    assert [row["name"] for row in result["rows"]] == [s.name for s in settings_grid(4, cpus=2)]
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
    setting = next(s for s in settings_grid(4, cpus=2) if s.name == fastest["name"])
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
    autotuner._print_result(result)
    out = capsys.readouterr().out
    assert "puffer autotune classic/cartpole" in out and "RAM/env MB" in out and "best" in out
    assert out.rstrip().splitlines()[-1] == result["make_call"]


def test_render_table_lists_every_row(tuned):
    result, _ = tuned
    console = Console(width=160, record=True)
    console.print(autotuner.render_table(result))
    text = console.export_text()
    assert autotuner.render_table(result).row_count == len(result["rows"])
    assert "1+main" in text and "resets" in text


def test_grid_holds_every_bench_setting_and_only_valid_ones():
    for num_envs, cpus in ((16, 2), (8, 2), (16, 8), (5, 4), (2, 2), (1, 2)):
        grid = settings_grid(num_envs, cpus)
        assert grid[0] == Setting("serial", 1, num_envs) and len(set(grid)) == len(grid)
        mp = {(s.num_workers, s.batch_size) for s in grid if s.backend != "serial" and not s.main_share}
        main = {(s.num_workers, s.batch_size) for s in grid if s.main_share}
        assert set(settings.mp_settings(num_envs, cpus)) <= mp
        assert set(settings.main_share_settings(num_envs, cpus)) <= main
        for s in grid[1:]:
            vector.check_counts(num_envs, s.num_workers + s.main_share, s.batch_size, "multiprocessing")
            assert s.num_workers <= num_envs and s.batch_size in (num_envs, num_envs // 2)
            if s.main_envs is not None:  # one env lighter than the even share
                assert s.main_share and s.batch_size == num_envs
                assert s.main_envs == num_envs // (s.num_workers + 1) - 1 and s.make_kwargs(num_envs)[
                    "vector_kwargs"
                ] == {"main_share": s.main_envs}
            elif s.main_share:
                assert s.make_kwargs(num_envs)["vector_kwargs"] == {"main_share": True}
            else:  # the default needs no saying: the pasted call stays short
                assert "vector_kwargs" not in s.make_kwargs(num_envs)
    names = [s.name for s in settings_grid(16, cpus=8)]
    assert "Multiprocessing w=7 b=16" in names and "Multiprocessing w=7+main b=16" in names  # cores - 1
    assert "Multiprocessing w=16 b=8" in names  # 2 × cores
    assert "Multiprocessing w=1+main(7) b=16" in [s.name for s in settings_grid(16, cpus=2)]


def test_default_num_envs_follows_the_standard_bench():
    assert autotuner.default_num_envs("nethack/score") == 8
    assert autotuner.default_num_envs("atari/breakout") == 8
    assert autotuner.default_num_envs("classic/cartpole") == 16
    assert autotuner.default_num_envs(lambda: None) == 16


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
        ({"budget": 0}, "budget must be a positive number of seconds"),
        ({"budget": float("nan")}, "budget must be a positive number of seconds"),
        ({"rounds": 1}, "rounds must be an int ≥ 2"),
        ({"num_envs": 0}, "num_envs must be an int ≥ 1"),
        ({"cpus": True}, "cpus must be an int ≥ 1"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(APIUsageError, match=message):
        vector.autotune("classic/cartpole", **{"num_envs": 2, "verbose": False, **kwargs})


def test_memory_of_this_process_and_of_workers():
    mb, source = autotuner.memory_mb(os.getpid())
    assert mb > 1 and source in ("pss", "rss")
    before = autotuner.child_pids()
    with vector.make("classic/cartpole", num_envs=2, num_workers=2, backend="multiprocessing") as envs:
        workers = autotuner.child_pids() - before
        assert workers == set(envs.pids)
        assert all(autotuner.memory_mb(pid)[0] > 1 for pid in workers)


def test_memory_falls_back_to_psutil_then_to_nothing(monkeypatch):
    import psutil

    def no_proc(path, *args, **kwargs):
        raise FileNotFoundError(path)

    monkeypatch.setattr(autotuner, "open", no_proc, raising=False)
    mb, source = autotuner.memory_mb(os.getpid())
    assert source == "rss" and mb == pytest.approx(psutil.Process().memory_info().rss / 2**20, rel=0.2)
    monkeypatch.setitem(__import__("sys").modules, "psutil", None)  # as if not installed
    assert autotuner.memory_mb(os.getpid()) is None
    assert autotuner._ram_per_env(4, set()) == (None, None)


def test_cli_json_prints_the_rows_and_the_best():
    proc = run_puffer(None, "autotune", "classic/cartpole", "--num-envs", "2", "--seconds", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [row["name"] for row in data["rows"]] == [s.name for s in settings_grid(2)]
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
