"""The compat matrix end to end on the fixture plugin: real uv venvs, real installs of small packages.

The fixture (tests/data/matrix_fixture_plugin) has one cell of each kind: pass, smoke-failed,
install-failed, excluded and interpreter-missing (Python 3.99). Wheels are built once for
the module (a shared --work folder); uv's cache makes the installs quick after the first run.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "data" / "matrix_fixture_plugin"

PASS = "fixture-gymnasium1.2.0-py3.11"
SMOKE_FAILED = "fixture-gymnasium1.1.1-py3.11"
INSTALL_FAILED = "fixture-gymnasium1.0.0-py3.11"
EXCLUDED = "fixture-gymnasium1.0.0-py3.99"
MISSING = ("fixture-gymnasium1.1.1-py3.99", "fixture-gymnasium1.2.0-py3.99")

if shutil.which("uv") is None and not (pathlib.Path(sys.executable).parent / "uv").exists():
    pytest.skip("the matrix needs uv (pip install uv)", allow_module_level=True)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PUFFER_LOAD_PLUGINS", "PUFFER_DISABLE_PLUGINS"}}
    env["COLUMNS"] = "200"
    return env


def matrix_cmd(layout: dict[str, pathlib.Path], *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "puffer_core.cli.main",  # the `puffer` command
        "matrix",
        "run",
        "--out",
        str(layout["out"]),
        "--plugins-dir",
        str(layout["plugins"]),
        "--work",
        str(layout["work"]),
        "--no-builtins",
        *args,
    ]


def run_matrix(
    layout: dict[str, pathlib.Path], *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        matrix_cmd(layout, *args), capture_output=True, text=True, env=env or _env(), timeout=timeout, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def ran(proc: subprocess.CompletedProcess) -> int:
    found = re.search(r"ran (\d+) cells?\b", proc.stdout)
    assert found, proc.stdout
    return int(found.group(1))


def results(layout: dict[str, pathlib.Path]) -> dict:
    return json.loads((layout["out"] / "results.json").read_text())


def make_layout(base: pathlib.Path, work: pathlib.Path) -> dict[str, pathlib.Path]:
    plugins = base / "plugins"
    shutil.copytree(FIXTURE, plugins / "fixture")
    return {"plugins": plugins, "out": base / "compat_matrix", "work": work}


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> pathlib.Path:
    return tmp_path_factory.mktemp("matrix-work")


@pytest.fixture(scope="module")
def cold(tmp_path_factory, work):
    """The first, full run: every cell of the fixture, two at a time."""
    layout = make_layout(tmp_path_factory.mktemp("cold"), work)
    proc = run_matrix(layout, "--jobs", "2")
    return layout, proc


def test_cold_run_classifies_every_cell(cold):
    layout, proc = cold
    assert ran(proc) == 5  # the excluded cell is recorded, not run
    cells = results(layout)["cells"]
    outcomes = {cid: cell["outcome"] for cid, cell in cells.items()}
    assert outcomes == {
        PASS: "pass",
        SMOKE_FAILED: "smoke-failed",
        INSTALL_FAILED: "install-failed",
        EXCLUDED: "excluded",
        MISSING[0]: "interpreter-missing",
        MISSING[1]: "interpreter-missing",
    }
    passed = cells[PASS]
    assert passed["resolved"]["gymnasium"] == "1.2.0" and passed["resolved"]["six"] == "1.17.0"
    assert passed["resolved"]["puffer-plugin-fixture"] == "0.0.1" and passed["resolved"]["python"].startswith("3.11")
    assert passed["envs"] == ["fixture/cartpole"]  # PUFFER_SMOKE_ENVS, not the first declared env
    assert passed["pins"] == {"gymnasium": "1.2.0", "six": "1.17.0"}
    assert passed["seconds"] > 0 and passed["input_hash"] and passed["finished_at"]
    assert "refuses gymnasium 1.1.1" in cells[SMOKE_FAILED]["error"]
    assert "make fixture/cartpole" in cells[SMOKE_FAILED]["error"]
    assert "six==99.0.0" in cells[INSTALL_FAILED]["error"]
    assert cells[EXCLUDED]["error"] == "fixture: gymnasium 1.0 predates Python 3.99"
    assert "3.99" in cells[MISSING[0]]["error"]
    for cid, cell in cells.items():
        if cell["outcome"] != "excluded":
            log = pathlib.Path(cell["log"])
            assert log.name == f"{cid}.log" and log.exists(), cell["log"]
    assert "uv pip install" in (layout["out"] / "logs" / f"{PASS}.log").read_text()
    assert not list((layout["work"] / "venvs").glob("fixture-*"))  # venvs are removed after their cell


def test_cold_run_writes_the_views_and_the_common_set(cold):
    layout, _ = cold
    out = layout["out"]
    readme = (out / "README.md").read_text()
    assert readme.startswith("<!-- GENERATED") and "nox -s compat" in readme
    assert "| gymnasium (companion pins) | Python 3.11 | Python 3.99 |" in readme
    assert "🚫 excluded: fixture: gymnasium 1.0 predates Python 3.99" in readme
    assert "**Cold run**" in readme and "cells per minute" in readme
    assert results(layout)["runs"]["cold"]["ran"] == 5
    html = (out / "index.html").read_text()
    assert "<table" in html and "smoke-failed" in html
    data = results(layout)
    assert data["common"]["joint"]["outcome"] == "pass"
    assert [m["plugin"] for m in data["common"]["members"]] == ["fixture"]
    # Every other Python the axes list gets its own set; 3.99 has no passing cell, so none.
    assert list(data["commons"]) == ["3.99"]
    assert data["commons"]["3.99"]["members"] == [] and data["commons"]["3.99"]["joint"] is None
    assert data["commons"]["3.99"]["dropped"]["fixture"].startswith("no passing cell on Python 3.99")
    assert "## The common set on Python 3.99" in readme
    constraints = (out / "constraints-common.txt").read_text()
    lines = [line for line in constraints.splitlines() if line and not line.startswith("#")]
    assert "gymnasium==1.2.0" in lines and "six==1.17.0" in lines and "puffer-plugin-fixture==0.0.1" in lines
    assert constraints.startswith("# GENERATED")


def test_unchanged_rerun_runs_nothing(cold):
    layout, _ = cold
    before = results(layout)
    start = time.monotonic()
    proc = run_matrix(layout, "--jobs", "2")
    took = time.monotonic() - start
    assert ran(proc) == 0, proc.stdout
    after = results(layout)
    assert {k: v["finished_at"] for k, v in after["cells"].items()} == {
        k: v["finished_at"] for k, v in before["cells"].items()
    }
    assert after["common"]["joint"]["finished_at"] == before["common"]["joint"]["finished_at"]
    print(f"unchanged re-run took {took:.1f} s")


def test_force_reruns_the_selection_only(cold):
    layout, _ = cold
    before = results(layout)["cells"]
    proc = run_matrix(layout, "--force", "--quick", "--no-common")
    assert ran(proc) == 1
    after = results(layout)["cells"]
    assert after[PASS]["outcome"] == "pass" and after[PASS]["finished_at"] >= before[PASS]["finished_at"]
    assert after[PASS]["log"] == before[PASS]["log"]
    for cid in (SMOKE_FAILED, INSTALL_FAILED, *MISSING):
        assert after[cid]["finished_at"] == before[cid]["finished_at"]
    # the README's cold-run rate stays the one of the full run
    assert results(layout)["runs"]["cold"]["ran"] == 5


def test_interrupted_run_resumes_and_a_source_change_reruns(tmp_path, work):
    layout = make_layout(tmp_path, work)
    results_path = layout["out"] / "results.json"
    proc = subprocess.Popen(
        matrix_cmd(layout, "--python", "3.11", "--jobs", "1", "--no-common"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(),
        cwd=ROOT,
        start_new_session=True,
    )
    recorded: dict = {}
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if results_path.exists():
                data = json.loads(results_path.read_text())  # always a complete document
                recorded = {k: v for k, v in data["cells"].items() if v["outcome"] != "excluded"}
                if recorded:
                    break
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # as `kill PID` would: the runner ends the cell in flight
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert recorded, "no cell was recorded before the deadline"
    assert len(recorded) < 3, "the run finished before it could be interrupted"
    data = json.loads(results_path.read_text())
    kept = {k: v["finished_at"] for k, v in data["cells"].items() if v["outcome"] != "excluded"}

    again = run_matrix(layout, "--python", "3.11", "--jobs", "2", "--no-common")
    assert ran(again) == 3 - len(kept)
    cells = results(layout)["cells"]
    assert {k for k, v in cells.items() if v["python"] == "3.11"} == {PASS, SMOKE_FAILED, INSTALL_FAILED}
    for cid, finished in kept.items():
        assert cells[cid]["finished_at"] == finished  # not re-run
    assert cells[PASS]["outcome"] == "pass"

    # a change to the plugin's source makes its cells stale
    init = layout["plugins"] / "fixture" / "puffer_plugin_fixture" / "__init__.py"
    init.write_text(init.read_text() + "\n# a change\n")
    changed = run_matrix(layout, "--python", "3.11", "--quick", "--no-common")
    assert ran(changed) == 1
    assert results(layout)["cells"][PASS]["input_hash"] != cells[PASS]["input_hash"]


def test_a_cell_past_its_timeout_is_recorded_as_timeout(tmp_path, work):
    layout = make_layout(tmp_path, work)
    init = layout["plugins"] / "fixture" / "puffer_plugin_fixture" / "__init__.py"
    init.write_text(
        init.read_text().replace(
            '    version = importlib.metadata.version("gymnasium")',
            '    import time\n\n    time.sleep(60)\n    version = importlib.metadata.version("gymnasium")',
        )
    )
    start = time.monotonic()
    proc = run_matrix(layout, "--quick", "--no-common", "--timeout", "8")
    assert time.monotonic() - start < 45
    assert ran(proc) == 1
    cell = results(layout)["cells"][PASS]
    assert cell["outcome"] == "timeout" and "during smoke" in cell["error"]
    assert 8 <= cell["seconds"] < 30


def test_cells_see_no_caller_variable_outside_the_allowlist_unless_passed(tmp_path, work):
    layout = make_layout(tmp_path, work)
    plugin = layout["plugins"] / "fixture"
    # The plugin's wheel build (a setup.py, run by uv build) and its env (in the smoke run) both
    # fail where they can see the caller's secret.
    (plugin / "setup.py").write_text(
        "import os\nfrom setuptools import setup\n\n"
        "if 'PUFFER_TEST_SECRET' in os.environ:\n"
        "    raise SystemExit('fixture: the wheel build sees PUFFER_TEST_SECRET')\n"
        "setup()\n"
    )
    init = plugin / "puffer_plugin_fixture" / "__init__.py"
    init.write_text(
        init.read_text().replace(
            '    version = importlib.metadata.version("gymnasium")',
            "    import os\n\n"
            '    if "PUFFER_TEST_SECRET" in os.environ:\n'
            '        secret = os.environ["PUFFER_TEST_SECRET"]\n'
            '        raise RuntimeError("fixture: the cell sees PUFFER_TEST_SECRET=" + secret)\n'
            '    version = importlib.metadata.version("gymnasium")',
        )
    )
    env = {**_env(), "PUFFER_TEST_SECRET": "hunter2"}
    run_matrix(layout, "--quick", "--no-common", env=env)
    cell = results(layout)["cells"][PASS]
    assert cell["outcome"] == "pass", cell["error"]

    proc = run_matrix(layout, "--quick", "--no-common", "--force", "--pass-env", "PUFFER_TEST_SECRET", env=env)
    assert ran(proc) == 1
    cell = results(layout)["cells"][PASS]
    assert cell["outcome"] == "smoke-failed"
    assert "the cell sees PUFFER_TEST_SECRET=hunter2" in cell["error"]


def test_unknown_plugin_is_a_clear_error(tmp_path, work):
    layout = make_layout(tmp_path, work)
    proc = subprocess.run(
        matrix_cmd(layout, "--plugin", "nope"), capture_output=True, text=True, env=_env(), timeout=60, cwd=ROOT
    )
    assert proc.returncode != 0
    assert "no plugin named 'nope'" in proc.stderr and "fixture" in proc.stderr
    assert "Traceback" not in proc.stderr
