"""A tank-only matrix cell run for real inside the CI's PufferTank (nethack and atari, no dmlab).

The matrix machinery of :mod:`puffer_core.matrix.tank_cells` against a real image: a plugin the
image holds passes with the image's versions recorded, one it lacks is a real import failure
naming it, and a cell past its deadline leaves no container behind. DeepMind Lab's own cell,
in an image with its engine, is in test_tank_dmlab_docker.py (it needs DeepMind Lab's source).
"""

from __future__ import annotations

import subprocess

import pytest
from docker_tank import IMAGES

from puffer_core.matrix.job import Job
from puffer_core.matrix.options import RunOptions
from puffer_core.matrix.processes import Processes
from puffer_core.matrix.sources import PluginSource
from puffer_core.matrix.tank_cells import find_tank_image, run_tank_job

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _job(plugin: str, cell_id: str) -> Job:
    return Job(
        id=cell_id,
        python="3.11",
        plugins=[PluginSource(plugin, None, None)],
        requirements=[],
        reported=["ale-py", "gymnasium", "deepmind-lab"],
    )


def _matrix_containers() -> list[str]:
    out = subprocess.run(
        ["docker", "ps", "--all", "--quiet", "--filter", "name=puffer-matrix-"], capture_output=True, text=True
    )
    return out.stdout.split()


def test_a_plugin_the_image_holds_passes_with_the_image_versions(built, tmp_path):
    image = find_tank_image(IMAGES["final"])
    assert image.id and image.id.startswith("sha256:"), image
    result = run_tank_job(_job("atari", "atari-in-tank"), RunOptions(out=tmp_path), Processes(), image)
    log = (tmp_path / "logs" / "atari-in-tank.log").read_text()
    assert result.outcome == "pass", f"{result.error}\n{log[-3000:]}"
    assert result.resolved["python"].startswith("3.11.") and "ale-py" in result.resolved
    assert "deepmind-lab" not in result.resolved  # not in this image: not reported as if it were
    assert "--network none" in log and image.id in log
    assert _matrix_containers() == []


def test_a_plugin_the_image_lacks_is_an_import_failure_naming_it(built, tmp_path):
    image = find_tank_image(IMAGES["final"])
    result = run_tank_job(_job("dmlab", "dmlab-in-ci-tank"), RunOptions(out=tmp_path), Processes(), image)
    assert result.outcome == "import-failed", result
    assert "plugin 'dmlab' is not installed here" in result.error


def test_a_cell_past_its_deadline_leaves_no_container(built, tmp_path):
    image = find_tank_image(IMAGES["final"])
    options = RunOptions(out=tmp_path, timeout=1)  # killed while the container starts or runs: both must clean up
    result = run_tank_job(_job("atari", "atari-timeout"), options, Processes(), image)
    assert result.outcome == "timeout" and "in the container" in result.error
    assert _matrix_containers() == []
