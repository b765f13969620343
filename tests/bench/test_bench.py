"""The benchmark code path, tiny and fast: structure only, never timing."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Iterator

import gymnasium
import pytest
from optional import require
from rich.console import Console
from rich.table import Table

from puffer_core.bench import peers, results, vectorization as bench
from puffer_core.cli.bench import bench_table


@pytest.fixture(scope="module")
def rows():
    calls = []
    result = bench.run_bench(
        "classic/cartpole",
        num_envs=2,
        seconds=0.05,
        warmup=0.01,
        settings=[(1, 2), (2, 1)],
        progress=lambda name, i, total: calls.append((name, i, total)),
    )
    return result, calls


def test_run_bench_rows(rows):
    result, calls = rows
    names = [r["name"] for r in result]
    assert names[0] == "raw env loop (1 env)"
    assert "Serial" in names
    assert "Multiprocessing w=1 b=2" in names and "Multiprocessing w=2 b=1" in names
    assert "gymnasium AsyncVectorEnv (shared memory)" in names
    keys = {
        "name",
        "kind",
        "backend",
        "num_envs",
        "num_workers",
        "batch_size",
        "sps",
        "ratio_vs_raw",
        "ratio_vs_serial",
        "ratio_vs_async",
        "ratio_vs_pufferlib",
        "env",
    }
    restart = [r for r in result if r["kind"] == "restart"]
    assert len(restart) == 1 and restart[0]["latency_seconds"] > 0 and len(restart[0]["latencies"]) == 3
    for row in result:
        assert keys <= set(row), row
        assert row["env"] == "classic/cartpole"
        assert row["error"] is None, row
        assert row["kind"] == "restart" or row["sps"] > 0
        if row["kind"] not in ("emulation", "restart"):
            assert row["ratio_vs_raw"] is not None and row["ratio_vs_serial"] is not None
    serial = next(r for r in result if r["backend"] == "serial")
    assert serial["ratio_vs_serial"] == 1.0
    mp = next(r for r in result if r["name"] == "Multiprocessing w=2 b=1")
    assert (mp["num_workers"], mp["batch_size"], mp["num_envs"]) == (2, 1, 2)
    emulation = [r for r in result if r["kind"] == "emulation"]
    assert len(emulation) == 1 and emulation[0]["overhead"] > 0 and emulation[0]["overhead_without_stats"] > 0
    assert emulation[0]["overhead_floor"] > 0  # CartPole: a 1-D Box observation and a Discrete action
    # its vs raw is its own interleaved comparison (same games and actions), not another row's loop
    assert emulation[0]["ratio_vs_raw"] == round(1 / emulation[0]["overhead"], 3)
    assert emulation[0]["ratio_vs_serial"] is None
    adapters = {r["name"]: r for r in result if r["kind"] == "adapter"}
    expected = {"to_gymnasium(Multiprocessing w=2 b=2)"}
    if importlib.util.find_spec("stable_baselines3") or os.environ.get("PUFFER_REQUIRE_TORCH"):
        expected.add("to_sb3(Multiprocessing w=2 b=2 same_step)")  # SB3 needs torch
    assert set(adapters) == expected
    assert all(r["ratio_vs_backend"] > 0 and r["backend_sps"] > 0 for r in adapters.values())
    ceiling = [r for r in result if r["kind"] == "ceiling"]
    assert [r["name"] for r in ceiling] == [
        "ceiling: 2 independent Serial processes (no communication)",
        "ceiling, lock-step: 2 Serial processes that wait for each other after every batch",
    ]
    assert [r["backend"] for r in ceiling] == ["independent", "independent-lockstep"]
    assert all(r["ratio_vs_serial"] > 0 for r in ceiling)  # not the Serial baseline
    checked = [r for r in result if r["kind"] == "action-check"]
    assert [r["name"] for r in checked] == ["Multiprocessing w=2 b=2 check_actions=True"]
    assert checked[0]["ratio_vs_unchecked"] > 0 and checked[0]["unchecked_sps"] > 0
    # the ratio pairs the alternating short stretches; the row's steps/s is a full stretch like every row's
    short = checked[0]["checked_short_sps"]
    assert checked[0]["ratio_vs_unchecked"] == round(short / checked[0]["unchecked_sps"], 3)
    assert 0 <= checked[0]["check_us"] < 1000 and 0 <= checked[0]["check_share"] < 1  # timing: never exact
    # progress saw every measured configuration, in order, with a stable total
    assert [c[1] for c in calls] == list(range(len(calls)))
    assert len({c[2] for c in calls}) == 1 and len(calls) == len(result)


def _pufferlib_or_skip() -> str:
    """PufferLib's version; skips the test without it (fails it where the session requires it)."""
    version = peers.pufferlib_version()
    if version is None:
        if os.environ.get("PUFFER_REQUIRE_PUFFERLIB"):
            pytest.fail(f"PufferLib must be importable in this session: {peers.PUFFERLIB_INSTALL}")
        pytest.skip(f"PufferLib not installed ({peers.PUFFERLIB_INSTALL})")
    return version


