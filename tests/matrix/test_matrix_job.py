"""One job's venv: requirements checked before uv sees them, the smoke run's report read."""

from __future__ import annotations

import io
import pathlib
import subprocess
import sys
import tarfile
import time

import pytest

from puffer_core.matrix.job import Job, JobResult, read_smoke_report, rebuilt_requirement, run_job
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
    for bad in ("--index-url=http://127.0.0.1:9/", "six @ http://127.0.0.1:9/six.whl", "six.whl", "./six"):
        job = Job(id="common-py3.11", python="3.11", plugins=[], requirements=["six==1.17.0", bad], reported=[])
        result = run_job(job, options, uv, Wheels(options, uv, procs), "core-hash", procs)
        assert result.outcome == "install-failed"
        assert result.error.startswith(f"refused to install {bad!r}"), result.error
        log = (tmp_path / "out" / "logs" / "common-py3.11.log").read_text()
        assert "pip install" not in log and not (tmp_path / "work" / "wheels").exists()


def evil_sdist(folder: pathlib.Path, marker: pathlib.Path) -> pathlib.Path:
    """``folder/evil-1.0.tar.gz``: an sdist whose build backend (in the sdist, needing nothing from an
    index) writes ``marker`` as soon as an installer starts building it."""
    files = {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
        '[project]\nname = "evil"\nversion = "1.0"\n',
        "backend.py": f"import pathlib\npathlib.Path({str(marker)!r}).write_text('built')\nraise SystemExit(1)\n",
        "PKG-INFO": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n",
    }
    path = folder / "evil-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(f"evil-1.0/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    return path


def test_an_archive_named_as_a_requirement_is_never_built(tmp_path, monkeypatch):
    # `evil-1.0.tar.gz` is a valid PEP 508 name; uv reads it as a file of the working directory
    # and runs its build. Shown first with uv itself, run in the caller's directory as it was.
    uv = require_uv()
    caller, marker = tmp_path / "caller", tmp_path / "MARKER"
    caller.mkdir()
    evil_sdist(caller, marker)
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "--quiet", "--", str(venv)], check=True, timeout=120)
    install = [uv, "pip", "install", "--python", str(venv / "bin" / "python"), "--", "evil-1.0.tar.gz"]
    subprocess.run(install, cwd=caller, capture_output=True, timeout=300)
    assert marker.read_text() == "built"  # the attack
    marker.unlink()

    # The matrix refuses the name before any install, from the caller's directory.
    monkeypatch.chdir(caller)
    options = RunOptions(root=ROOT, out=tmp_path / "out", work=tmp_path / "work")
    procs = Processes()
    job = Job(id="common-py3.11", python="3.11", plugins=[], requirements=["evil-1.0.tar.gz"], reported=[])
    result = run_job(job, options, uv, Wheels(options, uv, procs), "core-hash", procs)
    assert result.outcome == "install-failed"
    assert result.error.startswith("refused to install 'evil-1.0.tar.gz' ends like an archive file"), result.error
    # And a cell's uv never runs where the caller is: the same command through the matrix's
    # processes finds no such file (and builds nothing) even if a name got past the check.
    with open(tmp_path / "log", "w") as log:
        rc, out, _ = procs.run(install, log, time.monotonic() + 300)
    assert rc != 0 and not marker.exists(), out


@pytest.mark.parametrize(
    ("text", "rebuilt"),
    [
        ("six==1.17.0", "six==1.17.0"),
        ("Zope.Interface>=7", "zope-interface>=7"),
        (
            'PettingZoo[Butterfly,classic] >=1.24 ,<2; python_version < "3.13"',
            'pettingzoo[butterfly,classic]<2,>=1.24; python_version < "3.13"',
        ),
    ],
)
def test_uv_gets_each_requirement_rebuilt_from_its_parsed_parts(text, rebuilt):
    assert rebuilt_requirement(text) == rebuilt


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
