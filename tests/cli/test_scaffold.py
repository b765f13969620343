"""`puffer new-plugin` writes a plugin that installs, passes `puffer check` and its own tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from plugin_site import run_puffer

import puffer_core
from puffer_core.cli.scaffold import core_range, scaffold_plugin
from puffer_core.errors import APIUsageError

ROOT = Path(__file__).resolve().parents[2]


def test_scaffold_writes_the_expected_files(tmp_path):
    target = scaffold_plugin("my-envs", tmp_path / "out")
    files = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert files == [
        "README.md",
        "puffer_plugin_my_envs/__init__.py",
        "puffer_plugin_my_envs/envs.py",
        "pyproject.toml",
        "tests/test_puffer_plugin_my_envs.py",
    ]
    assert 'my-envs = "puffer_plugin_my_envs"' in (target / "pyproject.toml").read_text()
    assert f'"{core_range(puffer_core.__version__)}"' in (target / "pyproject.toml").read_text()
    for path in target.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")


@pytest.mark.parametrize(
    ("version", "requirement"),
    [("0.1.0", "puffer-core>=0.1,<0.2"), ("0.12.3", "puffer-core>=0.12,<0.13"), ("1.4.0", "puffer-core>=1.4,<2")],
)
def test_a_scaffolded_plugin_declares_the_core_releases_it_is_written_against(version, requirement):
    assert core_range(version) == requirement
    assert Version(version) in Requirement(requirement).specifier


@pytest.mark.parametrize("name", ["Bad", "has space", "-lead", ""])
def test_scaffold_rejects_bad_names(tmp_path, name):
    with pytest.raises(APIUsageError, match="not valid"):
        scaffold_plugin(name, tmp_path / "x")


def test_scaffold_refuses_non_empty_dir_without_force(tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(APIUsageError, match="--force"):
        scaffold_plugin("ok", tmp_path)
    scaffold_plugin("ok", tmp_path, force=True)
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_new_plugin_cli_reports_errors(tmp_path):
    proc = run_puffer(None, "new-plugin", "Bad Name", str(tmp_path / "p"))
    assert proc.returncode == 1 and "not valid" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_scaffolded_plugin_installs_checks_and_tests_clean_by_the_next_steps_it_prints(tmp_path):
    """The `next:` line new-plugin prints, run as printed in a fresh venv (pip in it, puffer-core installed):
    the plugin and its [test] extra install, puffer check passes, and its own tests pass with this venv's pytest."""
    proc = run_puffer(None, "new-plugin", "scaffolded", str(tmp_path / "plugin"))
    assert proc.returncode == 0, proc.stderr
    printed = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("next: ")]
    assert len(printed) == 1, proc.stdout + proc.stderr
    venv = tmp_path / "venv"
    uv = shutil.which("uv")
    assert uv, "uv is part of the dev extra"
    subprocess.run([uv, "venv", "-q", "--seed", "--python", sys.executable, str(venv)], check=True)  # --seed: pip
    python = str(venv / "bin" / "python")
    subprocess.run([uv, "pip", "install", "-q", "--python", python, str(ROOT)], check=True, timeout=600)
    # As a user with the venv active: its bin first on PATH, nothing of this test's Python around.
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PUFFER_LOAD_PLUGINS", "VIRTUAL_ENV"}}
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"
    steps = subprocess.run(["bash", "-c", printed[0].removeprefix("next: ")], capture_output=True, text=True,
                           env=env, cwd=tmp_path, timeout=900)  # fmt: skip
    assert steps.returncode == 0, steps.stdout[-3000:] + steps.stderr[-3000:]
    assert "✗" not in steps.stdout and "multiprocessing run" in steps.stdout
    assert "2 passed" in steps.stdout