def test_pufferlib_rows_run_in_the_same_run():
    version = _pufferlib_or_skip()
    result = bench.run_bench(
        "classic/cartpole", num_envs=2, seconds=0.05, warmup=0.01, settings=[(1, 2)], include_emulation=False
    )
    peers = [r for r in result if r["backend"].startswith("pufferlib-")]
    assert {r["backend"] for r in peers} == {"pufferlib-serial", "pufferlib-multiprocessing"}
    for row in peers:
        assert row["name"].startswith(f"PufferLib {version} "), row
        assert row["error"] is None and row["sps"] > 0, row
    best = max(r["sps"] for r in peers)  # PufferLib's fastest setting, Serial or Multiprocessing: the one rule
    ours = next(r for r in result if r["name"] == "Multiprocessing w=1 b=2")
    assert ours["ratio_vs_pufferlib"] == pytest.approx(ours["sps"] / best, rel=1e-2)


class TempFolderEnv(gymnasium.Wrapper):
    """CartPole that keeps a folder in the temp dir until closed, as each NetHack game does."""

    def __init__(self):
        super().__init__(gymnasium.make("CartPole-v1"))
        self.folder = tempfile.mkdtemp(prefix="puffer-test-game-")

    def close(self):
        shutil.rmtree(self.folder, ignore_errors=True)
        super().close()


def test_pufferlib_rows_leave_nothing_in_the_temp_dir():
    # PufferLib's workers end without closing their envs: the bench's scratch temp dir must
    # take what they leave, and go when the case closes.
    version = _pufferlib_or_skip()
    root, before_tmpdir = tempfile.gettempdir(), os.environ.get("TMPDIR")

    def ours() -> set[str]:
        return {p for p in os.listdir(root) if p.startswith(("puffer-test-game-", "puffer-bench-pufferlib-"))}

    before = ours()
    for case in peers._pufferlib_cases(TempFolderEnv, 2, 0, version):
        env = case.build()
        try:
            assert case.measure(env, 0.05, 0.01) > 0
        finally:
            env.close()
        assert ours() == before, case.name
    assert tempfile.gettempdir() == root and os.environ.get("TMPDIR") == before_tmpdir


def test_failing_configuration_is_reported_not_raised():
    result = bench.run_bench(
        "classic/cartpole",
        num_envs=2,
        seconds=0.02,
        warmup=0.0,
        include_peers=False,
        include_emulation=False,
        settings=[(3, 2)],
    )
    bad = next(r for r in result if r["name"] == "Multiprocessing w=3 b=2")
    assert bad["sps"] is None and "APIUsageError" in bad["error"]
    assert bad["ratio_vs_serial"] is None


def test_parallel_ceiling_sums_independent_processes_and_names_a_failure():
    from puffer_core.bench.ceiling import parallel_ceiling

    assert parallel_ceiling("classic/cartpole", 4, seconds=0.1, processes=2) > 0
    assert parallel_ceiling("classic/cartpole", 4, seconds=0.1, processes=2, lockstep=True) > 0
    with pytest.raises(RuntimeError, match="a ceiling process failed: UnknownEnvError"):
        parallel_ceiling("classic/cartpol", 2, seconds=0.1, processes=2)


@contextlib.contextmanager
def another_thread_running(monkeypatch) -> Iterator[list]:
    """A thread left running (by an earlier test, or the caller) while the block runs; yields the
    start methods the block asked ``multiprocessing.get_context`` for."""
    import multiprocessing
    import threading

    methods, get_context = [], multiprocessing.get_context

    def recorded(method=None):
        methods.append(method)
        return get_context(method)

    monkeypatch.setattr(multiprocessing, "get_context", recorded)
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        yield methods
    finally:
        stop.set()
        thread.join()


def test_the_ceiling_forks_no_process_that_runs_another_thread(monkeypatch):
    """The ceiling's processes start by forkserver while another thread runs."""
    from puffer_core.bench.ceiling import parallel_ceiling

    with another_thread_running(monkeypatch) as methods:
        assert parallel_ceiling("classic/cartpole", 2, seconds=0.1, processes=2) > 0
    assert methods == ["forkserver"]


def test_gymnasiums_async_vector_env_forks_no_process_that_runs_another_thread(monkeypatch):
    """The peer as well: gymnasium would fork by default; with a thread running it starts by forkserver."""
    from puffer_core.bench.peers import peer_cases

    (case,) = [case for case in peer_cases("classic/cartpole", 2, seed=0) if case.backend == "gymnasium-async"]
    with another_thread_running(monkeypatch) as methods:
        env = case.build()
        try:
            assert case.measure(env, 0.05, 0.0) > 0
        finally:
            env.close()
    assert methods == ["forkserver"]


