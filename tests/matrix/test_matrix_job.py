"""One job's venv: requirements checked before uv sees them, the smoke run's report read."""

from __future__ import annotations

import pathlib
import subprocess
import sys

from puffer_core.matrix.job import Job, JobResult, read_smoke_report, run_job
from puffer_core.matrix.options import RunOptions
from puffer_core.matrix.processes import Processes
from puffer_core.matrix.runner import require_uv
from puffer_core.matrix.trees import CELL_MODULE
from puffer_core.matrix.wheels import Wheels

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_a_job_never_hands_uv_an_option_or_url_as_a_requirement(tmp_path):
    # The joint cell's requirements come from results.json, which anyone can edit: each is
    # checked again right before `uv pip install`, and nothing is built or installed.
    options = RunOptions(root=ROOT, out=tmp_path / "out", work=tmp_path / "work")
    uv, procs = require_uv(), Processes()
    for bad in ("--index-url=http://127.0.0.1:9/", "six @ http://127.0.0.1:9/six.whl"):
        job = Job(id="common-py3.11", python="3.11", plugins=[], requirements=["six==1.17.0", bad], reported=[])
        result = run_job(job, options, uv, Wheels(options, uv, procs), "core-hash", procs)
        assert result.outcome == "install-failed"
        assert result.error.startswith(f"refused to install {bad!r}"), result.error
        log = (tmp_path / "out" / "logs" / "common-py3.11.log").read_text()
        assert "pip install" not in log and not (tmp_path / "work" / "wheels").exists()


def _read(cmd: list[str]) -> JobResult:
    """Run ``cmd`` as a cell runs its smoke run (stdout and stderr apart) and read what it printed."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    result = JobResult("install-failed", 0.0)
    read_smoke_report(proc.returncode, proc.stdout, proc.stderr, result)
    return result


def test_a_passing_smoke_run_is_a_pass_with_its_envs():
    cmd = [sys.executable, "-m", CELL_MODULE, "--json", "--plugin=classic", "--env=classic/cartpole", "--no-vector"]
    result = _read(cmd)
    assert (result.outcome, result.error, result.envs) == ("pass", None, ["classic/cartpole"])


def test_a_plugin_that_is_not_there_is_an_import_failure_naming_the_stage():
    result = _read([sys.executable, "-m", CELL_MODULE, "--json", "--plugin=no-such-plugin"])
    assert result.outcome == "import-failed"
    assert result.error.startswith("no-such-plugin: import: ImportError: plugin 'no-such-plugin' is not installed")


def test_a_run_that_dies_before_its_report_is_classified_by_what_it_died_of():
    # The smoke module is run inside puffer_core.testing: when that package (or puffer_core)
    # does not import, the run ends before it can print a report.
    result = _read([sys.executable, "-c", "import puffer_core.no_such_module"])
    assert result.outcome == "import-failed"
    assert result.error == (
        "smoke run printed no report (exit code 1): ModuleNotFoundError: No module named 'puffer_core.no_such_module'"
    )
    result = _read([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert result.outcome == "smoke-failed" and result.error.startswith(
        "smoke run printed no report (killed by signal 9)"
    )


def test_the_matrix_names_the_smoke_module_and_never_imports_it():
    code = (
        "import sys\n"
        "import puffer_core.cli.matrix, puffer_core.matrix.runner\n"
        "print(sorted(m for m in sys.modules if m.startswith(('puffer_core.testing', 'puffer_core.vector'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout.strip() == "[]"
