"""The README's test command never passes by skipping: on a machine without some of the test
interpreters, `tests` runs on those it has (or the running one) and names the missing ones."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"

pytest.importorskip("nox", reason="nox is in the dev extra")  # nox's own venvs have it


def _list_sessions(path: str, *flags: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYENV_VERSION")}
    env["PATH"] = path
    return subprocess.run(
        [sys.executable, "-m", "nox", "--noxfile", str(ROOT / "noxfile.py"), "--list", *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_without_the_test_interpreters_tests_runs_on_the_running_one_and_says_so(tmp_path):
    proc = _list_sessions(str(tmp_path))  # an empty PATH: no python3.10, no python3.13
    assert proc.returncode == 0, proc.stderr
    for version in ("3.10", "3.13"):
        assert f"nox: python{version} not found: `tests` runs without it (pyenv install {version}" in proc.stderr
    assert f"* tests-{RUNNING} ->" in proc.stdout
    assert "tests-3.10" not in proc.stdout.replace(f"tests-{RUNNING}", "")


def test_a_found_interpreter_is_used_and_ci_demands_them_all(tmp_path):
    (tmp_path / f"python{RUNNING}").symlink_to(sys.executable)
    proc = _list_sessions(str(tmp_path))
    assert f"* tests-{RUNNING} ->" in proc.stdout
    assert f"python{RUNNING} not found" not in proc.stderr
    strict = _list_sessions(str(tmp_path), "--error-on-missing-interpreters")
    assert "* tests-3.10 ->" in strict.stdout and "* tests-3.13 ->" in strict.stdout
    assert "not found" not in strict.stderr
