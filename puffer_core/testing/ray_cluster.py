"""A Ray cluster of several nodes on this machine, for tests and benchmarks of the Ray backend
across nodes: Ray's own ``ray.cluster_utils.Cluster``, started safely and always shut down.

Each node is a raylet of its own (its own object store, its own worker processes), so what
crosses between nodes goes through Ray's object transfer as it would between boxes, only
over loopback. The nodes run in Ray's single-machine mode (every service bound to
127.0.0.1, as the Ray backend's own local instance is) with token authentication on
(``RAY_AUTH_MODE=token`` while the cluster lives; the token is Ray's, ``~/.ray/auth_token``
written readable by this user only, or ``RAY_AUTH_TOKEN_PATH`` / ``RAY_AUTH_TOKEN``). This
process is not connected to it: pass its address (``cluster.address``) to ``vector.make(...,
backend="ray", vector_kwargs={"address": address})``, to ``ray.init(address=address)``, or to
another process (``puffer train --ray-address``). Nodes a caller adds while it lives
(``cluster.add_node``) bind to loopback too. Its files are in Ray's shared temporary
directory (``/tmp/ray``), unlike the Ray backend's own instance: it is for tests and benchmarks.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from puffer_core.vector.ray.private import private_token
from puffer_core.vector.ray.start import single_machine_mode

__all__ = ["AUTH_ENV", "simulated_ray_cluster"]

#: The environment a process needs to join the cluster (Ray's token authentication on).
AUTH_ENV = {"RAY_AUTH_MODE": "token"}


@contextlib.contextmanager
def simulated_ray_cluster(
    nodes: int = 3, cpus_per_node: int = 1, resources: list[dict[str, float]] | None = None
) -> Iterator[Any]:
    """A ``nodes``-node Ray cluster on this machine; yields it, shuts it down after.

    Args:
        nodes: Ray nodes (the first is the head).
        cpus_per_node: CPUs each node tells Ray's scheduler it has (not a limit on the machine).
        resources: custom resources per node (e.g. ``[{"a": 1}, {"b": 1}, {"c": 1}]``), to pin
            work to a node.

    Yields:
        Ray's ``Cluster`` (its ``address`` is ``127.0.0.1:PORT``; ``add_node`` / ``remove_node``
        change it).

    Raises:
        MissingDependencyError: Ray is not installed.
    """
    from puffer_core.errors import MissingDependencyError

    try:
        import ray  # noqa: F401  (Ray's cluster utilities need it imported first)
        from ray.cluster_utils import Cluster
    except ImportError as exc:
        raise MissingDependencyError(
            "a simulated Ray cluster needs Ray: pip install 'puffer-core[ray]'  (or pip install ray)"
        ) from exc
    if nodes < 1:
        raise ValueError(f"a cluster needs at least one node, got nodes={nodes}")
    per_node = resources or [{}] * nodes
    saved = {name: os.environ.get(name) for name in AUTH_ENV}
    cluster: Any = None
    try:
        with single_machine_mode():  # the processes started now bind to loopback
            os.environ.update(AUTH_ENV)
            _token_auth_here()
            loopback = {"node_ip_address": "127.0.0.1", "num_cpus": cpus_per_node}
            cluster = Cluster(
                initialize_head=True, head_node_args={**loopback, "include_dashboard": False, "resources": per_node[0]}
            )
            for index in range(1, nodes):
                cluster.add_node(**loopback, resources=per_node[index] if index < len(per_node) else {})
            cluster.wait_for_nodes()
            yield cluster
    finally:
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _token_auth_here() -> None:
    """Token authentication on in this process too, with a token to use: Ray caches the mode it
    read (refreshed here, as Ray does when it turns it on itself), and the token is made as the
    Ray backend's own instance makes it (:func:`~puffer_core.vector.ray.private.private_token`:
    readable by this user only, one readable by others replaced)."""
    from ray._raylet import Config

    Config.initialize("")
    private_token()
