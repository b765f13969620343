"""`puffer tank` as users run it, in subprocesses: the no-engine path (exit code 2 and a
clear message) and rendering errors. Runs with or without a Docker engine on the machine:
DOCKER_HOST points at a socket nobody listens on."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(args: list[str], env: dict[str, str], cwd: pathlib.Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def dead_socket(tmp_path):
    """A unix socket that exists but that nobody listens on (connection refused)."""
    path = tmp_path / "nobody.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))  # bound, never listening
    yield f"unix://{path}"
    sock.close()


@pytest.mark.parametrize("kind", ["refused", "missing"])
def test_build_without_an_engine_exits_2_with_a_clear_message(dead_socket, tmp_path, kind):
    import docker  # noqa: F401  (part of the dev extra)

    url = dead_socket if kind == "refused" else f"unix://{tmp_path}/absent.sock"
    proc = _run(
        ["-m", "puffer_core.cli.main", "tank", "build", "--stage", "base", "--no-constraints"],
        {"DOCKER_HOST": url, "PUFFER_DEBUG": ""},
    )
    assert proc.returncode == 2, proc.stderr
    assert f"no Docker engine answered at {url}: start one (dockerd) or set DOCKER_HOST" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_build_with_the_default_constraints_and_no_engine_exits_2(dead_socket):
    """The checkout's constraint set and hash-locked set are read and checked before the engine is asked."""
    import docker  # noqa: F401  (part of the dev extra)

    proc = _run(["-m", "puffer_core.cli.main", "tank", "build", "--stage", "base"], {"DOCKER_HOST": dead_socket})
    assert proc.returncode == 2, proc.stderr
    assert f"no Docker engine answered at {dead_socket}" in proc.stderr


def test_build_without_the_docker_sdk_exits_2(tmp_path):
    """Where the docker SDK is missing, the same exit code and what to install."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "docker.py").write_text("raise ImportError('docker SDK hidden by the test')\n")
    proc = _run(
        ["-m", "puffer_core.cli.main", "tank", "build", "--stage", "base", "--no-constraints"],
        {"PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])},
    )
    assert proc.returncode == 2, proc.stderr
    assert "pip install docker" in proc.stderr


def test_render_outside_a_checkout_says_so(tmp_path):
    # A scratch folder inside the checkout (TMPDIR set there) would render over the real file.
    assert ROOT not in tmp_path.resolve().parents, f"TMPDIR must lie outside the checkout, got {tmp_path}"
    proc = _run(["-m", "puffer_core.cli.main", "tank", "render", "--no-constraints"], {}, cwd=tmp_path)
    assert proc.returncode == 1
    assert "not inside a puffer-core checkout" in proc.stderr


def test_render_to_stdout(tmp_path):
    proc = _run(["-m", "puffer_core.cli.main", "tank", "render", "--no-constraints", "--output", "-"], {})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("# GENERATED FILE: do not edit.")
    assert "FROM ${BASE}" in proc.stdout
