"""The Docker engine PufferTank builds and runs on: whatever ``DOCKER_HOST`` names.

The docker SDK is imported only here, when a command connects, so ``puffer tank render``
and ``compile`` work without it. When no engine answers (or the SDK is missing),
:class:`~puffer_core.tank.errors.NoEngineError` (exit code 2) says so and how to fix it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from puffer_core.tank.errors import NoEngineError

__all__ = ["DEFAULT_SOCKET", "connect", "engine_is_local", "engine_url"]

DEFAULT_SOCKET = "unix:///var/run/docker.sock"


def engine_url(environ: Mapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    return environ.get("DOCKER_HOST") or DEFAULT_SOCKET


def engine_is_local(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the engine runs on this machine (a unix socket), so it reaches what this machine reaches."""
    return engine_url(environ).startswith("unix://")


def connect(timeout: float = 10.0) -> Any:
    """A ``docker.DockerClient`` that answered a ping; :class:`NoEngineError` otherwise."""
    url = engine_url()
    try:
        import docker
    except ImportError:
        raise NoEngineError(
            "the docker Python SDK is not installed, so no Docker engine can be reached: pip install docker"
        ) from None
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # DockerException, requests' ConnectionError, OSError: all mean "no engine"
        cause = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        cause = cause.removeprefix("Error while fetching server API version: ")
        raise NoEngineError(
            f"no Docker engine answered at {url}: start one (dockerd) or set DOCKER_HOST (cause: {cause[:160]})"
        ) from None
    return client
