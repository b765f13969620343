"""The smoke run a matrix cell runs: make, reset, step, the emulation round trip, the vector run."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

from puffer_core.testing.smoke import smoke


def test_smoke_reports_a_missing_plugin_as_an_import_failure():
    report = smoke("no-such-plugin", vector=False)
    assert report["ok"] is False and report["kind"] == "import"
    assert "not installed here" in report["error"]


def test_smoke_runs_make_reset_step_and_round_trip():
    report = smoke("classic", envs=["classic/cartpole", "classic/probe_dict", "classic/probe_multiagent"], vector=False)
    assert report["ok"], report
    stages = {(s["stage"], s["env"]) for s in report["stages"]}
    assert ("emulation", "classic/probe_dict") in stages and ("step", "classic/probe_multiagent") in stages


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "puffer_core.testing.smoke", *args], capture_output=True, text=True)


def test_the_command_prints_one_json_report_and_exits_by_its_verdict():
    proc = _run("--json", "--plugin=classic", "--env=classic/cartpole", "--no-vector", "--packages=numpy,gymnasium")
    assert proc.returncode == 0, proc.stderr
    [line] = proc.stdout.splitlines()  # nothing but the report on stdout
    report = json.loads(line)
    assert report["ok"] and report["plugins"][0]["envs"] == ["classic/cartpole"]
    assert report["versions"]["numpy"] == importlib.metadata.version("numpy")
    assert set(report["versions"]) >= {"puffer-core", "numpy", "gymnasium"}
    proc = _run("--json", "--plugin=no-such-plugin")
    assert proc.returncode == 1 and json.loads(proc.stdout)["plugins"][0]["failed_stage"] == "import"


def test_the_vector_stage_is_a_two_worker_multiprocessing_run():
    report = smoke("classic", envs=["classic/probe_multiagent"], steps=4)
    assert report["ok"], report
    assert [s["stage"] for s in report["stages"]][-1] == "vector"
