"""From a bare Debian 12 machine to a command run in a user's own PufferTank (a benchmark).

    python -m puffer_core.bench.box [--image puffertank:latest] [--out bench-results/box]

What a new box costs, each step timed on this machine, in the order an admin and a user meet them:

- ``setup``: ``tank/setup-host.sh --user NAME`` in a fresh container of the bare Debian 12
  base image (``tank/ci-setup.sh`` makes it): apt's packages and puffer's venv. A container
  has no systemd, so the engine is installed there but not started;
- ``pull``: ``puffer tank pull REPO@sha256:…`` (the digest the push printed) into an engine
  that holds no image (a second ``dockerd`` on this machine with a data root of its own,
  removed after), from a registry on 127.0.0.1 that the image built here was pushed to first
  (Debian's ``docker-registry``);
- ``first login``: ``su - NAME -c 'test -f /.dockerenv'`` for a user whose login shell is
  ``puffertank-login``: the broker (through sudo) makes the user's container from the pulled image;
- ``later login``: the same again, the broker joining that container (the median of three);
- ``resume`` (not a step of a new box; ``--no-resume`` leaves it out): a user's detached
  ``puffer train`` (the image and a PyTorch layer), the engine crashed and back: the seconds
  until it answered and until the run, resumed by itself, stepped again;
- ``fleet`` (``--no-fleet`` leaves it out): three bare boxes (containers of the base, an engine
  each) brought up at once by ``ansible-playbook tank/fleet/site.yml``, to every user able to log in.

Needs root, ``docker``, ``dockerd``, ``docker-registry``, the base image and a PufferTank
built here (``puffer tank build``; tank/ci-setup.sh prepares the rest). The run is stored as ``OUT/<UTC time>.json``;
``python -m puffer_core.bench.results`` renders the table of ``docs/puffer-box.md`` from the newest.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from puffer_core.bench.broker_install import install_broker
from puffer_core.bench.containers import BASE_IMAGE, CONTAINER_CA, ROOT, machine_ca, machine_pip_env
from puffer_core.bench.fleet_boxes import time_fleet
from puffer_core.bench.resume_box import build_train_image, crash_and_return, load_image, start_detached
from puffer_core.bench.runs import write_run
from puffer_core.bench.scratch_docker import start_engine, start_registry

__all__ = ["STEPS", "render_markdown", "run_box_bench"]

#: The image the docker tests build (tests/tank/docker_tank.py) and `nox -s bench -- --box` times.
CI_IMAGE = "puffertank-ci"
STEPS = ("setup", "pull", "first login", "later login")
#: Where a container of the base gets a root-owned copy of the checkout: setup-host.sh builds
#: only from a source root owns (the host's checkout, mounted at /src, keeps the host's owners).
SOURCE_COPY = "/usr/src/puffer-core"
#: The files pip builds from (setup-host.sh's source_files), the constraints and the script,
#: copied from /src as root (owner root, the host's modes less umask 022's group and other write).
COPY_SOURCE = f"""
cd /src && mkdir -p {SOURCE_COPY}
for f in pyproject.toml setup.py setup.cfg MANIFEST.in README.md LICENSE LICENSE.txt \\
         puffer_core tank compat_matrix/constraints-common.txt; do [ -e "$f" ] && echo "$f"; done |
    tar -cf - --exclude=__pycache__ -T - | tar -C {SOURCE_COPY} --no-same-owner --no-same-permissions -xf -
