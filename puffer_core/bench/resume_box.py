"""A detached run through a box's crash: the pieces the box bench's ``resume`` row and the tank's
runs tests share (tests/tank/test_tank_runs_docker.py).

- :func:`build_train_image`: the CI image plus one layer with PyTorch's CPU wheel, matplotlib
  and tensorboard (the CI image is built ``--no-torch``; ``puffer train`` needs them);
- :func:`load_image`: an image moved into another engine (``docker save | docker load``);
- :func:`start_detached`: a user's ``puffer train --detach`` through their login, waited on
  until its first checkpoint;
- :func:`crash_and_return`: the engine crashes (as at a power loss) and comes back; the seconds
  until it answered, and from then until the run, resumed by itself, steps again.

A run's record is read from the user's home on the host (``~/.local/state/puffer/runs``): no
session is opened to watch it.
"""

from __future__ import annotations

import io
import json
import pathlib
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "TRAIN_PACKAGES",
    "build_train_image",
    "crash_and_return",
    "image_python",
    "load_image",
    "record",
    "start_detached",
]

TRAIN_PACKAGES = ("torch==2.13.0", "matplotlib", "tensorboard")


def _context(base: str, wheels: pathlib.Path) -> io.BytesIO:
    dockerfile = (
        f"FROM {base}\n"
        "COPY wheels /tmp/wheels\n"
        f"RUN python3 -m pip install --no-cache-dir --no-index --find-links /tmp/wheels {' '.join(TRAIN_PACKAGES)} "
        "&& rm -rf /tmp/wheels\n"
    )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile.encode())
        tar.addfile(info, io.BytesIO(dockerfile.encode()))
        tar.add(wheels, arcname="wheels")
    return buffer


def image_python(image: str) -> str:
    """The ``X.Y`` of the ``python3`` on ``image``'s PATH (the wheels are fetched for it, not for us)."""
    proc = subprocess.run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "python3", "--", image, "-c",
                           "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"asking {image} for its python3 failed: {proc.stderr[-400:]}")
    return proc.stdout.strip()


def build_train_image(base: str, tag: str) -> str:
    """``tag``: ``base`` and a layer with :data:`TRAIN_PACKAGES` (wheels fetched here for the image's Python,
    installed offline)."""
    version = image_python(base)
    with tempfile.TemporaryDirectory(prefix="puffertank-wheels-") as folder:
        # This interpreter may be another Python than the image's (the 3.13 test session, a 3.11 image).
        download = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--dest", folder,
                                   "--only-binary", ":all:", "--python-version", version, *TRAIN_PACKAGES],
                                  capture_output=True, text=True, timeout=1200)  # fmt: skip
        if download.returncode != 0:
            raise RuntimeError(
                f"pip download {' '.join(TRAIN_PACKAGES)} for Python {version} failed: {download.stderr[-400:]}"
            )
        context = _context(base, pathlib.Path(folder)).getvalue()
    build = subprocess.run(["docker", "build", "--quiet", "--network", "host", "--tag", tag, "-"], input=context,
                           capture_output=True, timeout=1800)  # fmt: skip
    if build.returncode != 0:
        raise RuntimeError(f"building {tag} failed: {build.stderr.decode(errors='replace')[-800:]}")
    return tag


def load_image(url: str, image: str) -> None:
    """``image`` from this machine's engine into the engine at ``url``."""
    save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
    load = subprocess.run(["docker", "-H", url, "load"], stdin=save.stdout, capture_output=True, timeout=1800)
    save.wait(60)
    if load.returncode != 0 or save.returncode != 0:
        raise RuntimeError(f"moving {image} into {url} failed: {load.stderr.decode(errors='replace')[-400:]}")


def record(user: str) -> dict[str, Any]:
    """The user's one run record, from their home on the host."""
    found = list(pathlib.Path(f"/home/{user}/.local/state/puffer/runs").glob("*.json"))
    return json.loads(found[0].read_text()) if found else {}


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 300) -> float:
    """Seconds until ``condition()`` held; RuntimeError naming ``what`` after ``timeout``."""
    started = time.monotonic()
    while time.monotonic() < started + timeout:
        if condition():
            return time.monotonic() - started
        time.sleep(0.25)
    raise RuntimeError(f"{what} did not happen within {timeout:.0f} s")


def start_detached(user: str, steps: int, env: str = "classic/cartpole") -> dict[str, Any]:
    """``puffer train ENV --detach`` as ``user`` through their login (``su -``); its output, at its first checkpoint."""
    command = (f"puffer train {env} --out ~/run --steps {steps} --set checkpoint_seconds=2 --set num_envs=8 "
               "--detach --json")  # fmt: skip
    proc = subprocess.run(["su", "-", user, "-c", command], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"puffer train --detach as {user} failed: {proc.stdout}{proc.stderr}")
    wait_for(lambda: record(user).get("checkpoint_time") is not None, "a first checkpoint")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def crash_and_return(engine: Any, user: str) -> tuple[float, float]:
    """The engine crashes and comes back: (seconds until it answered, seconds from then to the run stepping again)."""
    before = record(user)
    engine.crash()
    back = engine.start_again()

    def stepping() -> bool:
        now = record(user)
        return now.get("pid_start") != before.get("pid_start") and (now.get("step") or 0) > (before.get("step") or 0)

    return back, wait_for(stepping, "the run resumed by itself and stepping")
