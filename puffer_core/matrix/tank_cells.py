"""Cells of a package only PufferTank has (``CompatAxes.tank_only``): the smoke run inside the image.

DeepMind Lab is built from its source by the image's environment layer and is on no package
index, so its cell cannot be a venv. It runs the same smoke run as every other cell
(``python -m puffer_core.testing.smoke``) in a container of a built PufferTank image
(``puffer matrix run --tank-image``, default ``puffertank:latest``, what ``puffer tank build``
tags), with no network, so the matrix records a real pass or a real failure of the plugin
with the engine the image holds. The image's id is one input of the cell's hash: a rebuilt
image re-runs the cell.

Without a Docker client, an engine that answers, or the image, the cell's outcome is
``tank-missing`` and its error says which and how to get one. The image's puffer-core and
plugin are the ones it was built with: the record keeps their versions and the image id.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import IO

from puffer_core.matrix.environment import cell_environment
from puffer_core.matrix.job import Job, JobResult, logged_job, read_smoke_report
from puffer_core.matrix.logs import summarize_log
from puffer_core.matrix.options import RunOptions
from puffer_core.matrix.processes import Processes, scratch_dirs
from puffer_core.matrix.store import MatrixError
from puffer_core.matrix.trees import CELL_MODULE
from puffer_core.specs.images import image_reference_problem

__all__ = ["TankImage", "check_tank_image", "find_tank_image", "run_tank_job"]


#: How a tank-only cell's image is built, for the ``tank-missing`` error.
BUILD_HINT = "build one with the plugin's stage (puffer tank build --dmlab-source DIR for DeepMind Lab)"


@dataclass(frozen=True)
class TankImage:
    """The image tank-only cells run in: its id on the engine, or why there is none."""

    name: str
    id: str | None = None
    problem: str | None = None


def check_tank_image(image: str) -> str:
    """``--tank-image``'s value when it is an image reference, else the one-line MatrixError."""
    problem = image_reference_problem(image)
    if problem is not None:
        raise MatrixError(f"--tank-image {image!r} {problem}")
    return image


def find_tank_image(image: str, pass_env: tuple[str, ...] | list[str] = ()) -> TankImage:
    """Ask the Docker engine for ``image``'s id (``docker image inspect``); never raises."""
    check_tank_image(image)
    docker = shutil.which("docker")
    if docker is None:
        return TankImage(
            image, problem=f"no docker command on PATH: tank-only cells run in a PufferTank image; {BUILD_HINT}"
        )
    with scratch_dirs() as (home, cwd):
        env = {**cell_environment("docker", pass_env), "HOME": home}
        try:
            proc = subprocess.run(
                [docker, "image", "inspect", "--format", "{{.Id}}", "--", image],
                capture_output=True,
                text=True,
                env=env,
                cwd=cwd,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return TankImage(image, problem=f"docker image inspect {image} failed: {exc}")
    if proc.returncode == 0 and proc.stdout.strip():
        return TankImage(image, id=proc.stdout.strip().splitlines()[0])
    said = summarize_log(proc.stderr or proc.stdout)
    if re.search(r"no such image|not found", said, re.IGNORECASE):
        return TankImage(
            image, problem=f"no image {image} on the Docker engine: {BUILD_HINT}, or name one with --tank-image"
        )
    return TankImage(image, problem=f"the Docker engine did not answer ({said}): start it (tank/ci-setup.sh does)")


def run_tank_job(job: Job, options: RunOptions, procs: Processes, image: TankImage) -> JobResult:
    """The smoke run in a container of ``image`` (no network, removed after); the outcome, never raised."""
    name = f"puffer-matrix-{job.id}-{int(time.time() * 1000)}"
    header = [
        f"cell {job.id}: inside PufferTank image {image.name} ({image.id or 'not found'})",
        f"plugins {', '.join(p.name for p in job.plugins)}",
    ]
    with logged_job(job, options, "tank-missing", header) as logged:
        logged.where = "in the container"
        if image.id is None:
            logged.result.error = image.problem
        else:
            _smoke_in_image(job, options, procs, image, name, logged.log, logged.start, logged.result)
    return logged.result


def _smoke_in_image(
    job: Job,
    options: RunOptions,
    procs: Processes,
    image: TankImage,
    name: str,
    log: IO[str],
    start: float,
    result: JobResult,
) -> None:
    """The smoke run in a container made first (``docker create``) and then attached to (``docker start
    --attach``), so that the container exists by name before anything can time out; removed after in
    every case. Its report is read as a venv cell's, the versions from the image."""
    docker = shutil.which("docker") or "docker"
    deadline = start + options.timeout
    create = [docker, "create", "--name", name, "--network", "none", "--env", "PUFFERTANK_QUIET=1", "--", image.id]
    create += ["python", "-X", "faulthandler", "-m", CELL_MODULE, "--json"]
    create += [f"--plugin={plugin.name}" for plugin in job.plugins]
    create.append(f"--packages={','.join(dict.fromkeys(job.reported))}")
    try:
        rc, out, err = procs.run(create, log, deadline, stage="docker", capture_stdout=True)
        if rc != 0:  # the outcome stays tank-missing: the image could not be run
            result.error = f"docker create failed: {summarize_log(err or out)}"
            return
        attach = [docker, "start", "--attach", "--", name]
        rc, out, err = procs.run(attach, log, deadline, stage="docker", capture_stdout=True)
    except BaseException:  # a timeout or an interrupt killed the client: the container may live on
        _remove_container(name, options, settle=True)
        raise
    _remove_container(name, options)
    read_smoke_report(rc, out, err, result)
    report = {}
    with contextlib.suppress(json.JSONDecodeError, IndexError):
        report = json.loads(out.strip().splitlines()[-1])
    versions = report.get("versions") or {}
    result.resolved = {package: version for package, version in versions.items() if version}
    if report.get("python"):
        result.resolved["python"] = report["python"]


def _remove_container(name: str, options: RunOptions, settle: bool = False) -> None:
    """Remove the cell's container by name, running or not (a killed client leaves it running).

    ``settle``: the client was killed, perhaps while the engine was still creating the
    container; watch a few seconds for it to appear, and remove it then too."""
    docker = shutil.which("docker")
    if docker is None:
        return
    with scratch_dirs() as (home, cwd), contextlib.suppress(OSError, subprocess.TimeoutExpired):
        env = {**cell_environment("docker", options.pass_env), "HOME": home}

        def docker_run(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([docker, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=60)

        docker_run("rm", "--force", "--", name)
        for _ in range(10 if settle else 0):
            time.sleep(0.5)
            if docker_run("container", "inspect", "--", name).returncode == 0:
                docker_run("rm", "--force", "--", name)
