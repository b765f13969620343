"""Tank-only cells (``CompatAxes.tank_only``): declared, hashed, and recorded as tank-missing without an image.

The run inside a real image is in tests/tank/test_tank_matrix_cells_docker.py (the CI image)
and tests/tank/test_tank_dmlab_docker.py (DeepMind Lab's).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from puffer_core import CompatAxes
from puffer_core.errors import PluginError
from puffer_core.matrix.model import cells_for
from puffer_core.matrix.plan import cell_input_hash, cell_inputs, stale_reason
from puffer_core.matrix.store import CellRecord, MatrixError
from puffer_core.matrix.tank_cells import check_tank_image, find_tank_image

ROOT = pathlib.Path(__file__).resolve().parents[2]
TANK_ONLY = CompatAxes(package="deepmind-lab", versions=("1.0",), python=("3.11",), tank_only=True)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"versions": ("1.0", "1.1")}, "versions"),
        ({"python": ("3.11", "3.12")}, "python"),
        ({"pins": {"1.0": {"gymnasium": "1.2.0"}}}, "pins"),
        ({"axes": {"numpy": ("2.4.0",)}}, "axes"),
        ({"follow": {"numpy": ""}}, "follow"),
        ({"tank_only": "yes"}, "tank_only"),
    ],
)
def test_a_tank_only_package_takes_the_one_cell_an_image_answers_for(changes, field):
    axes = CompatAxes(**{**vars(TANK_ONLY), **changes})
    with pytest.raises(PluginError, match=f"field '{field}'") as caught:
        axes.validate("dmlab")
    assert "plugin 'dmlab'" in str(caught.value)


def test_the_cell_is_marked_and_other_cells_keep_their_hash():
    (cell,) = cells_for("dmlab", TANK_ONLY)
    assert cell.tank and cell.to_json()["tank"] is True and cell.id == "dmlab-deepmind-lab1.0-py3.11"
    (venv_cell,) = cells_for("dmlab", CompatAxes(package="deepmind-lab", versions=("1.0",), python=("3.11",)))
    assert "tank" not in venv_cell.to_json()
    # A venv cell's hash has no image part: records made before tank cells existed stay valid.
    assert cell_input_hash(venv_cell, "p", "c", "sha256:1") == cell_input_hash(venv_cell, "p", "c")
    assert "image" not in cell_inputs(venv_cell, "p", "c", "sha256:1")


def test_a_rebuilt_image_makes_the_cell_stale_and_says_so():
    (cell,) = cells_for("dmlab", TANK_ONLY)
    old_inputs = cell_inputs(cell, "p", "c", None)
    assert old_inputs["image"] == "none"
    old = CellRecord(
        id=cell.id,
        plugin="dmlab",
        python="3.11",
        package="deepmind-lab",
        version="1.0",
        pins={},
        outcome="tank-missing",
        input_hash=cell_input_hash(cell, "p", "c", None),
        inputs=old_inputs,
    )
    assert stale_reason(old, old_inputs, old.input_hash) is None
    new_inputs = cell_inputs(cell, "p", "c", "sha256:abc")
    assert stale_reason(old, new_inputs, cell_input_hash(cell, "p", "c", "sha256:abc")) == "PufferTank image changed"


@pytest.mark.parametrize("image", ["--privileged", "Puffertank", "puffertank:latest;rm", "", "a b"])
def test_a_tank_image_that_is_not_a_reference_is_refused(image):
    with pytest.raises(MatrixError, match=r"--tank-image .* (is not an image reference|starts with '-'|is empty)"):
        check_tank_image(image)


def test_without_a_docker_command_the_image_is_missing_saying_how_to_build_one(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    found = find_tank_image("puffertank:latest")
    assert found.id is None
    assert "no docker command on PATH" in found.problem and "puffer tank build --dmlab-source DIR" in found.problem


@pytest.mark.skipif(
    shutil.which("uv") is None and not (pathlib.Path(sys.executable).parent / "uv").exists(), reason="needs uv"
)
def test_a_run_without_the_image_records_tank_missing_and_keeps_it(tmp_path):
    """The real dmlab plugin, an image no engine has: the cell is recorded, never run in a venv."""
    out = tmp_path / "out"
    command = [
        *(sys.executable, "-m", "puffer_core.cli.main", "matrix", "run", "--plugin", "dmlab", "--no-common"),
        *("--no-builtins", "--out", str(out), "--work", str(tmp_path / "work")),
        *("--tank-image", "puffer-matrix-test-absent:none"),
    ]
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "tank-missing" in proc.stdout and "ran 1 cell" in proc.stdout
    record = json.loads((out / "results.json").read_text())["cells"]["dmlab-deepmind-lab1.0-py3.11"]
    assert record["outcome"] == "tank-missing"
    assert re.search(
        r"no image puffer-matrix-test-absent:none on the Docker engine|no docker command|did not answer",
        record["error"],
    ), record["error"]
    assert not (tmp_path / "work" / "venvs").exists()  # no venv was made for it
    assert "🐳❓" in (out / "README.md").read_text()
    again = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert again.returncode == 0 and "ran 0 cells" in again.stdout, again.stdout + again.stderr


def test_tank_image_is_refused_in_one_line_before_anything_runs(tmp_path):
    command = [sys.executable, "-m", "puffer_core.cli.main", "matrix", "run", "--out", str(tmp_path)]
    proc = subprocess.run([*command, "--tank-image", "--rm"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode != 0, proc.stderr
    assert "--tank-image '--rm' starts with '-' (it would be read as an option)" in proc.stderr, proc.stderr
    assert not (tmp_path / "results.json").exists()
