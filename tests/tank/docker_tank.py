"""What the docker test modules share: the engine, the base image and the PufferTank they build.

``tests/tank/conftest.py`` turns these into the ``client`` and ``built`` fixtures. A module
needing them is marked ``docker``: skipped when no engine answers, unless
``PUFFER_DOCKER_TESTS=1`` (what .ci/run sets), which turns a missing engine into a failure.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import time

import pytest

from puffer_core.bench.box import BASE_IMAGE, CI_IMAGE, ci_build_command, machine_ca

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: PUFFERTANK_TEST_TAG names another build, so that two checkouts can test on one engine side by side.
TAG = os.environ.get("PUFFERTANK_TEST_TAG", CI_IMAGE)
IMAGES = {"base": f"{TAG}:base", "envs": f"{TAG}:envs", "final": f"{TAG}:latest"}
FORCED = os.environ.get("PUFFER_DOCKER_TESTS") == "1"


def unavailable(reason: str):
    """Fail when the docker tests were asked for (PUFFER_DOCKER_TESTS=1), else skip saying why."""
    if FORCED:
        pytest.fail(f"PUFFER_DOCKER_TESTS=1 but {reason}; run tank/ci-setup.sh first")
    pytest.skip(f"{reason} (run tank/ci-setup.sh and set PUFFER_DOCKER_TESTS=1)")


def engine():
    """A docker client that answered, with the base image on its engine."""
    try:
        import docker
    except ImportError:
        unavailable("the docker SDK is not installed (pip install docker)")
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:
        unavailable(f"no Docker engine answered ({type(exc).__name__})")
    try:
        client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        unavailable(f"the base image {BASE_IMAGE} is not on the engine")
    return client


def build_tank(tag: str = TAG, extra: tuple[str, ...] | list[str] = (), env: dict[str, str] | None = None) -> dict:
    """Build the three layers through the CLI, exactly as a user would (the engine's cache makes a rebuild seconds).

    ``tag``, ``extra`` options and ``env`` (e.g. another engine's DOCKER_HOST) for tests that build the same
    layers elsewhere.
    """
    command = [*ci_build_command(tag), *extra]
    started = time.monotonic()
    proc = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=3600, env={**os.environ, **(env or {})}
    )
    seconds = time.monotonic() - started
    log = proc.stdout + proc.stderr
    print(f"puffer tank build took {seconds:.0f} s\n{log[-3000:]}")
    assert proc.returncode == 0, f"build failed (exit {proc.returncode}):\n{log[-6000:]}"
    return {"log": log, "ca": machine_ca(), "seconds": seconds}


def run_in(client, image: str, command, stderr: bool = True, quiet: bool = True, **kwargs) -> str:
    """A command's output (stdout, and stderr unless ``stderr=False``) in a throw-away container of
    ``image`` without a network; ``quiet`` leaves out the entrypoint's banner."""
    environment = {"PUFFERTANK_QUIET": "1"} if quiet else {}
    out = client.containers.run(
        image,
        command,
        network_mode="none",
        remove=True,
        stdout=True,
        stderr=stderr,
        environment={**environment, **kwargs.pop("environment", {})},
        **kwargs,
    )
    return out.decode("utf-8", "replace")
