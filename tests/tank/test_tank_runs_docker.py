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

import json
import pathlib
import secrets
import subprocess
import tempfile

import pytest
from docker_tank import IMAGES, unavailable

from puffer_core.bench.broker_install import install_broker
from puffer_core.bench.resume_box import (
    build_train_image,
    crash_and_return,
    load_image,
    record,
    start_detached,
    wait_for,
)
from puffer_core.bench.scratch_docker import start_engine

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TRAIN_IMAGE = "puffertank-ci-train:latest"


@pytest.fixture(scope="module")
def box(client, built):
    """Another box: an engine of its own holding the train image, and the login and broker serving it."""
    try:
        build_train_image(IMAGES["final"], TRAIN_IMAGE)
    except RuntimeError as exc:
        unavailable(str(exc))
    engine = start_engine()
    folder = pathlib.Path(tempfile.mkdtemp(prefix="ptruns-test-", dir="/tmp"))
    try:
        load_image(engine.url, TRAIN_IMAGE)
        installed = install_broker(folder, TRAIN_IMAGE, docker_host=engine.url)
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


HOG = "python3 -c 'x = bytearray(6 * 2**30)'"  # 6 GiB, far past the tank's 2 GiB
#: Processes until the tank's limit refuses one (or 4,000: no limit then), each left sleeping; prints the count.
FORK_BOMB = """python3 - <<'EOF'
import subprocess
children = []
try:
    while len(children) < 4000:
        children.append(subprocess.Popen(["sleep", "60"]))
except OSError as exc:
    print("refused after", len(children), exc.strerror)
for child in children:
    child.kill()
EOF"""


def test_one_users_memory_hog_and_fork_bomb_stop_inside_their_tank_while_anothers_run_finishes(box, user):
    engine, installed = box
    installed.limits.write_text("memory = 2G\npids = 512\n")
    other = f"ptrun{secrets.token_hex(3)}"
    installed.enrol(other)
    try:
        start_detached(user, steps=40_000)
        hog = su(other, HOG)
        assert hog.returncode == 137, hog.stdout + hog.stderr  # killed by the kernel inside its tank's 2 GiB
        bomb = su(other, FORK_BOMB)
        assert bomb.returncode == 0 and "refused after" in bomb.stdout, bomb.stdout + bomb.stderr
        assert int(bomb.stdout.split()[2]) < 512
        assert su(other, "echo still here").stdout == "still here\n"  # their tank survived both
        for name in (user, other):
            shape = "{{.HostConfig.Memory}} {{.HostConfig.PidsLimit}}"
            inspected = subprocess.run(["docker", "-H", engine.url, "inspect", "--format", shape, f"puffertank-{name}"],
                                       capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
            assert inspected == [str(2 * 2**30), "512"]
        wait_for(lambda: record(user).get("state") in ("finished", "failed"), "the other user's run ended", 600)
        final = record(user)
        assert final["state"] == "finished" and final["step"] >= 40_000, final
        assert final.get("resumes") in (None, [])  # it never stopped: it stepped through the hog and the bomb
    finally:
        installed.limits.write_text("")
        subprocess.run(["userdel", "--remove", other], capture_output=True)
