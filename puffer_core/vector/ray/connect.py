"""Which Ray the backend runs on: the one initialised in this process, a cluster named by
``address`` (or ``RAY_ADDRESS``), or an instance of our own (:mod:`.start`).

Ray is one per process: once ``ray.init`` ran, every vector env of the process uses that
Ray. An ``address`` naming another cluster is then refused rather than silently ignored.

Before ``ray.init`` connects to a cluster, its address is checked with a plain TCP connect
(``CONNECT_TIMEOUT`` seconds): Ray itself retries an unreachable address for a long time,
and a user deserves one line naming the address and how to start a head instead.
"""

from __future__ import annotations

import os
import re
import socket
from typing import Any

from puffer_core.errors import APIUsageError, MissingDependencyError, RayConnectionError
from puffer_core.vector.ray.start import start_local_ray

__all__ = ["CONNECT_TIMEOUT", "check_address", "connect", "import_ray"]

#: Seconds the TCP check of a cluster's address may take.
CONNECT_TIMEOUT = 5.0
_HOST_PORT = re.compile(r"^(?:ray://)?(?:\[(?P<ip6>[0-9a-fA-F:.]+)\]|(?P<host>[^:/\s\[\]]+)):(?P<port>\d{1,5})$")
_HOW_TO_START = (
    "start a head on the cluster's first box with `ray start --head --port 6379` (inside PufferTank: "
    "`puffer tank run -- ray start --head --port 6379`) and pass its address, e.g. 'HEAD_IP:6379'"
)


def import_ray() -> Any:
    """The ``ray`` module; MissingDependencyError with the install command when it is absent."""
    try:
        import ray
    except ImportError as exc:
        raise MissingDependencyError(
            "backend='ray' needs Ray, which this Python cannot import; install it with: "
            "pip install 'puffer-core[ray]'  (or pip install ray)"
        ) from exc
    return ray


def check_address(address: Any, name: str = "address") -> str | None:
    """``vector_kwargs["address"]``: None, ``"auto"``, ``"host:port"`` or ``"ray://host:port"``."""
    if address is None or address == "auto":
        return address
    if not isinstance(address, str) or _HOST_PORT.match(address.strip()) is None:
        raise APIUsageError(f"{name} must be None, 'auto', 'host:port' or 'ray://host:port', got {address!r}")
    port = int(_HOST_PORT.match(address.strip())["port"])
    if not 0 < port < 65536:
        raise APIUsageError(f"{name} {address!r}: port {port} is not a TCP port (1-65535)")
    return address.strip()


def connect(ray: Any, address: str | None, allow_unauthenticated_ray: bool = False) -> None:
    """Ray initialised in this process, on the cluster ``address`` names if one does.

    ``address=None``: an initialised Ray as it is, else ``RAY_ADDRESS`` as Ray reads it, else
    a new instance of our own (:func:`.start.start_local_ray`). ``"auto"``, ``"host:port"``,
    ``"ray://host:port"``: that cluster (an initialised Ray must be connected to it).

    Raises:
        RayConnectionError: the cluster cannot be found or reached, or refuses the connection.
        APIUsageError: Ray is initialised already, connected elsewhere.
    """
    if ray.is_initialized():
        _check_same_cluster(ray, address)
        return
    source = "vector_kwargs['address']"
    if address is None:
        address = os.environ.get("RAY_ADDRESS") or None
        source = "RAY_ADDRESS"
        if address is None or address == "local":
            start_local_ray(ray, allow_unauthenticated_ray)
            return
    target = _resolve(address, source)
    _check_reachable(target, address, source)
    try:
        ray.init(address=target, log_to_driver=False)
    except Exception as exc:  # Ray's own reasons: a wrong token, another Ray version, …
        why = " ".join(str(exc).split())[:300]
        raise RayConnectionError(
            f"could not connect to the Ray cluster at {target!r} ({source}={address!r}): {type(exc).__name__}: "
            f"{why}; a cluster with token authentication needs its token here too (RAY_AUTH_TOKEN, or the "
            "token file ~/.ray/auth_token copied from the head), and every box the same Ray and Python versions"
        ) from exc


def _resolve(address: str, source: str) -> str:
    """``"auto"`` → the cluster Ray finds on this machine (``ray start``'s record, or a running
    GCS), as ``host:port``; any other address as it is."""
    if address != "auto":
        return address
    from ray._private.services import canonicalize_bootstrap_address

    try:
        found = canonicalize_bootstrap_address("auto")
    except Exception:
        found = None
    if not found:
        raise RayConnectionError(
            f"{source}='auto' found no running Ray cluster on this machine; {_HOW_TO_START}, or on this box "
            "`ray start --head` makes 'auto' find it"
        )
    return found


def _check_reachable(target: str, address: str, source: str) -> None:
    """A TCP connect to ``target`` within ``CONNECT_TIMEOUT`` s, or RayConnectionError."""
    match = _HOST_PORT.match(target)
    if match is None:  # pragma: no cover - Ray resolved "auto" to something else: let ray.init judge
        return
    host, port = match["ip6"] or match["host"], int(match["port"])
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as exc:
        shown = target if target == address else f"{target} (from {address!r})"
        reason = "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or type(exc).__name__)
        raise RayConnectionError(
            f"no Ray cluster answers at {shown} ({source}): {reason}; {_HOW_TO_START}, and check that this "
            "machine can reach that port (same private network, no firewall between)"
        ) from None


def _check_same_cluster(ray: Any, address: str | None) -> None:
    """An initialised Ray is used as it is, unless ``address`` names another cluster."""
    if address is None or address == "auto" or address.startswith("ray://"):
        return  # nothing to compare a client connection's address with: use it
    try:
        current = ray.get_runtime_context().gcs_address
    except Exception:  # pragma: no cover - a client-mode driver has no GCS address of its own
        return
    if _same_endpoint(current, address):
        return
    raise APIUsageError(
        f"Ray is already initialised in this process, connected to {current}, and vector_kwargs['address']="
        f"{address!r} names another cluster; Ray is one per process: call ray.shutdown() first, or leave "
        "'address' out to use the Ray you initialised"
    )


def _same_endpoint(a: str, b: str) -> bool:
    def endpoint(address: str) -> tuple[str, int] | None:
        match = _HOST_PORT.match(address)
        if match is None:
            return None
        host = match["ip6"] or match["host"]
        try:
            host = socket.gethostbyname(host)
        except OSError:
            pass
        return host, int(match["port"])

    return endpoint(a) == endpoint(b)
