"""Runs that outlive their box, for real: an enrolled user starts a detached run through their
login, the engine crashes (every process of it and its containers killed, its run-time state
gone, as at a power loss) and comes back; the user's container returns and the run resumes by
itself and finishes, with no session open; a second crash during the resumed run is survived
too; a run whose checkpoint went bad stops after its retries and says why.

"Another box": a second engine (its own dockerd and data root) holding the CI image plus a
layer with PyTorch's CPU wheel, matplotlib and tensorboard (the CI image is built --no-torch),
with the login and broker installed beside the box's own (install_broker). The time from the
engine's return to the run stepping again is printed (pytest -s) and is the box bench's
`resume` row.
"""

from __future__ import annotations

import io
import json
import pathlib
import secrets
import subprocess
import sys
import tarfile
import tempfile
import time

import pytest
from docker_tank import IMAGES, unavailable

from puffer_core.bench.broker_install import install_broker
from puffer_core.bench.scratch_docker import start_engine

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TRAIN_IMAGE = "puffertank-ci-train:latest"
TRAIN_PACKAGES = ("torch==2.13.0", "matplotlib", "tensorboard")


def _context(wheels: pathlib.Path) -> io.BytesIO:
    dockerfile = (
        f"FROM {IMAGES['final']}\n"
        "COPY wheels /tmp/wheels\n"
        f"RUN pip install --no-cache-dir --no-index --find-links /tmp/wheels {' '.join(TRAIN_PACKAGES)} "
        "&& rm -rf /tmp/wheels\n"
    )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        tar.add(wheels, arcname="wheels")
    buffer.seek(0)
    return buffer


@pytest.fixture(scope="module")
def train_image(client, built):
    """The CI image and one more layer: PyTorch's CPU wheel and what `puffer train` writes with."""
    wheels = pathlib.Path(tempfile.mkdtemp(prefix="puffertank-wheels-"))
    try:
        download = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(wheels),
                                   "--only-binary", ":all:", *TRAIN_PACKAGES], capture_output=True, text=True,
                                  timeout=1200)  # fmt: skip
        if download.returncode != 0:
            unavailable(f"pip download {' '.join(TRAIN_PACKAGES)} failed: {download.stderr[-400:]}")
        client.images.build(fileobj=_context(wheels), custom_context=True, tag=TRAIN_IMAGE, rm=True,
                            network_mode="host")  # fmt: skip
    finally:
        subprocess.run(["rm", "-rf", str(wheels)], check=False)
    return TRAIN_IMAGE


@pytest.fixture(scope="module")
def box(train_image):
    """Another box: an engine of its own holding the train image, and the login and broker serving it."""
    engine = start_engine()
    folder = pathlib.Path(tempfile.mkdtemp(prefix="ptruns-test-", dir="/tmp"))
    try:
        save = subprocess.Popen(["docker", "save", train_image], stdout=subprocess.PIPE)
        load = subprocess.run(["docker", "-H", engine.url, "load"], stdin=save.stdout, capture_output=True, timeout=900)
        save.wait(60)
        assert load.returncode == 0, load.stderr
        installed = install_broker(folder, train_image, docker_host=engine.url)
        yield engine, installed
        installed.remove()
    finally:
        engine.stop()


@pytest.fixture
def user(box):
    _, installed = box
    name = f"ptrun{secrets.token_hex(3)}"
    installed.enrol(name)
    yield name
    subprocess.run(["userdel", "--remove", name], capture_output=True)


def su(user: str, command: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["su", "-", user, "-c", command], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)  # fmt: skip


def record(user: str) -> dict:
    """The user's one run record, read from their home on the host (no session needed)."""
    found = list(pathlib.Path(f"/home/{user}/.local/state/puffer/runs").glob("*.json"))
    return json.loads(found[0].read_text()) if found else {}


def wait_for(condition, what: str, timeout: float = 300) -> float:
    started = time.monotonic()
    while time.monotonic() < started + timeout:
        if condition():
            return time.monotonic() - started
        time.sleep(0.25)
    raise AssertionError(f"{what} within {timeout:.0f} s")


def start_detached(user: str, steps: int) -> dict:
    command = (f"puffer train classic/cartpole --out ~/run --steps {steps} --set checkpoint_seconds=2 "
               "--set num_envs=8 --detach --json")  # fmt: skip
    proc = su(user, command)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wait_for(lambda: record(user).get("checkpoint_time") is not None, "a first checkpoint")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def crash_and_return(engine, user: str) -> tuple[float, float]:
    """The engine crashes and comes back: (seconds until it answered, seconds from then to the run stepping again)."""
    before = record(user)
    engine.crash()
    back = engine.start_again()
    stepping = wait_for(
        lambda: (
            (now := record(user)).get("pid_start") != before.get("pid_start")
            and (now.get("step") or 0) > (before.get("step") or 0)
        ),
        "the run resumed by itself and stepping",
    )
    return back, stepping


def test_a_detached_run_resumes_by_itself_after_the_box_crashes(box, user):
    engine, _ = box
    start_detached(user, steps=120_000)
    back, stepping = crash_and_return(engine, user)
    print(f"\nengine back in {back:.1f} s; the run stepping again {stepping:.1f} s after that")
    assert record(user)["resumes"][-1]["auto"] is True
    # A second crash, during the resumed run: a new boot of the container, so it resumes again.
    crash_and_return(engine, user)
    wait_for(lambda: record(user).get("state") == "finished", "finished", timeout=600)
    final = record(user)
    assert final["step"] >= 120_000 and len(final["resumes"]) == 2
    listed = su(user, "puffer runs --json")
    assert listed.returncode == 0 and json.loads(listed.stdout)[0]["state"] == "finished", listed.stderr
    log = pathlib.Path(f"/home/{user}/run/train.log").read_text()
    assert log.count("== ") == 3 and log.count("train --resume") == 2  # started, then resumed twice


def test_a_run_that_cannot_resume_gives_up_after_its_retries_and_says_why(box, user):
    engine, _ = box
    start_detached(user, steps=10_000_000)
    for attempt in range(3):
        engine.crash()
        if attempt == 0:  # a checkpoint that went bad while the box was down
            checkpoint = pathlib.Path(f"/home/{user}/run/policy.pt")
            checkpoint.write_bytes(b"not a checkpoint")
        engine.start_again()
        wait_for(lambda expected=attempt + 1: _failed(engine, record(user), expected), f"resume {attempt + 1} failed")
    engine.crash()
    engine.start_again()
    wait_for(lambda: record(user).get("state") == "gave-up", "gave up")
    data = record(user)
    assert "interrupted again within a minute of its resume 3 times in a row" in data["error"]
    assert "policy.pt" in data["error"]  # why: the resumed run's own error
    listed = json.loads(su(user, "puffer runs --json").stdout)[0]
    assert listed["state"] == "gave-up" and "resume it by hand once fixed" in listed["error"]


def _failed(engine, data: dict, resumes: int) -> bool:
    """The run was resumed ``resumes`` times and its last resume is over (it failed)."""
    over = data.get("state") in ("failed", "interrupted", "gave-up") and not _alive(engine, data)
    return len(data.get("resumes") or []) == resumes and over


def _alive(engine, data: dict) -> bool:
    """Whether the record's process runs in the user's container (looked at from the engine)."""
    container = (data.get("place") or "").rpartition("/")[2]
    proc = subprocess.run(["docker", "-H", engine.url, "exec", container, "kill", "-0", str(data.get("pid"))],
                          capture_output=True)  # fmt: skip
    return proc.returncode == 0
