"""Bare Debian 12 "boxes" for the fleet's playbook: the box bench's ``fleet`` row and the fleet's
docker tests (tests/tank/test_fleet_docker.py) share them.

A box is a container of the debootstrapped base with what a Debian 12 server has before the
playbook (python3 and sudo, for Ansible; root's pip settings in ``/etc/pip.conf`` where this
machine reaches the index through a CA of its own), served by an engine of its own (a
second ``dockerd`` on this machine, its socket at the box's ``/var/run/docker.sock``:
containers cannot start an engine here), with homes under a base the box and its engine see
at the same path (the engine mounts a user's home by its path). Ansible reaches a box with
its docker connection (the ``community.docker`` collection of the ``ansible`` package).
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

from puffer_core.bench.containers import BASE_IMAGE, CONTAINER_CA, ROOT, machine_ca, machine_pip_env
from puffer_core.bench.scratch_docker import start_engine, start_registry

__all__ = ["PLAYBOOK", "boxes", "in_box", "inventory", "logs_in", "play", "recap", "small_image", "time_fleet"]

PLAYBOOK = ROOT / "tank" / "fleet" / "site.yml"
LABEL = "org.puffer.test"
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
    if check and proc.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args[:3])} failed: {proc.stderr.strip()[-400:]}")
    return proc


def in_box(box: str, script: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
    """``script`` run by bash in box container ``box``, as root."""
    return _docker("exec", box, "bash", "-c", script, check=check, timeout=timeout)


@contextlib.contextmanager
def small_image(lock: str) -> Iterator[str]:
    """``REPO@sha256:…`` of a small PufferTank-like image (the base with a lock label) in a registry on 127.0.0.1."""
    registry = start_registry()
    try:
        tag = f"{registry.address}/fleet:1"
        command = ["docker", "build", "--quiet", "--tag", tag, "--label", f"org.puffer.tank.lock={lock}", "-"]
        build = subprocess.run(command, input=f"FROM {BASE_IMAGE}\n", capture_output=True, text=True, timeout=300)
        if build.returncode != 0:
            raise RuntimeError(f"building the fleet's image failed: {build.stderr[-400:]}")
        _docker("push", tag)
        digest = registry.manifest_digest("fleet", "1")
        _docker("rmi", tag)
        yield f"{registry.address}/fleet@{digest}"
    finally:
        registry.stop()


@contextlib.contextmanager
def boxes(names: tuple[str, ...]) -> Iterator[dict[str, str]]:
    """Bare boxes, one per name, prepared in parallel: {name: its container}; removed after."""
    if shutil.which("ansible-playbook") is None:
        raise RuntimeError("ansible is not installed: pip install ansible")
    ca = machine_ca()
    options = ["--mount", f"type=bind,source={ca},target={CONTAINER_CA},readonly"] if ca else []
    for key, value in machine_pip_env().items():
        options += ["--env", f"{key}={value}"]
    containers: dict[str, str] = {}
    engines, homes = [], []
    try:
        for box in names:
            engine = start_engine()
            engines.append(engine)
            home = pathlib.Path(tempfile.mkdtemp(prefix=f"ptfleet-{box}-", dir="/srv"))
            home.chmod(0o755)
            homes.append(home)
            container = f"{box}-{uuid.uuid4().hex[:6]}"
            _docker("run", "--detach", "--network", "host", "--name", container, "--label", f"{LABEL}=fleet",
                    "--mount", f"type=bind,source={engine.url.removeprefix('unix://')},target=/var/run/docker.sock",
                    "--mount", f"type=bind,source={home},target={home}", *options,
                    BASE_IMAGE, "sleep", "infinity")  # fmt: skip
            containers[box] = container
        preparing = [subprocess.Popen(["docker", "exec", container, "bash", "-c", PREPARE, "prepare", str(home)])
                     for container, home in zip(containers.values(), homes, strict=True)]  # fmt: skip
        if not all(process.wait(900) == 0 for process in preparing):
            raise RuntimeError("a box did not prepare (apt-get install python3 sudo)")
        yield containers
    finally:
        for container in containers.values():
            _docker("rm", "--force", container, check=False)
        for engine in engines:
            engine.stop()
        for home in homes:
            shutil.rmtree(home, ignore_errors=True)


def inventory(
    folder: pathlib.Path, containers: dict[str, str], image: str, users: dict[str, Any], limits: dict | None = None
) -> pathlib.Path:
    """An inventory of the boxes (JSON, which Ansible reads as it reads YAML), reached with the docker connection."""
    reach = {"ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3"}
    hosts = {box: {"ansible_host": container, **reach} for box, container in containers.items()}
    variables: dict[str, Any] = {"puffer_image": image, "puffer_users": users}
    if limits is not None:
        variables["puffer_limits"] = limits
    path = folder / "inventory.json"
    path.write_text(json.dumps({"puffer_boxes": {"hosts": hosts, "vars": variables}}))
    return path


def play(
    path: pathlib.Path, *extra: str, timeout: float = 1800, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``ansible-playbook -i PATH tank/fleet/site.yml EXTRA`` (``env``: more of the controller's environment)."""
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0", **(env or {})}
    command = ["ansible-playbook", "-i", str(path), str(PLAYBOOK), *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


def recap(output: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP's counters per box."""
    found = {}
    for line in output.split("PLAY RECAP")[-1].splitlines():
        parts = line.split(":", 1)
        if len(parts) == 2 and "ok=" in parts[1]:
            found[parts[0].strip()] = {k: int(v) for k, v in (item.split("=") for item in parts[1].split())}
    return found


def logs_in(container: str, user: str) -> bool:
    """A login of ``user`` on box ``container`` lands in their own tank (the box is a container itself:
    /.dockerenv says nothing, so the tank's own variable is read)."""
    proc = in_box(container, f"su - {user} -c 'echo $PUFFERTANK_CONTAINER'", check=False, timeout=300)
    return proc.returncode == 0 and proc.stdout.strip() == f"puffertank-{user}"


def time_fleet(lock: str) -> dict[str, Any]:
    """Three bare boxes to every user able to log in: the playbook's first run, then each user's first login."""
    names = ("fleet-a", "fleet-b", "fleet-c")
    users = {"alice": ["fleet-a"], "bob": ["fleet-a", "fleet-b"], "carol": ["fleet-c"]}
    with small_image(lock) as image, boxes(names) as containers, tempfile.TemporaryDirectory() as folder:
        path = inventory(pathlib.Path(folder), containers, image, users)
        started = time.monotonic()
        first = play(path)
        if first.returncode != 0:
            raise RuntimeError(f"the playbook failed:\n{first.stdout[-2000:]}")
        played = time.monotonic() - started
        for user, on in users.items():
            for box in on:
                if not logs_in(containers[box], user):
                    raise RuntimeError(f"{user} cannot log in on {box} after the playbook")
        total = time.monotonic() - started
    return {"boxes": len(names), "users": len(users), "playbook": played, "to_every_login": total}
