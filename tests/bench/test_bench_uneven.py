"""The uneven-cores bench: its env, which envs are slow, the ideal ratio, the run's rows, and
`puffer bench --uneven`. Structure and arithmetic only: speed is never asserted."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from plugin_site import run_puffer
from rich.console import Console

from puffer_core import vector
from puffer_core.bench import vectorization as bench
from puffer_core.bench.uneven import (
    BUSY_SPEC,
    BusyEnv,
    burn_cpu,
    ideal_ratio,
    render_markdown,
    run_uneven,
    slow_seeds,
)
from puffer_core.cli.bench import uneven_table
from puffer_core.env.environments import SpecCreator
from puffer_core.vector.checks import split_envs


def test_burn_cpu_uses_the_cpu_it_was_asked_for():
    before = time.thread_time_ns()
    burn_cpu(3_000_000)
    assert time.thread_time_ns() - before >= 3_000_000  # CPU time, not a sleep


def test_busy_env_is_slow_when_its_first_seed_says_so():
    env = BusyEnv(step_us=50, slowdown=3.0, slow_seeds=(7,), episode_length=3)
    obs, _ = env.reset(seed=7)
    assert env.cost_ns == 150_000 and obs[1] == 1.0
    env.reset()  # an autoreset (unseeded) keeps the env as it is
    assert env.cost_ns == 150_000
    obs, _ = env.reset(seed=8)
    assert env.cost_ns == 50_000 and obs[1] == 0.0
    ends = [env.step(0)[2] for _ in range(3)]
    assert ends == [False, False, True]


@pytest.mark.parametrize("num_envs, workers", [(4, 2), (8, 4), (6, 3), (12, 4)])
def test_slow_seeds_are_the_envs_of_the_last_half_of_the_workers(num_envs, workers):
    counts = split_envs(num_envs, workers)
    starts = np.cumsum([0, *counts])
    slow_workers = range(workers - workers // 2, workers)
    expected = {100 + i for w in slow_workers for i in range(starts[w], starts[w + 1])}
    assert set(slow_seeds(num_envs, workers, 100)) == expected


@pytest.mark.parametrize("native", [False, True])
def test_the_slow_envs_sit_on_the_slow_workers_of_a_vector_env(native):
    # With native batches, each worker's envs are one batch (BUSY_SPEC), seeded as single envs are.
    with vector.make(
        SpecCreator(BUSY_SPEC) if native else BusyEnv,
        num_envs=4,
        num_workers=2,
        backend="multiprocessing",
        seed=3,
        step_us=1,
        slowdown=3.0,
        slow_seeds=slow_seeds(4, 2, 3),
        vector_kwargs={"native": True} if native else None,
    ) as envs:
        obs, _ = envs.reset()
        assert obs[:, 1].tolist() == [0.0, 0.0, 1.0, 1.0]


def test_run_uneven_with_native_batches_measures_the_same_layouts():
    result = run_uneven(0.05, 2, step_us=20, native=True)
    assert result["native"] is True and len(result["layouts"]) >= 1
    assert all(row["sync_sps"] > 0 and row["async_sps"] > 0 for row in result["layouts"])
    assert render_markdown(result).startswith("## Uneven cores, native batches\n")


def test_ideal_ratio():
    assert ideal_ratio([1, 3], cpus=2) == pytest.approx(2.0)  # own cores: fast workers step 3× as often
    assert ideal_ratio([1, 1, 3, 3], cpus=2) == pytest.approx(4 / 3)  # shared cores: sync wastes no CPU
    assert ideal_ratio([1, 1, 3, 3], cpus=4) == pytest.approx(2.0)
    assert ideal_ratio([2, 2], cpus=2) == pytest.approx(1.0)  # even workers: nothing to gain
    assert ideal_ratio([1, 3], cpus=1) == pytest.approx(4 / 3)  # one core: (½ + ⅙) / (2 workers / 4)


@pytest.fixture(scope="module")
def uneven():
    calls = []
    result = run_uneven(0.05, 2, step_us=20, progress=lambda name, i, total: calls.append((i, total)))
    return result, calls


def test_run_uneven_rows(uneven):
    result, calls = uneven
    assert result["slowdown"] == 3.0 and result["rounds"] == 2 and result["cpus"] >= 1
    layouts = result["layouts"]
    cpus = result["cpus"]
    assert [row["num_workers"] for row in layouts] == list(dict.fromkeys((max(2, cpus), max(4, 2 * cpus))))
    for row in layouts:
        assert row["num_envs"] == 2 * row["num_workers"] and row["batch_size"] == row["num_workers"]
        assert row["slow_workers"] == row["num_workers"] // 2
        assert len(row["sync_rounds"]) == len(row["async_rounds"]) == 2
        assert row["sync_sps"] == max(row["sync_rounds"]) > 0 and row["async_sps"] == max(row["async_rounds"]) > 0
        assert row["ratio"] == pytest.approx(row["async_sps"] / row["sync_sps"], abs=5e-4)  # rounded to 3 places
        assert row["ideal_ratio"] > 1.0
    assert [i for i, _ in calls] == list(range(len(calls))) and len(calls) == 2 * 2 * len(layouts)


def test_uneven_renders_as_table_and_markdown(uneven):
    result, _ = uneven
    console = Console(width=200, record=True)
    console.print(uneven_table(result))
    text = console.export_text()
    assert "async / sync" in text and "3× slower" in text
    markdown = render_markdown(result)
    assert markdown.startswith("## Uneven cores\n")
    assert markdown.count("\n| ") == 2 + len(result["layouts"])


def test_run_standard_adds_the_uneven_section(tmp_path):
    only = {"nope/missing": 2}  # an env that is skipped: only the uneven section runs
    document = bench.run_standard(
        tmp_path, seconds=0.02, rounds=1, envs=only, include_peers=False, include_training=False, include_uneven=True
    )
    assert document["uneven"]["rounds"] == 2  # at least two, even when the env rows run one
    assert document["uneven_native"]["native"] is True and document["uneven"]["native"] is False
    stored = json.loads((tmp_path / f"{document['run']}.json").read_text())
    assert stored["uneven"] == json.loads(json.dumps(document["uneven"]))
    skipped = bench.run_standard(
        tmp_path, seconds=0.02, envs=only, include_peers=False, include_training=False, include_uneven=False
    )
    assert skipped["uneven"] is None
    assert json.loads((tmp_path / f"{skipped['run']}.json").read_text())["uneven"] is None


@pytest.mark.slow
def test_cli_bench_uneven_json():
    proc = run_puffer(None, "bench", "--uneven", "--seconds", "0.1", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["rounds"] == 2 and len(data["layouts"]) >= 1
    assert all(row["ratio"] > 0 for row in data["layouts"])
