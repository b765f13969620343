"""What one box says of itself for ``puffer fleet status``: ``puffer fleet facts --json``, run there as root.

Its image (``/etc/puffertank/image``, the image id and registry digests the engine holds),
each enrolled user (group ``puffertank``) with their containers (the broker's records) and
their runs (the records under their home: ``running`` while the run shows a sign of life,
``interrupted`` once it stopped without finishing), the load, the free disk, and each GPU's
memory and utilisation where ``nvidia-smi`` answers, and the limits of each tank. Every wait is
bounded; what cannot be read is left out with the reason, never a hang.

Root reads files users wrote: a user's run records are reached from their home without following
a link at any step, opened without blocking, and read only when they are regular files of that
user's, at most a few hundred kilobytes, holding a record whose fields have their types; anything
else is named in the user's ``problems`` and skipped.
"""

from __future__ import annotations

import dataclasses
import grp
import json
import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from puffer_core.atomic import open_directory_below
from puffer_core.tank.box.limits import LimitsError, box_limits
from puffer_core.tank.box.protocol import DEFAULT_IMAGE, DOCKER, GROUP, IMAGE_FILE, LIMITS_FILE, STATE_DIR
from puffer_core.train import runs

__all__ = ["box_facts"]

#: A run whose record shows no sign of life for this long is not running any more.
SILENT_SECONDS = 4 * runs.BEAT_SECONDS
TIMEOUT = 8.0


def _run(argv: list[str]) -> str | None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL,
                              env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"})  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _image() -> dict[str, Any]:
    try:
        named = (Path(IMAGE_FILE).read_text(encoding="utf-8").split() or [None])[0]
    except OSError:
        named = None
    found = _run([DOCKER, "image", "inspect", "--", named or DEFAULT_IMAGE])
    image: dict[str, Any] = {"file": named, "id": None, "digests": []}
    if found:
        data = (json.loads(found) or [{}])[0]
        image.update(id=data.get("Id"), digests=data.get("RepoDigests") or [])
    return image


def _containers() -> dict[int, list[dict[str, Any]]]:
    """The broker's containers by owner uid: name, state, since."""
    by_uid: dict[int, list[dict[str, Any]]] = {}
    try:
        records = sorted(Path(STATE_DIR).glob("*.json"))
    except OSError:
        return by_uid
    for path in records:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        found = _run([DOCKER, "inspect", "--format", "{{json .}}", "--", path.stem])
        if not found or not isinstance(record, dict):
            continue
        data = json.loads(found)
        state = data.get("State") or {}
        by_uid.setdefault(int(record.get("uid", -1)), []).append({
            "name": data.get("Name", "").lstrip("/"),
            "state": "running" if state.get("Running") else state.get("Status", "stopped"),
            "since": state.get("StartedAt") if state.get("Running") else state.get("FinishedAt"),
        })  # fmt: skip
    return by_uid


#: Where a user's run records are, below their home (``puffer_core.train.runs.registry_dir``'s default).
REGISTRY = (".local", "state", "puffer", "runs")


def _runs(home: str, uid: int, now: float, problems: list[str]) -> list[dict[str, Any]]:
    """The user's runs as their records say, judged from outside their containers by their signs of life."""
    try:
        fd = open_directory_below(home, REGISTRY)
    except FileNotFoundError:
        return []
    except OSError as exc:
        problems.append(f"{Path(home, *REGISTRY)}: {exc.strerror or exc}: not read")
        return []
    try:
        records = runs.scan(Path(home, *REGISTRY), fd, owner=uid, problems=problems)
    finally:
        os.close(fd)
    found = []
    for _, data in records:
        state = data.get("state")
        if state == "running" and now - float(data.get("heartbeat") or 0) > SILENT_SECONDS:
            state = "interrupted"
        found.append({"out": data["out"], "env": data.get("env"), "state": state, "step": data.get("step"),
                      "steps": data.get("steps_total")})  # fmt: skip
    return found


def _users(now: float) -> list[dict[str, Any]]:
    try:
        names = sorted(set(grp.getgrnam(GROUP).gr_mem))
    except KeyError:
        return []
    containers = _containers()
    users = []
    for name in names:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        problems: list[str] = []
        found = _runs(entry.pw_dir, entry.pw_uid, now, problems)
        users.append({"name": name, "containers": containers.get(entry.pw_uid, []), "runs": found,
                      "problems": problems})  # fmt: skip
    return users


def _gpus() -> list[dict[str, Any]] | None:
    if shutil.which("nvidia-smi") is None:
        return None
    out = _run(["nvidia-smi", "--query-gpu=name,memory.used,memory.total,utilization.gpu",
                "--format=csv,noheader,nounits"])  # fmt: skip
    if out is None:
        return None
    gpus = []
    for line in out.strip().splitlines():
        name, used, total, utilisation = (part.strip() for part in line.split(","))
        gpus.append({"name": name, "memory_used_mb": float(used), "memory_total_mb": float(total),
                     "utilisation_percent": float(utilisation)})  # fmt: skip
    return gpus


def box_facts() -> dict[str, Any]:
    """This box, as ``puffer fleet status`` shows it (see the module's docstring)."""
    now = time.time()
    disk = shutil.disk_usage("/")
    return {
        "host": os.uname().nodename,
        "image": _image(),
        "users": _users(now),
        "load": list(os.getloadavg()),
        "cpus": os.cpu_count(),
        "disk_free_gb": round(disk.free / 1e9, 1),
        "gpus": _gpus(),
        "limits": _limits(),
    }


def _limits() -> dict[str, Any]:
    """Each tank's limits here (what the broker applies), or why they cannot be read."""
    try:
        limits = box_limits(LIMITS_FILE)
    except (LimitsError, OSError) as exc:
        return {"error": str(exc)}
    return {**dataclasses.asdict(limits), "describe": limits.describe()}
