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
import uuid

import pytest
from docker_tank import BASE_IMAGE, IMAGES, ROOT, unavailable

from puffer_core.bench.box import CONTAINER_CA, machine_ca, machine_pip_env
from puffer_core.bench.scratch_docker import REGISTRY_BINARY, start_engine, start_registry

pytestmark = [pytest.mark.docker, pytest.mark.slow]

LABEL = "org.puffer.test"
BOXES = ("fleet-a", "fleet-b", "fleet-c")
# What a box has before the playbook: python3 and sudo, for Ansible (a Debian 12 server has
# them), and homes under a base of its own (the box's /etc/default/useradd) that the box and
# the engine see at the same path (the engine mounts a user's home by its path).
PREPARE = """
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 sudo >/dev/null
echo "HOME=$1" >> /etc/default/useradd
# This machine's way to the package index, as root's pip settings (sudo, Ansible's become, resets
# the environment; setup-host.sh keeps none of it anyway but these, and pip reads /etc/pip.conf).
{ echo "[global]"; [ -z "${PIP_CERT:-}" ] || echo "cert = $PIP_CERT"
  [ -z "${PIP_INDEX_URL:-}" ] || echo "index-url = $PIP_INDEX_URL"; } > /etc/pip.conf
"""


def _docker(*args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    assert not check or proc.returncode == 0, proc.stderr
    return proc


def _in_box(box: str, script: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    return _docker("exec", box, "bash", "-c", script, check=check, timeout=timeout)


@pytest.fixture(scope="module")
def image(client, built):
    """A small PufferTank-like image (the base, with the CI image's lock) in a registry on 127.0.0.1, by digest."""
    if not os.path.exists(REGISTRY_BINARY):
        unavailable(f"{REGISTRY_BINARY} is missing (apt-get install docker-registry)")
    registry = start_registry()
    lock = client.images.get(IMAGES["final"]).labels["org.puffer.tank.lock"]
    tag = f"{registry.address}/fleet:1"
    build = subprocess.run(["docker", "build", "--quiet", "--tag", tag, "--label", f"org.puffer.tank.lock={lock}", "-"],
                           input=f"FROM {BASE_IMAGE}\n", capture_output=True, text=True, timeout=300)  # fmt: skip
    assert build.returncode == 0, build.stderr
    _docker("push", tag)
    digest = registry.manifest_digest("fleet", "1")
    _docker("rmi", tag)
    yield f"{registry.address}/fleet@{digest}"
    registry.stop()


@pytest.fixture(scope="module")
def boxes(client):
    """Three bare Debian 12 boxes, containers of the base, each served by an engine of its own
    (a second dockerd on this machine: containers cannot start an engine here) through the
    socket at its usual path; removed after."""
    if shutil.which("ansible-playbook") is None:
        unavailable("ansible is not installed (pip install ansible: the dev extra has it)")
    ca = machine_ca()
    options = ["--mount", f"type=bind,source={ca},target={CONTAINER_CA},readonly"] if ca else []
    for key, value in machine_pip_env().items():
        options += ["--env", f"{key}={value}"]
    names, engines, homes = [], [], []
    try:
        for box in BOXES:
            engine = start_engine()
            engines.append(engine)
            home = pathlib.Path(tempfile.mkdtemp(prefix=f"ptfleet-{box}-", dir="/srv"))
            home.chmod(0o755)
            homes.append(home)
            name = f"{box}-{uuid.uuid4().hex[:6]}"
            socket_path = engine.url.removeprefix("unix://")
            _docker("run", "--detach", "--network", "host", "--name", name, "--label", f"{LABEL}=fleet",
                    "--mount", f"type=bind,source={socket_path},target=/var/run/docker.sock",
                    "--mount", f"type=bind,source={home},target={home}", *options,
                    BASE_IMAGE, "sleep", "infinity")  # fmt: skip
            names.append(name)
        preparing = [subprocess.Popen(["docker", "exec", name, "bash", "-c", PREPARE, "prepare", str(home)])
                     for name, home in zip(names, homes, strict=True)]  # fmt: skip
        assert all(process.wait(900) == 0 for process in preparing), "a box did not prepare"
        yield dict(zip(BOXES, names, strict=True))
    finally:
        for name in names:
            _docker("rm", "--force", name, check=False)
        for engine in engines:
            engine.stop()
        for home in homes:
            shutil.rmtree(home, ignore_errors=True)


def _inventory(folder: pathlib.Path, boxes: dict[str, str], image: str, users: dict[str, list[str]]) -> pathlib.Path:
    hosts = {box: {"ansible_host": name, "ansible_connection": "community.docker.docker",
                   "ansible_python_interpreter": "/usr/bin/python3"} for box, name in boxes.items()}  # fmt: skip
    inventory = {"puffer_boxes": {"hosts": hosts, "vars": {"puffer_image": image, "puffer_users": users}}}
    path = folder / "inventory.json"  # YAML's superset: Ansible reads it as it reads inventory.example.yml
    path.write_text(json.dumps(inventory))
    return path


def _play(inventory: pathlib.Path, *extra: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run(["ansible-playbook", "-i", str(inventory), str(ROOT / "tank" / "fleet" / "site.yml"), *extra],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0"})  # fmt: skip


def _recap(output: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP's counters per box."""
    found = {}
    for line in output.split("PLAY RECAP")[-1].splitlines():
        parts = line.split(":", 1)
        if len(parts) == 2 and "ok=" in parts[1]:
            found[parts[0].strip()] = {k: int(v) for k, v in (item.split("=") for item in parts[1].split())}
    return found


def _enrolled(box: str) -> set[str]:
    members = _in_box(box, "getent group puffertank | cut -d: -f4").stdout.strip()
    return set(filter(None, members.split(",")))


def _logs_in(box: str, user: str) -> bool:
    """A login of ``user`` on ``box`` lands in their own tank (the box is a container: /.dockerenv says nothing)."""
    proc = _in_box(box, f"su - {user} -c 'echo $PUFFERTANK_CONTAINER'", check=False, timeout=300)
    return proc.returncode == 0 and proc.stdout.strip() == f"puffertank-{user}"


def test_the_fleet_from_bare_boxes_to_logins_and_back(boxes, image, tmp_path):
    users = {"alice": ["fleet-a"], "bob": ["fleet-a", "fleet-b"], "carol": ["fleet-c"]}
    inventory = _inventory(tmp_path, boxes, image, users)
    started = time.monotonic()
    first = _play(inventory)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    for box, name in boxes.items():
        assert _enrolled(name) == {user for user, on in users.items() if box in on}, box
        assert _in_box(name, "cat /etc/puffertank/image").stdout.strip() == image
    assert (
        _logs_in(boxes["fleet-a"], "alice")
        and _logs_in(boxes["fleet-b"], "bob")
        and _logs_in(boxes["fleet-c"], "carol")
    )
    print(f"\nthree bare boxes to every user able to log in: {time.monotonic() - started:.0f} s")
    assert not _logs_in(boxes["fleet-b"], "alice")  # not her box: no account there

    again = _play(inventory)
    assert again.returncode == 0 and all(counts["changed"] == 0 for counts in _recap(again.stdout).values()), (
        again.stdout
    )

    # bob moves from fleet-b to fleet-c: his login there ends in one line, his home stays.
    _in_box(boxes["fleet-b"], "echo kept > ~bob/notes && chown bob: ~bob/notes")
    moved = {**users, "bob": ["fleet-a", "fleet-c"]}
    inventory = _inventory(tmp_path, boxes, image, moved)
    check = _play(inventory, "--check", "--diff")
    assert check.returncode == 0 and "would take bob off this box" in check.stdout, check.stdout[-3000:]
    move = _play(inventory)
    assert move.returncode == 0, move.stdout[-3000:]
    assert move.stdout.count("user bob: taken off this box") == 1, move.stdout
    assert "bob" not in _enrolled(boxes["fleet-b"]) and "bob" in _enrolled(boxes["fleet-c"])
    assert _in_box(boxes["fleet-b"], "cat ~bob/notes").stdout == "kept\n"
    assert _logs_in(boxes["fleet-c"], "bob") and not _logs_in(boxes["fleet-b"], "bob")

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
    inventory = _inventory(tmp_path, boxes, image, {**moved, "dave": ["fleet-a", "fleet-c"]})
    partial = _play(inventory)
    recap = _recap(partial.stdout)
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


def test_a_box_whose_pull_fails_keeps_its_image_and_the_play_goes_on(boxes, image, tmp_path):
    bad = image.rpartition("@")[0] + "@sha256:" + "0" * 64  # a digest the registry never had
    inventory = _inventory(tmp_path, {"fleet-a": boxes["fleet-a"]}, bad, {"alice": ["fleet-a"]})
    before = _in_box(boxes["fleet-a"], "cat /etc/puffertank/image").stdout
    play = _play(inventory)
    assert play.returncode != 0 and "FAILED" in play.stdout + play.stderr
    assert "the registry has no" in play.stdout + play.stderr
    assert _in_box(boxes["fleet-a"], "cat /etc/puffertank/image").stdout == before


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
