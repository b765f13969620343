"""puffer_core.bench.cluster: the Ray section (Multiprocessing, Ray here, Ray on a simulated
three-node cluster) gives well-formed rows: steps/second, and for Ray the bytes per env step
each way, per worker, with the node each worker ran on. A tiny run: nothing timed is asserted."""

from __future__ import annotations

import json

import pytest

from puffer_core.bench import results
from puffer_core.bench.cluster import SIMULATED_NODES, render_markdown, run_cluster_standard

pytestmark = [pytest.mark.ray, pytest.mark.ray_cluster]


@pytest.fixture(scope="module")
def document(tmp_path_factory):
    """One standard cluster run of CartPole alone (3 envs, short), stored in a folder of runs."""
    import ray

    if ray.is_initialized():  # an earlier test's Ray: the bench starts and stops its own
        ray.shutdown()
    out = tmp_path_factory.mktemp("cluster-runs")
    stored = run_cluster_standard(out, seconds=0.2, rounds=1, envs={"classic/cartpole": 3, "nope/missing": 3})
    return out, stored


def test_every_row_ran_and_the_ray_rows_count_the_bytes_each_way(document):
    out, stored = document
    rows = stored["results"]["classic/cartpole"]
    assert [(row["backend"], row["where"]) for row in rows] == [
        ("multiprocessing", "local"),
        ("ray", "local"),
        ("ray", "simulated"),
    ]
    assert all(row["error"] is None and row["sps"] > 0 and row["num_workers"] == 3 for row in rows), rows
    for row in rows[1:]:
        # CartPole: a float32 (4,) observation; a flat action of one int64 per env
        assert (row["observation_bytes"], row["action_bytes"]) == (16, 8)
        assert row["row_bytes"] == 16 + 4 + 3  # observation, float32 reward, terminal, truncation, mask
        assert row["sent_bytes_per_step"] == 8.0  # the actions, nothing else
        # the rows every step, and episode statistics at the episodes' ends (~1 step in 20)
        assert row["received_bytes_per_step"] > row["row_bytes"]
        assert row["info_bytes_per_step"] == round(row["received_bytes_per_step"] - row["row_bytes"], 1) > 0
        assert [worker["worker"] for worker in row["workers"]] == [0, 1, 2]
        assert all(worker["sent_bytes_per_step"] == 8.0 for worker in row["workers"])
        assert all(worker["host"] and worker["node_id"] for worker in row["workers"])
    assert len({worker["node_id"] for worker in rows[1]["workers"]}) == 1  # this machine: one node
    assert len({worker["node_id"] for worker in rows[2]["workers"]}) == SIMULATED_NODES  # spread


def test_the_run_is_stored_as_a_dated_json_file_with_what_was_skipped(document):
    out, stored = document
    files = list(out.glob("*.json"))
    assert [path.stem for path in files] == [stored["run"]]
    assert json.loads(files[0].read_text()) == stored
    assert stored["kind"] == "cluster" and stored["nodes"] == SIMULATED_NODES
    assert list(stored["results"]) == ["classic/cartpole"] and "nope/missing" in stored["skipped"][0]


def test_nothing_of_the_run_is_left_connected():
    import ray

    assert not ray.is_initialized()


def test_the_tables_show_every_row_and_its_bytes(document):
    _, stored = document
    table = render_markdown(stored["results"])
    assert "### `classic/cartpole` (3 envs, 3 workers)" in table
    lines = [line for line in table.splitlines() if line.startswith("| Ray") or line.startswith("| Multi")]
    assert len(lines) == 3 and "shared memory" in lines[0]
    assert all("| 8 B |" in line and "| 23 B |" in line for line in lines[1:])
    assert lines[2].endswith(f"| {SIMULATED_NODES} |")
    section = results.render_cluster_section(stored)
    assert table in section and "nope/missing" in section
