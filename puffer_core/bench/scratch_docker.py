"""A registry and a second Docker engine on this machine only: "another box" for the registry
tests (tests/tank/test_tank_registry_docker.py) and the box bench (:mod:`puffer_core.bench.box`).

- :func:`start_registry`: Debian's ``docker-registry`` (``/usr/bin/docker-registry serve
  CONFIG``) on 127.0.0.1, storing in a temporary folder, optionally behind an htpasswd
  login; the engine talks plain HTTP to it (127.0.0.0/8 is an insecure-allowed range by
  default).
- :func:`start_engine`: a second ``dockerd`` with its own data root, exec root and socket
  (``--bridge=none --iptables=false``, as tank/ci-setup.sh starts the first): "another box",
  whose image store holds nothing the first one built, so a pull there moves every layer.

Each returns an object whose ``stop()`` ends the process and removes its folder; the test
modules call it from their fixtures' teardown.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

REGISTRY_BINARY = "/usr/bin/docker-registry"
DOCKERD = shutil.which("dockerd") or "/usr/bin/dockerd"


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on (now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stop(process: subprocess.Popen, seconds: float = 30) -> None:
    """SIGTERM, then SIGKILL to the whole process group if it is still there after ``seconds``."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(seconds)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@dataclass
class Registry:
    """A running ``docker-registry`` at ``address`` (127.0.0.1:PORT)."""

    process: subprocess.Popen
    address: str
    folder: pathlib.Path

    def tags(self, name: str, auth: str | None = None) -> list[str]:
        """The tags of repository ``name``, from the registry's own API."""
        request = urllib.request.Request(f"http://{self.address}/v2/{name}/tags/list")
        if auth:
            request.add_header("Authorization", auth)
        with urllib.request.urlopen(request, timeout=10) as response:
            return sorted(json.load(response).get("tags") or [])

    def manifest_digest(self, name: str, tag: str) -> str:
        """The digest of ``name:tag``'s manifest (what the registry stored for the tag)."""
        request = urllib.request.Request(f"http://{self.address}/v2/{name}/manifests/{tag}", method="HEAD")
        request.add_header("Accept", "application/vnd.docker.distribution.manifest.v2+json")
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.headers["Docker-Content-Digest"]

    def stop(self) -> None:
        _stop(self.process)
        shutil.rmtree(self.folder, ignore_errors=True)


def start_registry(htpasswd: str | None = None) -> Registry:
    """``docker-registry serve`` on 127.0.0.1:<free port>, answering /v2/ (within 30 s)."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="puffertank-registry-"))
    port = free_port()
    auth = ""
    if htpasswd is not None:
        (folder / "htpasswd").write_text(htpasswd)
        auth = f"auth:\n  htpasswd:\n    realm: puffertank-test\n    path: {folder / 'htpasswd'}\n"
    config = folder / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log:\n  level: warn\n  accesslog:\n    disabled: true\n"
        f"storage:\n  filesystem:\n    rootdirectory: {folder / 'data'}\n  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n" + auth
    )
    with open(folder / "registry.log", "wb") as log:  # the child keeps its own descriptor
        process = subprocess.Popen(
            [REGISTRY_BINARY, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    registry = Registry(process, f"127.0.0.1:{port}", folder)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://{registry.address}/v2/", timeout=2).close()
            return registry
        except urllib.error.HTTPError:
            return registry  # 401: up, and asking for a login
        except OSError:
            if process.poll() is not None:
                break
            time.sleep(0.2)
    registry.stop()
    raise RuntimeError(f"docker-registry did not answer on {registry.address}: {(folder / 'registry.log')}")


@dataclass
class Engine:
    """A running second ``dockerd``; ``url`` is its DOCKER_HOST."""

    process: subprocess.Popen
    url: str
    folder: pathlib.Path

    def env(self) -> dict[str, str]:
        return {"DOCKER_HOST": self.url}

    def crash(self) -> None:
        """What a power loss does to the engine: every process of it and of its containers killed
        (SIGKILL), and its exec root gone (on a box, under /run: a tmpfs a reboot empties)."""
        found = subprocess.run(["docker", "-H", self.url, "ps", "-q"], capture_output=True, text=True, timeout=60)
        inits = []
        if found.stdout.split():
            pids = subprocess.run(["docker", "-H", self.url, "inspect", "--format", "{{.State.Pid}}",
                                   *found.stdout.split()], capture_output=True, text=True, timeout=60)  # fmt: skip
            inits = [int(pid) for pid in pids.stdout.split() if pid.isdigit() and int(pid) > 0]
        # dockerd, its containerd and the shims: each names this engine's folder on its command line.
        subprocess.run(["pkill", "-KILL", "-f", f"{self.folder}/"], capture_output=True)
        self.process.wait(30)
        for pid in inits:  # each container's init: the kernel kills the rest of its pid namespace with it
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _unmount_below(self.folder / "x")
        shutil.rmtree(self.folder / "x", ignore_errors=True)

    def start_again(self) -> float:
        """The engine back on the same data (after :meth:`crash`); the seconds until it answered."""
        started = time.monotonic()
        self.process = _launch_dockerd(self.folder, self.url)
        _wait_answering(self, started)
        return time.monotonic() - started

    def stop(self) -> None:
        _stop(self.process, 60)
        _unmount_below(self.folder)  # dockerd unmounts its layers on the way out; a killed one may not have
        shutil.rmtree(self.folder, ignore_errors=True)


def _unmount_below(folder: pathlib.Path) -> None:
    mounts = [line.split()[1] for line in pathlib.Path("/proc/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m == str(folder) or m.startswith(f"{folder}/")), reverse=True):
        subprocess.run(["umount", "-l", mount], check=False, capture_output=True)


def _launch_dockerd(folder: pathlib.Path, url: str) -> subprocess.Popen:
    command = [
        DOCKERD,
        "--config-file", str(folder / "daemon.json"),
        "--data-root", str(folder / "data"),
        "--exec-root", str(folder / "x"),
        "--pidfile", str(folder / "docker.pid"),
        "--host", url,
        "--iptables=false",
        "--ip-masq=false",
        "--bridge=none",
        "--log-level=warn",
    ]  # fmt: skip
    with open(folder / "dockerd.log", "ab") as log:  # the child keeps its own descriptor
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_answering(engine: Engine, started: float, seconds: float = 60) -> None:
    while time.monotonic() < started + seconds:
        probe = subprocess.run(["docker", "-H", engine.url, "version"], capture_output=True, timeout=30, check=False)
        if probe.returncode == 0:
            return
        if engine.process.poll() is not None:
            break
        time.sleep(0.2)
    tail = (engine.folder / "dockerd.log").read_text(errors="replace")[-2000:]
    raise RuntimeError(f"the second dockerd did not come up: {tail}")


def start_engine() -> Engine:
    """A second dockerd on a socket of its own, answering (within 60 s)."""
    # A short path: the engine's containerd puts its socket under the exec root (108-byte limit).
    folder = pathlib.Path(tempfile.mkdtemp(prefix="pt2-", dir="/tmp"))
    (folder / "daemon.json").write_text("{}\n")  # not /etc/docker/daemon.json: that one is the first engine's
    url = f"unix://{folder}/docker.sock"
    engine = Engine(_launch_dockerd(folder, url), url, folder)
    try:
        _wait_answering(engine, time.monotonic())
    except RuntimeError:
        engine.stop()
        raise
    return engine