"""
#: What the issue set out: the seed's figure for a new user on a new box, and the aim.
SEED_SECONDS, TARGET_SECONDS = 300.0, 120.0


def _timed(command: list[str], what: str, timeout: float, **kwargs: Any) -> float:
    """Seconds ``command`` took; RuntimeError with its last output when it failed."""
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-12:]
        raise RuntimeError(f"{what} failed (exit {proc.returncode}):\n" + "\n".join(tail))
    return seconds


def _machine_settings() -> list[str]:
    """``docker run`` options that give the container this machine's way to the package index
    (a box on the open internet needs none of them)."""
    ca = machine_ca()
    options = ["--mount", f"type=bind,source={ca},target={CONTAINER_CA},readonly"] if ca else []
    for key, value in machine_pip_env().items():
        options += ["--env", f"{key}={value}"]
    return options


def ci_build_command(tag: str = CI_IMAGE) -> list[str]:
    """``puffer tank build`` of the CI's PufferTank as ``tag`` (NetHack and Atari, no PyTorch, on the
    debootstrapped base), as the docker tests and this bench build it."""
    command = [
        sys.executable, "-m", "puffer_core.cli.main", "tank", "build",
        "--stage", "all",
        "--tag", tag,
        "--plugins", "nethack,atari",
        "--base-image", BASE_IMAGE,
        "--no-torch",
        "--network", "host",
        "--quiet",
    ]  # fmt: skip
    ca = machine_ca()
    if ca:
        command += ["--ca-cert", ca]
    if not (ROOT / "compat_matrix" / "constraints-common.txt").is_file():
        command.append("--no-constraints")
    return command


def time_setup(base_image: str) -> float:
    """tank/setup-host.sh in a fresh container of the bare base: packages and puffer's venv."""
    name = f"puffer-box-bench-{secrets.token_hex(4)}"
    command = [
        "docker", "run", "--rm", "--name", name, "--network", "host",
        "--mount", f"type=bind,source={ROOT},target=/src,readonly", *_machine_settings(),
        base_image, "bash", "-c",
        f"set -e\n{COPY_SOURCE}\nbash {SOURCE_COPY}/tank/setup-host.sh --source {SOURCE_COPY} --user boxuser",
    ]  # fmt: skip
    try:
        return _timed(command, "setup-host.sh in a bare Debian 12 container", timeout=1800)
    finally:
        subprocess.run(["docker", "rm", "--force", name], capture_output=True)


def time_pull(host: str, pinned: str) -> float:
    """``puffer tank pull REPO@sha256:…`` of the pushed image into the empty engine, as the box's image."""
    env = {**os.environ, "DOCKER_HOST": host}
    command = [sys.executable, "-m", "puffer_core.cli.main", "tank", "pull", pinned]
    return _timed(command, f"puffer tank pull {pinned}", timeout=1800, env=env)


@contextlib.contextmanager
def login_user(host: str, image: str = "puffertank:latest") -> Iterator[str]:
    """A user whose login shell is puffertank-login, served by a broker of the engine at ``host``; removed after."""
    name = f"ptbench{secrets.token_hex(3)}"
    box = install_broker(pathlib.Path(tempfile.mkdtemp(prefix="puffer-box-login-", dir="/tmp")), image,
                         docker_host=host)  # fmt: skip
    try:
        box.enrol(name)
        yield name
    finally:
        subprocess.run(["docker", "-H", host, "rm", "--force", f"puffertank-{name}"], capture_output=True)
        subprocess.run(["userdel", "--remove", name], capture_output=True)
        box.remove()


def time_logins(user: str) -> tuple[float, float]:
    """The first login (makes the container) and the median of three later ones (join it)."""
    command = ["su", "-", user, "-c", "test -f /.dockerenv"]
    first = _timed(command, f"the first login of {user}", timeout=300, stdin=subprocess.DEVNULL)
    later = [_timed(command, f"a later login of {user}", timeout=300, stdin=subprocess.DEVNULL) for _ in range(3)]
    return first, statistics.median(later)


def time_push(image: str, registry: str) -> tuple[float, str]:
    """``puffer tank push`` of the image this box built into the scratch registry (not a step of
    a new box: a fleet pushes once): its seconds and the final layer's ``REPO@sha256:…``."""
    command = [sys.executable, "-m", "puffer_core.cli.main", "tank", "push", image, "--registry", registry, "--json"]
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"puffer tank push {image} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    return seconds, json.loads(proc.stdout)["pins"]["final"]


def time_resume(engine: Any, image: str) -> dict[str, float]:
    """A detached run through the box's crash: ``image`` and PyTorch (one more layer) moved into
    the engine, a user's run started through their login, the engine crashed and back."""
    train = build_train_image(image, f"{image.rpartition(':')[0] or image}-train:latest")
    load_image(engine.url, train)
    with login_user(engine.url, train) as user:
        start_detached(user, steps=100_000_000)
        back, stepping = crash_and_return(engine, user)
    return {"engine_back": back, "stepping_again": stepping}