def test_lockstep_waits_for_the_slowest_process_and_not_for_one_that_stopped():
    import threading

    from puffer_core.bench.ceiling import _wait_for_others

    counts = [0, 0, 0]  # process 0, process 1, the stop flag
    finished = []
    waiter = threading.Thread(target=lambda: finished.append(_wait_for_others(counts, 0, 1)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and counts[0] == 1  # published its batch, waits for process 1
    counts[1] = 1
    waiter.join(5)
    assert finished == [True]
    counts[1] = 0  # behind again, then out of time: a waiter must not hang on it
    counts[2] = 1
    assert _wait_for_others(counts, 0, 2) is False


def test_rows_print_as_a_table(rows):
    result, _ = rows
    table = bench_table(result)
    assert isinstance(table, Table)
    assert table.row_count == len(result)
    console = Console(width=200, record=True)
    console.print(table)
    text = console.export_text()
    assert "Serial" in text and "vs AsyncVectorEnv" in text and "1.00×" in text
    assert "× check_actions=False; the check takes" in text and "µs per send" in text
    assert "× raw; " in text and "× without episode statistics; floor " in text
    assert "×, the least a Python emulator with them costs)" in text


@pytest.mark.slow
def test_run_standard_stores_one_dated_run(tmp_path):
    document = bench.run_standard(
        tmp_path,
        seconds=0.02,
        rounds=1,
        envs={"classic/cartpole": 2, "nope/missing": 2},
        include_peers=False,
        include_training=False,
    )
    assert [p.name for p in tmp_path.iterdir()] == [f"{document['run']}.json"]
    data = json.loads((tmp_path / f"{document['run']}.json").read_text())
    assert data == json.loads(json.dumps(document))
    assert set(data) >= {"machine", "versions", "commit", "created", "results", "skipped", "seconds", "rounds"}
    assert list(data["results"]) == ["classic/cartpole"]
    assert any("nope/missing" in note for note in data["skipped"])
    markdown = bench.render_markdown(data["results"], data["skipped"], machine=data["machine"])
    assert "## classic/cartpole (2 envs)" in markdown
    assert "| configuration | workers | batch | steps/s |" in markdown
    assert "nope/missing" in markdown
    step_time = data["step_time"]["classic/cartpole"]  # where its step's time goes, in the same run
    assert step_time["layers"][-1]["layer"] == "CartPoleEnv"
    fastest = fastest_multiprocessing_row(data)["name"]  # its cores' time is budgeted, and without spinning
    assert [row["name"] for row in step_time["cores"]["settings"]] == [fastest, f"{fastest} spin_us=0"]
    page = results.render_page([data])
    assert "### Where a `classic/cartpole` step's time goes" in page and "| the env itself (CartPoleEnv) |" in page


def fastest_multiprocessing_row(document: dict) -> dict:
    rows = document["results"]["classic/cartpole"]
    ours = [row for row in rows if row["kind"] == "puffer" and row["backend"] == "multiprocessing" and row["sps"]]
    return max(ours, key=lambda row: row["sps"])


@pytest.mark.slow
def test_training_throughput_sets_training_against_env_only_stepping():
    require("torch")
    from puffer_core.bench import training as bench_training

    row = bench_training.training_throughput("classic/cartpole", num_envs=2, workers=2, updates=1)
    assert row["training_sps"] > 0 and row["env_only_sps"] > 0
    assert row["ratio"] == round(row["training_sps"] / row["env_only_sps"], 3)
    native = bench_training.training_throughput("classic/cartpole", num_envs=2, workers=2, updates=1, native=True)
    assert native["native"] is True and native["training_sps"] > 0
    assert "| classic/cartpole, native batches | 2 | 2 |" in bench_training.render_markdown(
        {"cartpole": {"trials": [], "settings": {}, "ratio": None, "puffer_median_seconds": None,
                      "sb3_median_seconds": None}, "throughput": [row, native]}
    )  # fmt: skip


def test_time_to_solve_takes_medians_and_reports_failed_trials(monkeypatch):
    from puffer_core.bench import training as bench_training

    failed = bench_training._spawn_trial("no-such-trainer", 0, timeout=120)
    assert not failed["solved"] and "invalid choice" in failed["error"]
    seconds = {("puffer", 0): 10.0, ("puffer", 1): 12.0, ("puffer", 2): 11.0, ("sb3", 0): 40.0, ("sb3", 1): 44.0}

    def trial(trainer, seed, timeout):
        if (trainer, seed) not in seconds:
            return {"trainer": trainer, "seed": seed, "solved": False, "error": "not solved"}
        return {"trainer": trainer, "seed": seed, "solved": True, "step": 1, "seconds": seconds[trainer, seed]}

    monkeypatch.setattr(bench_training, "_spawn_trial", trial)
    result = bench_training.time_to_solve(seeds=(0, 1))
    assert result["puffer_median_seconds"] == 11.0 and result["sb3_median_seconds"] == 42.0
    assert result["ratio"] == round(11.0 / 42.0, 3)
    assert bench_training.time_to_solve(seeds=(0, 1, 2))["ratio"] is None  # SB3 failed seed 2: no median
    markdown = bench_training.render_markdown({"cartpole": result, "throughput": [], "skipped": ["x: skipped"]})
    assert "| sb3 | 1 | 1 | 44.0 |" in markdown and "0.26×" in markdown and "- x: skipped" in markdown
