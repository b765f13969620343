"""puffer_core.bench.runs and .results: standard runs stored as dated JSON, and the pages generated from them."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from puffer_core.bench import learning, results, runs, vectorization
from puffer_core.bench.results import (
    BOX_END,
    BOX_START,
    CLUSTER_END,
    CLUSTER_START,
    HEADLINE_END,
    HEADLINE_START,
    README_END,
    README_START,
)
from puffer_core.errors import APIUsageError

ROOT = Path(__file__).resolve().parents[2]
DATE_OR_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}:\d{2}\b")


def row(kind: str, backend: str, name: str, sps: float | None, num_envs: int = 16) -> dict:
    return {
        "kind": kind,
        "backend": backend,
        "name": name,
        "sps": sps,
        "num_envs": num_envs,
        "num_workers": 1,
        "batch_size": num_envs,
    }


def run_document(created: str = "2030-01-02T03:04:05Z", cartpole_best: float = 300_000.0) -> dict:
    rows = [
        row("raw", "raw", "raw env loop (1 env)", 250_000.0, num_envs=1),
        row("puffer", "serial", "Serial", 200_000.0),
        row("puffer", "multiprocessing", "Multiprocessing w=1+main b=16", cartpole_best),
        row("puffer", "multiprocessing", "Multiprocessing w=2 b=16", None),  # a failed setting
        row("ceiling", "independent", "ceiling", 320_000.0),
        row("ceiling", "independent-lockstep", "lock-step", 280_000.0),
        row("peer", "gymnasium-async", "gymnasium AsyncVectorEnv", 20_000.0),
        row("peer", "pufferlib-serial", "PufferLib Serial", 150_000.0),
        row("peer", "pufferlib-multiprocessing", "PufferLib Multiprocessing w=1 b=16", 120_000.0),
        row("peer", "envpool", "EnvPool t=2 b=16", 200_000.0),
        row("peer", "envpool", "EnvPool t=2 b=8", 250_000.0),
        row("peer", "native-alone", "CartPoleVectorEnv alone (the native batch)", 290_000.0),
        row("restart", "multiprocessing", "on_fault='restart'", None),
    ]
    return {
        "schema": runs.SCHEMA,
        "run": created.replace(":", ""),
        "created": created,
        "machine": {"cpus": 2, "usable_cpus": 2, "cpu_model": "Test CPU", "python": "3.11.7", "platform": "Linux"},
        "versions": {"puffer-core": "0.1.0", "pufferlib-core": "3.0.23"},
        "commit": "0123456789abcdef0123456789abcdef01234567",
        "seconds": 2.0,
        "rounds": 3,
        "results": {"classic/cartpole": rows},
        "uneven": None,
        "training": None,
        "skipped": [],
    }


def test_a_run_is_stored_under_its_utc_time_with_machine_versions_and_commit(tmp_path):
    first = runs.write_run(tmp_path / "runs", {"seconds": 1.0, "rounds": 2, "results": {}})
    second = runs.write_run(tmp_path / "runs", {"seconds": 1.0, "rounds": 2, "results": {}})
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d{6}Z(-\d+)?", first["run"]) and first["created"].endswith("Z")
    assert first["run"] != second["run"], "a second run within the same second must not replace the first"
    stored = json.loads((tmp_path / "runs" / f"{first['run']}.json").read_text())
    assert stored == first
    assert stored["machine"]["cpus"] >= 1 and stored["machine"]["python"]
    assert stored["versions"]["puffer-core"] and stored["versions"]["numpy"]
    if (ROOT / ".git").exists():
        assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", stored["commit"])


def test_runs_go_only_into_a_directory_of_the_users_own(tmp_path):
    runs.write_run(tmp_path / "new" / "runs", {"seconds": 1.0, "rounds": 2, "results": {}})
    assert (tmp_path / "new" / "runs").stat().st_mode & 0o777 == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # another user could link the next run's name to a file of yours
    with pytest.raises(APIUsageError, match=f"^{shared} is writable by others"):
        runs.write_run(shared, {"seconds": 1.0, "rounds": 2, "results": {}})
    with pytest.raises(APIUsageError, match=f"^{shared} is writable by others"):  # before any measuring
        vectorization.run_standard(shared, envs={"classic/no-such-env": 1})
    assert os.listdir(shared) == []


def test_runs_load_oldest_first_and_a_file_that_is_not_a_run_is_named(tmp_path):
    for created in ("2030-01-02T00:00:00Z", "2029-05-06T00:00:00Z"):
        (tmp_path / f"{created[:10]}.json").write_text(json.dumps(run_document(created)))
    assert [run["created"] for run in runs.load_runs(tmp_path)] == ["2029-05-06T00:00:00Z", "2030-01-02T00:00:00Z"]
    (tmp_path / "future.json").write_text(json.dumps({**run_document(), "schema": runs.SCHEMA + 1}))
    with pytest.raises(ValueError, match=r"future\.json has schema"):
        runs.load_runs(tmp_path)
    (tmp_path / "future.json").write_text("{")
    with pytest.raises(ValueError, match=r"future\.json is not JSON"):
        runs.load_runs(tmp_path)


def test_the_summary_takes_each_library_at_its_fastest_setting():
    best = results.standard_summary(run_document())["classic/cartpole"]
    assert best["puffer"]["name"] == "Multiprocessing w=1+main b=16"
    assert best["serial"]["sps"] == 200_000.0 and best["raw"]["sps"] == 250_000.0
    assert best["pufferlib"]["name"] == "PufferLib Serial"  # its Serial beat its Multiprocessing
    assert best["async"]["sps"] == 20_000.0
    assert (best["ceiling"]["sps"], best["lockstep"]["sps"]) == (320_000.0, 280_000.0)


def test_the_readme_table_compares_with_the_peers_and_the_ceiling_and_carries_no_date():
    table = results.render_readme_table(run_document())
    line = next(line for line in table.splitlines() if line.startswith("| `classic/cartpole`"))
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells == [
        "`classic/cartpole`, 16 envs",
        "300,000 (`Multiprocessing w=1+main b=16`)",
        "20,000",
        "150,000",
        "250,000",  # EnvPool's fastest setting
        "320,000",
        "15.00×",
        "2.00×",
        "1.20×",
        "94%",
    ]
    assert "PufferLib 3.0" in table and "2 CPUs, Test CPU" in table
    assert not DATE_OR_TIME.search(table)


def test_the_readme_table_replaces_only_the_text_between_its_markers():
    readme = f"# Title\n\n{README_START}\nold table\n{README_END}\n\nafter\n"
    assert results.replace_readme_table(readme, "new table\n") == (
        f"# Title\n\n{README_START}\nnew table\n{README_END}\n\nafter\n"
    )
    with pytest.raises(ValueError, match="needs the lines"):
        results.replace_readme_table("# no markers\n", "table\n")


def test_the_page_lists_every_run_newest_first_and_the_newest_in_full():
    runs = [run_document("2029-05-06T00:00:00Z", 280_000.0), run_document("2030-01-02T00:00:00Z", 300_000.0)]
    page = results.render_page(runs)
    assert page.startswith("<!-- generated by `python -m puffer_core.bench.results`")
    history = [line for line in page.splitlines() if line.startswith(("| 2029", "| 2030"))]
    assert [line.split("|")[1].strip() for line in history] == ["2030-01-02T00:00:00Z", "2029-05-06T00:00:00Z"]
    assert "| 300,000 | 1.20× | 1.50× | 15.00× | 2.00× | 94% | 1.28× |" in history[0]
    assert "## The newest run: 2030-01-02T00:00:00Z" in page
    assert "### classic/cartpole (16 envs)" in page  # the newest run's full table


def test_the_committed_page_and_readme_table_are_what_the_stored_runs_give():
    """Fails when a run is added without regenerating, or a generated table is edited by hand."""
    stored = runs.load_runs(ROOT / "bench-results")
    assert stored, "bench-results/ holds no run"
    cluster = (
        runs.load_runs(ROOT / "bench-results" / "cluster") if (ROOT / "bench-results" / "cluster").is_dir() else []
    )
    learning = runs.load_runs(ROOT / "bench-results" / "learning")
    assert learning, "bench-results/learning/ holds no run: nox -s bench"
    memory = runs.load_runs(ROOT / "bench-results" / "memory")
    assert memory, "bench-results/memory/ holds no run: nox -s bench -- --memory"
    page = results.render_page(stored, cluster, learning, memory)
    assert (ROOT / "docs" / "performance.md").read_text() == page
    guide = (ROOT / "docs" / "cluster.md").read_text()
    table = results.render_cluster_section(cluster[-1] if cluster else None)
    assert guide == results.replace_between(guide, CLUSTER_START, CLUSTER_END, table, "docs/cluster.md")
    readme = (ROOT / "README.md").read_text()
    assert readme == results.replace_readme_table(readme, results.render_readme_table(stored[-1]))
    box_runs = runs.load_runs(ROOT / "bench-results" / "box")
    assert box_runs, "bench-results/box/ holds no run: nox -s bench -- --box"
    box_guide = (ROOT / "docs" / "puffer-box.md").read_text()
    box_table = results.render_box_section(box_runs[-1])
    assert box_guide == results.replace_between(box_guide, BOX_START, BOX_END, box_table, "docs/puffer-box.md")


def cluster_document(created: str = "2030-01-03T00:00:00Z") -> dict:
    """A cluster run (``puffer_core.bench.cluster``) of CartPole: Multiprocessing, Ray here, Ray spread."""
    workers = [
        {"worker": w, "envs": 2, "node_id": f"node{w}", "host": "box", "sent_bytes_per_step": 8.0} for w in range(3)
    ]
    ray_row = {
        "backend": "ray",
        "observation_bytes": 16,
        "row_bytes": 23,
        "action_bytes": 8,
        "sent_bytes_per_step": 8.0,
    }
    ray_row.update(received_bytes_per_step=2_500.0, info_bytes_per_step=2_477.0, num_envs=6, num_workers=3, error=None)
    rows = [
        {"name": "Multiprocessing, this machine", "backend": "multiprocessing", "num_envs": 6, "num_workers": 3},
        {**ray_row, "name": "Ray, this machine", "workers": [{**w, "node_id": "node0"} for w in workers]},
        {**ray_row, "name": "Ray, 3 simulated nodes, spread", "workers": workers},
    ]
    for row, sps in zip(rows, (100_000.0, 10_000.0, 5_000.0)):
        row.update(kind="cluster", sps=sps, error=None)
    document = {**run_document(created), "kind": "cluster", "nodes": 3, "results": {"classic/cartpole": rows}}
    return {key: value for key, value in document.items() if key not in ("uneven", "training")}


def test_the_cluster_section_shows_steps_and_bytes_per_step_without_a_date():
    section = results.render_cluster_section(cluster_document())
    assert "| Multiprocessing, this machine | 100,000 | 1.00× | shared memory | shared memory | | | 1 |" in section
    assert "| Ray, this machine | 10,000 | 0.10× | 8 B | 2.5 kB | 23 B | 2.5 kB | 1 |" in section
    assert "| Ray, 3 simulated nodes, spread | 5,000 | 0.05× | 8 B | 2.5 kB | 23 B | 2.5 kB | 3 |" in section
    assert not DATE_OR_TIME.search(section)  # the guide carries no date
    assert "`nox -s bench -- --cluster` makes one" in results.render_cluster_section(None)


def test_the_page_shows_the_newest_cluster_run_only_when_there_is_one():
    stored = [run_document()]
    assert "Across nodes" not in results.render_page(stored)
    older, newer = cluster_document("2030-01-03T00:00:00Z"), cluster_document("2030-01-04T00:00:00Z")
    newer["results"]["classic/cartpole"][2]["sps"] = 7_000.0
    page = results.render_page(stored, [older, newer])
    assert "## Across nodes: Ray" in page and "| 7,000 | 0.07× |" in page and "| 5,000 |" not in page


def learning_document(ratios: tuple[float, ...] = (4.0, 5.0, 6.0)) -> dict:
    """A learning run (``puffer_core.bench.learning``): NetHack over seeds."""
    rows = [
        {
            "settings": {"seed": seed, "policy": "lstm"},
            "env_kwargs": {"observation_keys": ["glyphs_crop", "blstats"]},
            "window": 100,
            "trained_mean_return": 20.0 * ratio,
            "random": {"episodes": 200, "mean_return": 20.0},
            "ratio": ratio,
            "steps": 7_000_000,
            "steps_per_second": 3_900.0,
            "episodes": 12_000,
        }
        for seed, ratio in enumerate(ratios)
    ]
    document = {key: value for key, value in run_document().items() if key not in ("results", "uneven", "training")}
    return {**document, "learning": learning._summary("nethack/score", 30.0, rows)}


def test_the_page_shows_the_newest_learning_run_over_its_seeds():
    stored = [run_document()]
    assert "No learning run is stored yet: `nox -s bench` makes one." in results.render_page(stored)
    page = results.render_page(stored, None, [learning_document((1.0, 1.0, 1.0)), learning_document()])
    assert "## Learning: `nethack/score` in 30 minutes, 3 seeds" in page
    assert "| 2 | 120.0 | 20.0 | 6.00× | 7,000,000 | 3,900 | 12,000 |" in page
    assert "**5.00× ± 0.82** (mean ± standard deviation) (target 3×: reached)" in page
    assert "1.00×" not in page.split("## Learning")[1]  # the older run is not shown
    assert not DATE_OR_TIME.search(results.render_learning_section(learning_document()))


def box_document() -> dict:
    """A box run (``puffer_core.bench.box``)."""
    steps = {"setup": 50.0, "pull": 30.0, "first login": 5.0, "later login": 0.25}
    return {**run_document(), "image": "puffertank:latest", "push_seconds": 80.0, "steps": steps, "total": 85.0}


def test_the_box_section_shows_each_step_and_the_total_against_the_aim_without_a_date():
    section = results.render_box_section(box_document())
    assert "| setup | 50.0 |\n| pull | 30.0 |\n| first login | 5.0 |\n| later login | 0.2 |" in section
    assert "| **85.0** |" in section and "1.4 minutes, under the aim of 2" in section
    assert "pushed to the registry in 80 s first" in section
    assert not DATE_OR_TIME.search(section)
    slow = {**box_document(), "total": 150.0}
    assert "2.5 minutes, over the aim of 2" in results.render_box_section(slow)
    assert "`nox -s bench -- --box` makes one" in results.render_box_section(None)


def test_the_command_writes_then_checks(tmp_path, capsys):
    shutil.copytree(ROOT / "bench-results", tmp_path / "runs")
    readme = f"# X\n{HEADLINE_START}\nstale\n{HEADLINE_END}\n{README_START}\nstale\n{README_END}\n"
    (tmp_path / "README.md").write_text(readme)
    (tmp_path / "cluster.md").write_text(f"# Guide\n{CLUSTER_START}\nstale\n{CLUSTER_END}\n")
    runs.write_run(
        tmp_path / "cluster-runs",
        {
            key: value
            for key, value in cluster_document().items()
            if key not in ("schema", "run", "created", "machine", "versions", "commit")
        },
    )
    paths = ["--results", str(tmp_path / "runs"), "--page", str(tmp_path / "perf.md")]
    paths += ["--readme", str(tmp_path / "README.md"), "--guide", str(tmp_path / "cluster.md")]
    paths += ["--cluster-results", str(tmp_path / "cluster-runs")]
    (tmp_path / "box.md").write_text(f"# Box\n{BOX_START}\nstale\n{BOX_END}\n")
    paths += ["--box-guide", str(tmp_path / "box.md"), "--box-results", str(tmp_path / "no-box-runs")]
    paths += ["--learning-results", str(tmp_path / "runs" / "learning")]
    paths += ["--memory-results", str(tmp_path / "runs" / "memory")]
    assert results.main([*paths, "--check"]) == 1
    assert "perf.md is out of date" in capsys.readouterr().err
    assert results.main(paths) == 0
    assert "stale" not in (tmp_path / "README.md").read_text()
    assert "`nethack/score` with 8 envs runs at" in (tmp_path / "README.md").read_text()  # the headline
    guide = (tmp_path / "cluster.md").read_text()
    assert "stale" not in guide and "| Ray, 3 simulated nodes, spread | 5,000 |" in guide
    assert "No box run is stored yet" in (tmp_path / "box.md").read_text()
    assert results.main([*paths, "--check"]) == 0


def test_the_readme_headline_names_its_yardsticks():
    """A headline a reader can check: the setting measured, each peer at the setting it is compared at, the free
    ceiling and the plain loop of one raw env, each with its own steps/s, from the same run."""
    document = runs.load_runs(ROOT / "bench-results")[-1]
    line = results.render_readme_headline(document)
    summary = results.standard_summary(document)["nethack/score"]
    assert f"steps/s (`{summary['puffer']['name']}`)" in line
    assert f"gymnasium's AsyncVectorEnv ({summary['async']['sps']:,.0f})" in line
    if summary["pufferlib"]:
        setting = summary["pufferlib"]["name"].split(" ", 2)[-1]
        assert f"at its fastest setting here ({setting}, {summary['pufferlib']['sps']:,.0f})" in line
    assert f"never talking: {summary['ceiling']['sps']:,.0f})" in line
    assert f"one raw env in a plain loop, no vectorization: {summary['raw']['sps']:,.0f}" in line
    assert not DATE_OR_TIME.search(line)
