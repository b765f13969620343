"""A plugin pip-installed into a fresh virtual environment shows up in `puffer envs`."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
MINIMAL = ROOT / "tests" / "data" / "minimal_plugin"


@pytest.mark.slow
def test_pip_installed_plugin_is_listed(tmp_path):
    venv = tmp_path / "venv"
    uv = shutil.which("uv")
    if uv:  # uv shares one package cache, so this stays fast after the first run
        subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
        install = [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python")]
    else:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        install = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    # Copy the plugin so the build never writes into the source tree.
    plugin = tmp_path / "minimal_plugin"
    shutil.copytree(MINIMAL, plugin)
    subprocess.run([*install, str(ROOT), str(plugin)], check=True, timeout=600)
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PUFFER_LOAD_PLUGINS"}}
    proc = subprocess.run(
        [str(venv / "bin" / "puffer"), "envs", "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    rows = {row["id"]: row for row in json.loads(proc.stdout)["envs"]}
    assert rows["minimal/cartpole"]["plugin"] == "minimal"
    assert rows["minimal/cartpole"]["available"] is True
    plugins = subprocess.run(
        [str(venv / "bin" / "puffer"), "plugins", "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    by_name = {p["name"]: p for p in json.loads(plugins.stdout)["plugins"]}
    assert by_name["minimal"]["distribution"] == "puffer-plugin-minimal"
    assert by_name["minimal"]["version"] == "0.0.1"
    # Without the train extra, `puffer train` says what to install, in one line.
    train = subprocess.run(
        [str(venv / "bin" / "puffer"), "train", "minimal/cartpole"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert train.returncode == 1 and "pip install 'puffer-core[train]'" in train.stderr, train.stderr
    assert len(train.stderr.strip().splitlines()) == 1, train.stderr