def run_box_bench(
    image: str = "puffertank:latest", base_image: str = BASE_IMAGE, resume: bool = True, fleet: bool = True
) -> dict[str, Any]:
    """Every step of a new box, timed: ``{"steps": {step: seconds}, "total": ..., ...}``.

    ``image`` (built here with ``puffer tank build``) is pushed to a registry on 127.0.0.1
    first; the new box pulls it from there into an engine of its own. With ``resume``, the
    time a detached run takes to step again after that engine crashed and came back too; with
    ``fleet``, three bare boxes brought up at once by the fleet's playbook.
    """
    if os.geteuid() != 0:
        raise RuntimeError("the box bench makes users and starts an engine and a registry: run it as root")
    steps = {"setup": time_setup(base_image)}
    registry = start_registry()
    try:
        repository = f"{registry.address}/puffertank"
        pushed, pinned = time_push(image, repository)
        engine = start_engine()
        try:
            steps["pull"] = time_pull(engine.url, pinned)
            with login_user(engine.url) as user:
                steps["first login"], steps["later login"] = time_logins(user)
            resumed = time_resume(engine, image) if resume else None
        finally:
            engine.stop()
    finally:
        registry.stop()
    total = steps["setup"] + steps["pull"] + steps["first login"]
    result = {"image": image, "base_image": base_image, "push_seconds": pushed, "steps": steps, "total": total}
    if resumed:
        result["resume"] = resumed
    if fleet:
        label = '{{index .Config.Labels "org.puffer.tank.lock"}}'
        inspect = ["docker", "image", "inspect", "--format", label, image]
        lock = subprocess.run(inspect, capture_output=True, text=True, timeout=60, check=True).stdout.strip()
        result["fleet"] = time_fleet(lock)
    return result


def render_markdown(document: dict[str, Any]) -> str:
    """The guide's table: each step's seconds, and the total against the seed's figure and the aim."""
    steps = document["steps"]
    lines = ["| step | seconds |", "|---|---:|"]
    lines += [f"| {step} | {steps[step]:.1f} |" for step in STEPS if step in steps]
    total = document["total"]
    lines.append(f"| **bare box to the first command in a user's tank** | **{total:.1f}** |")
    verdict = "under" if total < TARGET_SECONDS else "over"
    lines += [
        "",
        f"The total (setup, pull and first login) is {total / 60:.1f} minutes, {verdict} the aim of "
        f"{TARGET_SECONDS / 60:.0f} (the stack this project comes from quotes {SEED_SECONDS / 60:.0f}).",
    ]
    fleet = document.get("fleet")
    if fleet:
        lines += [
            "",
            f"An inventory of {fleet['boxes']} bare boxes and {fleet['users']} users, brought up at once by the "
            f"fleet's playbook (`ansible-playbook tank/fleet/site.yml`): every user could log in on each of their "
            f"boxes after {fleet['to_every_login']:.0f} s (the playbook {fleet['playbook']:.0f} s), against one "
            f"box's setup and first login of {steps['setup'] + steps['first login']:.0f} s above (a small image "
            "pulled: the pull is each box's own).",
        ]
    resume = document.get("resume")
    if resume:
        lines += [
            "",
            f"After the engine crashed (every process of it and its containers killed) and came back "
            f"({resume['engine_back']:.1f} s), a user's detached `puffer train` run was stepping again "
            f"{resume['stepping_again']:.1f} s later, resumed by itself from its last checkpoint.",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="puffertank:latest", help="the PufferTank built here [puffertank:latest]")
    parser.add_argument(
        "--build", action="store_true", help=f"build the CI's image ({CI_IMAGE}) first and bench it instead of --image"
    )
    parser.add_argument("--base-image", default=BASE_IMAGE, help=f"the bare Debian 12 image [{BASE_IMAGE}]")
    parser.add_argument("--out", default="bench-results/box", help="folder of runs [bench-results/box]")
    parser.add_argument("--no-resume", action="store_true", help="leave out the run resumed after a crash")
    parser.add_argument("--no-fleet", action="store_true", help="leave out the three boxes set up by the playbook")
    args = parser.parse_args(argv)
    try:
        if args.build:
            _timed(ci_build_command(), f"puffer tank build --tag {CI_IMAGE}", timeout=3600)
            args.image = f"{CI_IMAGE}:latest"
        result = run_box_bench(args.image, args.base_image, resume=not args.no_resume, fleet=not args.no_fleet)
    except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
        print(f"box bench: {exc}", file=sys.stderr)
        return 1
    document = write_run(args.out, result)
    print(render_markdown(document), end="")
    print(f"stored as {pathlib.Path(args.out) / (document['run'] + '.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
