"""Where the Ray backend's actors run: a placement group for ``placement="spread" | "pack"``,
and each worker's node as the actor itself reports it.

Without ``placement`` Ray schedules the actors by its defaults, which hold no CPU while an
actor runs and so may put them all on one node. With it, one bundle ``{"CPU": c}`` per
worker (``c`` = ``actor_options["num_cpus"]``, else 1) forms a placement group, SPREAD
(over as many nodes as possible) or PACK (on as few as possible), and actor ``w`` runs in
bundle ``w``. Ray keeps the group: when a node dies, its bundles are placed again where
there is room, and a restarted actor follows its bundle there.
"""

from __future__ import annotations

import socket
from typing import Any

from puffer_core.errors import APIUsageError
from puffer_core.specs.limits import MAX_ACTOR_RESOURCES, PLACEMENTS, check_number

__all__ = [
    "Placement",
    "bundle_cpus",
    "check_actor_options",
    "check_placement",
    "dead_nodes",
    "describe_node",
    "resources_line",
    "where_am_i",
]

_FIXES = "use fewer workers, smaller bundles (vector_kwargs={'actor_options': {'num_cpus': 0.5}}), or add nodes"


def check_placement(value: Any, name: str = "placement") -> str | None:
    """``vector_kwargs["placement"]``: None, ``"spread"`` or ``"pack"``."""
    if value is None or value in PLACEMENTS:
        return value
    raise APIUsageError(f"{name} must be 'spread', 'pack' or None, got {value!r}")


def check_actor_options(actor_options: Any, name: str = "actor_options") -> dict | None:
    """``vector_kwargs["actor_options"]``: None, or a dict of Ray's actor ``.options()`` whose
    CPUs and GPUs are finite and non-negative (Ray checks its other options itself)."""
    if actor_options is None:
        return None
    if not isinstance(actor_options, dict) or not all(isinstance(key, str) for key in actor_options):
        raise APIUsageError(f"{name} must be a dict (Ray's actor .options()), got {actor_options!r}")
    for key in ("num_cpus", "num_gpus"):
        if key in actor_options:
            check_number(f"{name}[{key!r}]", actor_options[key], 0, MAX_ACTOR_RESOURCES)
    return dict(actor_options)


def bundle_cpus(actor_options: dict) -> float:
    """CPUs in each worker's bundle: the actors' ``num_cpus`` if given, else 1."""
    cpus = actor_options.get("num_cpus", 1)
    if not isinstance(cpus, (int, float)) or isinstance(cpus, bool) or not 0 < cpus < 1e6:
        raise APIUsageError(
            f"actor_options['num_cpus'] must be a positive number with placement, got {cpus!r} "
            "(a bundle must hold something for Ray to place it)"
        )
    return float(cpus)


def where_am_i() -> dict[str, str]:
    """Called inside an actor: the node it runs on (Ray's node id, host name, node address)."""
    import ray

    return {
        "node_id": ray.get_runtime_context().get_node_id(),
        "host": socket.gethostname(),
        "address": ray.util.get_node_ip_address(),
    }


def describe_node(where: dict | None) -> str:
    """``node <id> (host <name>, <address>)``, for messages."""
    if not where:
        return "an unknown node"
    return f"node {where['node_id']} (host {where['host']}, {where['address']})"


def dead_nodes(ray: Any) -> set[str]:
    """Ids of the nodes the cluster knows as dead (empty if Ray cannot say)."""
    try:
        return {node["NodeID"] for node in ray.nodes() if not node.get("Alive", True)}
    except Exception:
        return set()


def resources_line(ray: Any) -> str:
    """The cluster's nodes and CPUs, for messages: ``3 nodes, CPU 2/6 free (2, 2, 2 per node)``."""
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        per_node = ", ".join(f"{n['Resources'].get('CPU', 0):g}" for n in nodes)
        total = ray.cluster_resources().get("CPU", 0)
        free = ray.available_resources().get("CPU", 0)
    except Exception:  # pragma: no cover - Ray could not say
        return "resources unknown"
    return f"{len(nodes)} node(s), CPU {free:g} free of {total:g} (per node: {per_node})"


class Placement:
    """A placement group of one ``{"CPU": cpus}`` bundle per worker, or nothing (``strategy=None``)."""

    def __init__(self, ray: Any, strategy: str | None, workers: int, cpus: float):
        self.ray = ray
        self.strategy = strategy
        self.workers = workers
        self.cpus = cpus
        self.group: Any = None

    def create(self, timeout: float) -> None:
        """Make the group and wait for Ray to place it; APIUsageError (nothing left) if it
        can never fit, or is not placed within ``timeout`` seconds."""
        if self.strategy is None:
            return
        ray = self.ray
        self._check_fits()
        bundles = [{"CPU": self.cpus}] * self.workers
        self.group = ray.util.placement_group(bundles, strategy=self.strategy.upper())
        if not self.group.wait(timeout_seconds=timeout):
            line = resources_line(ray)
            self.remove()
            raise APIUsageError(
                f"placement={self.strategy!r}: Ray did not place {self.workers} bundle(s) of {{'CPU': {self.cpus:g}}} "
                f"within {timeout:g} s (startup_timeout); the cluster has {line}, other jobs may hold the rest; "
                f"{_FIXES}"
            )

    def _check_fits(self) -> None:
        """APIUsageError now, rather than a wait, when the bundles can never fit the cluster."""
        ray = self.ray
        total = ray.cluster_resources().get("CPU", 0)
        try:
            largest = max(n["Resources"].get("CPU", 0) for n in ray.nodes() if n.get("Alive"))
        except ValueError:  # pragma: no cover - no node alive
            largest = 0
        if self.workers * self.cpus > total or self.cpus > largest:
            raise APIUsageError(
                f"placement={self.strategy!r} needs {self.workers} bundle(s) of {{'CPU': {self.cpus:g}}} "
                f"({self.workers * self.cpus:g} CPUs) and the cluster can never hold them: it has "
                f"{resources_line(ray)}; {_FIXES}"
            )

    def actor_options(self, w: int) -> dict:
        """The ``.options()`` that put worker ``w``'s actor into its bundle (none without a group)."""
        if self.group is None:
            return {}
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        strategy = PlacementGroupSchedulingStrategy(placement_group=self.group, placement_group_bundle_index=w)
        return {"scheduling_strategy": strategy, "num_cpus": self.cpus}

    def remove(self) -> None:
        """Remove the group from the cluster (safe to call again, or once Ray is shut down)."""
        group, self.group = self.group, None
        if group is None or not self.ray.is_initialized():
            return
        try:
            self.ray.util.remove_placement_group(group)
        except Exception:
            pass
