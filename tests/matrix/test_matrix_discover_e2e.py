"""`puffer matrix run --discover` end to end: a simple index on 127.0.0.1 holding a newer release of a test package.

The test plugin (tests/matrix/test_matrix_discover.py) declares puffer-test-follow 1.0; the
index also serves 1.1 (pure wheels built by the test). Cells install from that index (passed
with --pass-env UV_EXTRA_INDEX_URL) and from the package index for everything else.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest
from local_index import closed_port, serve
from test_matrix_discover import NEW_CELL, write_follow_index, write_follow_plugin
from test_matrix_e2e import matrix_cmd, ran

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[2]
DECLARED_CELL = "follow-puffer-test-follow1.0-py3.11"

if shutil.which("uv") is None and not (pathlib.Path(sys.executable).parent / "uv").exists():
    pytest.skip("the matrix needs uv (pip install uv)", allow_module_level=True)


def _matrix(layout: dict, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    cmd = matrix_cmd(layout, "--no-common", "--pass-env", "UV_EXTRA_INDEX_URL", *args)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)


def _ran(proc: subprocess.CompletedProcess) -> int:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return ran(proc)


def test_discover_adds_exactly_the_new_cell_runs_only_it_then_nothing(tmp_path):
    layout = {"plugins": tmp_path / "plugins", "out": tmp_path / "out", "work": tmp_path / "work"}
    write_follow_plugin(layout["plugins"])
    write_follow_index(tmp_path / "index")
    with serve(tmp_path / "index") as url:
        index = f"{url}/simple"
        env = {k: v for k, v in os.environ.items() if k not in {"PUFFER_LOAD_PLUGINS", "PUFFER_DISABLE_PLUGINS"}}
        env.update(COLUMNS="200", UV_EXTRA_INDEX_URL=index)

        assert _ran(_matrix(layout, env=env)) == 1  # the declared cell, before anything is discovered
        before = json.loads((layout["out"] / "results.json").read_text())["cells"]
        assert before[DECLARED_CELL]["outcome"] == "pass", before[DECLARED_CELL]["error"]

        start = time.monotonic()
        proc = _matrix(layout, "--discover", "--index", index, env=env)
        took = time.monotonic() - start
        assert _ran(proc) == 1, proc.stdout
        assert "puffer-test-follow (followed by follow): 1.1 (new) → cells added: follow 1" in proc.stdout
        assert "1 cell(s) to run with 1 job(s) (new cell: 1); 1 unchanged" in " ".join(proc.stdout.split())
        cells = json.loads((layout["out"] / "results.json").read_text())["cells"]
        assert set(cells) == {DECLARED_CELL, NEW_CELL}
        new = cells[NEW_CELL]
        assert new["outcome"] == "pass", new["error"]
        assert new["resolved"]["puffer-test-follow"] == "1.1" and new["reason"] == "new cell"
        assert set(new["inputs"]) == {"runner", "cell", "plugin_src", "core_src"}
        assert cells[DECLARED_CELL] == before[DECLARED_CELL]  # not stale, not re-run
        print(f"discover + one new cell took {took:.1f} s")

        discovered_before = (layout["out"] / "discovered.json").read_bytes()
        assert _ran(_matrix(layout, "--discover", "--index", index, env=env)) == 0
        assert (layout["out"] / "discovered.json").read_bytes() == discovered_before
        dry = _matrix(layout, "--dry-run", env=env)
        assert dry.returncode == 0 and "0 cell(s) would run" in dry.stdout and "2 unchanged" in dry.stdout, dry.stdout

    results_before = (layout["out"] / "results.json").read_bytes()
    port = closed_port()
    proc = _matrix(layout, "--discover", "--index", f"http://127.0.0.1:{port}/simple", env=env)
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and f"cannot reach the package index http://127.0.0.1:{port}/simple" in errors[0], errors
    assert (layout["out"] / "results.json").read_bytes() == results_before
    assert (layout["out"] / "discovered.json").read_bytes() == discovered_before
