"""PufferTank built for real: the three layers with the nethack and atari plugins on a
debootstrapped Debian 12 base (PyTorch skipped), then NetHack and Breakout run inside.

Needs a Docker engine and the base image that ``tank/ci-setup.sh`` prepares (engine,
debootstrap, ``puffertank-debian:bookworm``). Skipped when no engine answers, unless
``PUFFER_DOCKER_TESTS=1`` (what .ci/run sets), which turns a missing engine into a failure.

Environment: PUFFERTANK_DEBIAN_IMAGE (base image, default puffertank-debian:bookworm),
PUFFERTANK_CA_CERT (CA bundle for --ca-cert, default the system bundle when present).
The first build takes minutes (about 3 for the base, 1 for the envs, 1.5 for the final
layer here); later runs hit the engine's layer cache and take seconds.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parents[1]
TAG = "puffertank-ci"
IMAGES = {"base": f"{TAG}:base", "envs": f"{TAG}:envs", "final": f"{TAG}:latest"}
BASE_IMAGE = os.environ.get("PUFFERTANK_DEBIAN_IMAGE", "puffertank-debian:bookworm")
FORCED = os.environ.get("PUFFER_DOCKER_TESTS") == "1"
SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"


def _unavailable(reason: str):
    if FORCED:
        pytest.fail(f"PUFFER_DOCKER_TESTS=1 but {reason}; run tank/ci-setup.sh first")
    pytest.skip(f"{reason} (run tank/ci-setup.sh and set PUFFER_DOCKER_TESTS=1)")


@pytest.fixture(scope="module")
def client():
    try:
        import docker
    except ImportError:
        _unavailable("the docker SDK is not installed (pip install docker)")
    try:
        engine = docker.from_env(timeout=30)
        engine.ping()
    except Exception as exc:
        _unavailable(f"no Docker engine answered ({type(exc).__name__})")
    try:
        engine.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        _unavailable(f"the base image {BASE_IMAGE} is not on the engine")
    return engine


@pytest.fixture(scope="module")
def built(client):
    """Build the three layers once through the CLI, exactly as a user would."""
    command = [
        sys.executable, "-m", "puffer_core.tank.cli", "build",
        "--stage", "all",
        "--tag", TAG,
        "--plugins", "nethack,atari",
        "--base-image", BASE_IMAGE,
        "--no-torch",
        "--network", "host",
        "--quiet",
    ]  # fmt: skip
    ca = os.environ.get("PUFFERTANK_CA_CERT") or (SYSTEM_CA if os.path.isfile(SYSTEM_CA) else None)
    if ca:
        command += ["--ca-cert", ca]
    if not (ROOT / "compat_matrix" / "constraints-common.txt").is_file():
        command.append("--no-constraints")
    started = time.monotonic()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    seconds = time.monotonic() - started
    log = proc.stdout + proc.stderr
    print(f"puffer tank build took {seconds:.0f} s\n{log[-3000:]}")
    assert proc.returncode == 0, f"build failed (exit {proc.returncode}):\n{log[-6000:]}"
    return {"log": log, "ca": ca, "seconds": seconds}


def _run(client, command, image=IMAGES["final"], **kwargs) -> str:
    out = client.containers.run(image, command, network_mode="none", remove=True, stdout=True, stderr=True, **kwargs)
    return out.decode("utf-8", "replace")


def test_three_layers_are_built_and_chained(client, built):
    for stage, image in IMAGES.items():
        assert client.images.get(image), stage
    labels = client.images.get(IMAGES["envs"]).labels
    assert labels["org.puffer.tank.plugins"] == "atari,nethack"
    # Layer 3 sits on layer 2, which sits on layer 1.
    final_layers = client.images.get(IMAGES["final"]).attrs["RootFS"]["Layers"]
    envs_layers = client.images.get(IMAGES["envs"]).attrs["RootFS"]["Layers"]
    base_layers = client.images.get(IMAGES["base"]).attrs["RootFS"]["Layers"]
    assert final_layers[: len(envs_layers)] == envs_layers
    assert envs_layers[: len(base_layers)] == base_layers


@pytest.mark.parametrize(("env_id", "plugin"), [("nethack/score", "nethack"), ("atari/breakout", "atari")])
def test_envs_run_inside_the_tank(client, built, env_id, plugin):
    out = _run(client, ["puffer", "run", env_id, "--steps", "200"])
    assert f"{env_id}: 200 steps in" in out, out
    # The entrypoint's banner: versions, and the warning that no GPU is visible here.
    assert "puffertank: python 3.11" in out and f"puffer-plugin-{plugin} 0.1.0" in out, out
    assert "puffer-core 0.1.0" in out
    assert "no GPU visible" in out


def test_base_layer_has_python_311_in_a_venv_and_tools(client, built):
    out = _run(
        client,
        ["bash", "-c", "python --version; command -v python pip git vim curl gcc make nvim; "
         "python -c 'import torch' 2>&1 | tail -1"],
    )  # fmt: skip
    assert "Python 3.11." in out
    for tool in ("/opt/venv/bin/python", "/opt/venv/bin/pip", "git", "vim", "curl", "gcc", "make", "nvim"):
        assert tool in out, out
    assert "No module named 'torch'" in out  # TORCH was empty


def test_entrypoint_passes_exit_codes_and_quiet_mode(client, built):
    import docker

    with pytest.raises(docker.errors.ContainerError) as excinfo:
        _run(client, ["bash", "-c", "exit 7"])
    assert excinfo.value.exit_status == 7
    quiet = _run(client, ["echo", "hello"], environment={"PUFFERTANK_QUIET": "1"})
    assert quiet.strip() == "hello"


def test_ca_bundle_is_not_left_in_any_layer(client, built):
    if built["ca"] is None:
        pytest.skip("built without --ca-cert (no CA bundle on this machine)")
    for image in IMAGES.values():
        out = _run(
            client,
            ["bash", "-c", "find / -xdev -name 'puffer-ca*' 2>/dev/null; ls -A /dev/shm; "
             "env | grep -E '^(PIP_CERT|APT_CONFIG|SSL_CERT_FILE|REQUESTS_CA_BUNDLE|PUFFER_CA_URL)=' || true"],
            image=image,
            environment={"PUFFERTANK_QUIET": "1"},
        )  # fmt: skip
        assert out.strip() == "", f"{image} still holds the CA bundle or its settings:\n{out}"
        # The history names the URL the bundle was served from, never its content.
        history = " ".join(entry.get("CreatedBy", "") for entry in client.api.history(image))
        assert "BEGIN CERTIFICATE" not in history
        assert "PUFFER_CA_URL=http://127.0.0.1:" in history, "the build steps did not get the CA bundle"


def test_building_on_a_missing_layer_says_which_to_build_first(client):
    proc = subprocess.run(
        [sys.executable, "-m", "puffer_core.tank.cli", "build", "--stage", "final", "--tag", "puffertank-absent"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    assert "image puffertank-absent:envs is not on this engine" in proc.stderr
    assert "puffer tank build --stage envs" in proc.stderr
