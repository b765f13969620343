"""The fleet for real: tank/fleet/site.yml run by Ansible against three throw-away Debian 12
"boxes" (privileged containers of the debootstrapped base, each with an engine of its own,
reached with Ansible's docker connection), their image pinned by digest in a registry on
127.0.0.1: users land on exactly their boxes and log in there; a second run changes nothing;
a user moved between boxes loses the login on the first (home kept) and gains it on the
second; a box made unreachable is reported while the others converge; `puffer fleet status
--json` reads all three back. The time from three bare boxes to every user able to log in
is printed (pytest -s) and is the box bench's fleet figure.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
from docker_tank import IMAGES, ROOT, unavailable

from puffer_core.bench import fleet_boxes as fleet
from puffer_core.bench.fleet_boxes import boxes as fleet_boxes, in_box, logs_in, small_image
from puffer_core.bench.scratch_docker import REGISTRY_BINARY

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BOXES = ("fleet-a", "fleet-b", "fleet-c")


def _docker(*args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    assert not check or proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def image(client, built):
    """A small PufferTank-like image (the base, with the CI image's lock) in a registry on 127.0.0.1, by digest."""
    if not os.path.exists(REGISTRY_BINARY):
        unavailable(f"{REGISTRY_BINARY} is missing (apt-get install docker-registry)")
    with small_image(client.images.get(IMAGES["final"]).labels["org.puffer.tank.lock"]) as pinned:
        yield pinned


@pytest.fixture(scope="module")
def boxes(client):
    """Three bare Debian 12 boxes (puffer_core.bench.fleet_boxes); removed after."""
    if shutil.which("ansible-playbook") is None:
        unavailable("ansible is not installed (pip install ansible; nox -s tests installs it)")
    with fleet_boxes(BOXES) as containers:
        yield containers


def _enrolled(box: str) -> set[str]:
    members = in_box(box, "getent group puffertank | cut -d: -f4").stdout.strip()
    return set(filter(None, members.split(",")))


@pytest.fixture
def controller_tmp():
    """The controller's TMPDIR, at a short path: ansible's RPC server binds a Unix socket in it,
    and a socket's path must fit in 107 bytes (under pytest's tmp_path it may not)."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="ctl-", dir="/tmp"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_fleet_from_bare_boxes_to_logins_and_back(boxes, image, tmp_path, controller_tmp):
    users = {"alice": ["fleet-a"], "bob": ["fleet-a", "fleet-b"], "carol": ["fleet-c"]}
    inventory = fleet.inventory(tmp_path, boxes, image, users, limits={"memory": "2G", "tanks": 3})
    # Another user of the controller plants the archive's old fixed name in its TMPDIR: never used now.
    planted = controller_tmp / "puffer-fleet-source.tar"
    planted.write_bytes(b"another user's archive")
    os.chown(planted, 65534, 65534)
    planted.chmod(0o666)
    started = time.monotonic()
    first = fleet.play(inventory, env={"TMPDIR": str(controller_tmp)})
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    assert planted.read_bytes() == b"another user's archive"
    assert [path.name for path in controller_tmp.iterdir()] == [planted.name]  # its private folder is gone
    for box, name in boxes.items():
        assert _enrolled(name) == {user for user, on in users.items() if box in on}, box
        assert in_box(name, "cat /etc/puffertank/image").stdout.strip() == image
        limits = in_box(name, "cat /etc/puffertank/limits").stdout
        assert "memory = 2048M\ntanks = 3\n" in limits, limits
    assert (
        logs_in(boxes["fleet-a"], "alice") and logs_in(boxes["fleet-b"], "bob") and logs_in(boxes["fleet-c"], "carol")
    )
    print(f"\nthree bare boxes to every user able to log in: {time.monotonic() - started:.0f} s")
    assert not logs_in(boxes["fleet-b"], "alice")  # not her box: no account there

    again = fleet.play(inventory)
    assert again.returncode == 0 and all(counts["changed"] == 0 for counts in fleet.recap(again.stdout).values()), (
        again.stdout
    )

    # bob moves from fleet-b to fleet-c: his login there ends in one line, his home stays.
    in_box(boxes["fleet-b"], "echo kept > ~bob/notes && chown bob: ~bob/notes")
    moved = {**users, "bob": ["fleet-a", "fleet-c"]}
    inventory = fleet.inventory(tmp_path, boxes, image, moved)
    check = fleet.play(inventory, "--check", "--diff")
    assert check.returncode == 0 and "would take bob off this box" in check.stdout, check.stdout[-3000:]
    move = fleet.play(inventory)
    assert move.returncode == 0, move.stdout[-3000:]
    assert move.stdout.count("user bob: taken off this box") == 1, move.stdout
    assert "bob" not in _enrolled(boxes["fleet-b"]) and "bob" in _enrolled(boxes["fleet-c"])
    assert in_box(boxes["fleet-b"], "cat ~bob/notes").stdout == "kept\n"
    assert logs_in(boxes["fleet-c"], "bob") and not logs_in(boxes["fleet-b"], "bob")

    status = subprocess.run([sys.executable, "-m", "puffer_core.cli.main", "fleet", "status", "-i", str(inventory),
                             "--json"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert status.returncode == 0, status.stderr
    rows = {row["box"]: row for row in json.loads(status.stdout)}
    assert set(rows) == set(BOXES) and all(row["reachable"] and row["image_is_inventorys"] for row in rows.values())
    assert {box: sorted(u["name"] for u in row["users"]) for box, row in rows.items()} == {
        "fleet-a": ["alice", "bob"], "fleet-b": [], "fleet-c": ["bob", "carol"]}  # fmt: skip
    assert all(row["users_match"] for row in rows.values())
    assert any(
        c["state"] == "running" for u in rows["fleet-a"]["users"] if u["name"] == "alice" for c in u["containers"]
    )

    # One box unreachable: reported, the others converge (dave joins fleet-a and fleet-c).
    _docker("stop", "--time", "1", boxes["fleet-b"])
    inventory = fleet.inventory(tmp_path, boxes, image, {**moved, "dave": ["fleet-a", "fleet-c"]})
    partial = fleet.play(inventory)
    recap = fleet.recap(partial.stdout)
    assert partial.returncode != 0 and recap["fleet-b"]["unreachable"] == 1, partial.stdout[-3000:]
    assert recap["fleet-a"]["failed"] == 0 and recap["fleet-c"]["failed"] == 0
    assert "dave" in _enrolled(boxes["fleet-a"]) and "dave" in _enrolled(boxes["fleet-c"])
    started = time.monotonic()
    status = subprocess.run([sys.executable, "-m", "puffer_core.cli.main", "fleet", "status", "-i", str(inventory),
                             "--json", "--timeout", "10"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert time.monotonic() - started < 120  # bounded, whatever the dead box does
    rows = {row["box"]: row for row in json.loads(status.stdout)}
    assert not rows["fleet-b"]["reachable"] and "unreachable" in rows["fleet-b"]["error"]
    assert rows["fleet-a"]["reachable"] and rows["fleet-c"]["reachable"]


def test_a_users_boxes_given_as_a_string_stop_the_play_before_anything_changes(boxes, image, tmp_path):
    """`erin: fleet-abc` (a string, not a list): Ansible's `in` would find `fleet-a` in its letters and
    enrol erin there. The play stops on the inventory's check, naming the entry; fleet status refuses it."""
    users = {"alice": ["fleet-a"], "erin": "fleet-abc"}
    inventory = fleet.inventory(tmp_path, {"fleet-a": boxes["fleet-a"]}, image, users)
    play = fleet.play(inventory)
    assert play.returncode != 0
    assert 'puffer_users: erin: "fleet-abc" is not a list of this inventory\'s boxes' in play.stdout, play.stdout
    assert "erin" not in _enrolled(boxes["fleet-a"])
    status = subprocess.run([sys.executable, "-m", "puffer_core.cli.main", "fleet", "status", "-i", str(inventory)],
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert status.returncode == 1 and 'puffer_users: erin: "fleet-abc" is not a list' in status.stderr, status.stderr


def test_a_box_whose_pull_fails_keeps_its_image_and_the_play_goes_on(boxes, image, tmp_path):
    bad = image.rpartition("@")[0] + "@sha256:" + "0" * 64  # a digest the registry never had
    inventory = fleet.inventory(tmp_path, {"fleet-a": boxes["fleet-a"]}, bad, {"alice": ["fleet-a"]})
    before = in_box(boxes["fleet-a"], "cat /etc/puffertank/image").stdout
    play = fleet.play(inventory)
    assert play.returncode != 0 and "FAILED" in play.stdout + play.stderr
    assert "the registry has no" in play.stdout + play.stderr
    assert in_box(boxes["fleet-a"], "cat /etc/puffertank/image").stdout == before


def test_the_example_inventory_is_what_the_playbook_reads():
    example = ROOT / "tank" / "fleet" / "inventory.example.yml"
    folder = pathlib.Path(tempfile.mkdtemp())
    try:
        proc = subprocess.run(["ansible-inventory", "-i", str(example), "--list"], capture_output=True, text=True,
                              timeout=120, cwd=folder)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert data["puffer_boxes"]["hosts"] == ["box1", "box2"]
        variables = data["_meta"]["hostvars"]["box1"]
        assert "@sha256:" in variables["puffer_image"]
        assert variables["puffer_users"] == {"alice": ["box1"], "bob": ["box1", "box2"]}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_ray_prints_the_steps_for_a_users_boxes():
    example = ROOT / "tank" / "fleet" / "inventory.example.yml"
    proc = subprocess.run([sys.executable, "-m", "puffer_core.cli.main", "fleet", "ray", "-i", str(example), "--user",
                           "bob"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "box1 (10.0.0.11), box2 (10.0.0.12)" in lines[1]
    assert any("ray start --head --port 6379 --node-ip-address 10.0.0.11" in line for line in lines)
    assert any(line.startswith("ssh bob@10.0.0.12 ") and "ray start --address 10.0.0.11:6379" in line for line in lines)
    assert all("RAY_AUTH_TOKEN=" not in line for line in lines)  # the token is a file, never a command line
    refused = subprocess.run([sys.executable, "-m", "puffer_core.cli.main", "fleet", "ray", "-i", str(example),
                              "--user", "nobody"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert refused.returncode == 1 and "nobody is on no box of" in refused.stderr
