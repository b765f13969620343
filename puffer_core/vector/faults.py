"""What a vector env does when an env raises, a worker dies or a worker hangs: ``on_fault``.

``on_fault="raise"`` (default)
    The vector env closes and ``WorkerError`` names the worker, the env and the cause.
``on_fault="restart"`` (Multiprocessing, Ray)
    The worker is replaced: its envs are re-created and reset, seeded from the run's seed
    and the restart count (``restart_seeds``), and the run goes on. Its rows come back in
    the batch they were due in, holding the reset observations, **truncated**, each with
    an info ``{"fault": {"worker", "env", "phase", "cause", "traceback", "restarts"}}`` (Ray
    adds ``"node"`` when the worker was lost with its node) so
    that a trainer never mistakes a crash for an ordinary episode end (``puffer train``
    leaves such a step out of learning). An env that faults ``max_restarts`` times in a row
    (no successful step in between; default 3, ``vector_kwargs={"max_restarts": N}``)
    raises ``WorkerError`` naming it and every cause. ``envs.stats`` counts faults and
    restarts and keeps each restart's latency (fault noticed → worker ready again).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from puffer_core.errors import APIUsageError, WorkerError
from puffer_core.specs.limits import MAX_RESTARTS, check_int
from puffer_core.vector.autoreset import SEED_LIMIT

__all__ = ["DEFAULT_MAX_RESTARTS", "FAULT_POLICIES", "FaultLog", "check_on_fault", "fault_info", "restart_seeds"]

FAULT_POLICIES = ("raise", "restart")
DEFAULT_MAX_RESTARTS = 3


def check_on_fault(on_fault: Any, backend: str) -> str:
    if on_fault not in FAULT_POLICIES:
        raise APIUsageError(f"on_fault must be 'raise' or 'restart', got {on_fault!r}")
    if on_fault == "restart" and backend == "serial":
        raise APIUsageError(
            "on_fault='restart' replaces a worker process, and the serial backend has none; use "
            "backend='multiprocessing' (or 'ray'), or on_fault='raise'"
        )
    return on_fault


def check_max_restarts(value: Any, name: str = "max_restarts") -> int:
    """Faults in a row an env may have: an int in [1, ``MAX_RESTARTS``]."""
    return check_int(name, value, 1, MAX_RESTARTS)


def restart_seeds(run_seed: int | None, first_env: int, count: int, restart: int) -> np.ndarray | None:
    """Seeds for a worker's ``count`` re-created envs from ``first_env`` on, at that worker's
    ``restart``-th restart: a function of the run's seed, the envs and that count only (not of
    the order in which two workers' faults were noticed), None for an unseeded run."""
    if run_seed is None:
        return None
    sequence = np.random.SeedSequence(entropy=run_seed, spawn_key=(restart, first_env))
    return (sequence.generate_state(count, np.uint64) % np.uint64(SEED_LIMIT)).astype(np.int64)


@dataclass
class Fault:
    """One fault, as the info reports it (``as_info``) and as WorkerError messages quote it."""

    worker: int
    env: int | None  # the env being stepped or built, when known
    phase: str  # "step", "reset", "construction", "call" or "idle"
    cause: str  # "raised ValueError", "killed by signal SIGSEGV", "silent for 60 s", …
    traceback: str = ""
    restarts: int = 0  # this worker's restarts, this one included
    noticed_at: float = field(default_factory=time.perf_counter)
    node: dict | None = None  # Ray: the node lost with the worker ({"node_id", "host", "address"})

    @classmethod
    def reported(cls, worker: int, report: dict) -> Fault:
        """The fault an ``EnvFault.to_dict()`` report describes, in ``worker``."""
        return cls(worker, report["env_index"], report["phase"], f"raised {report['exc_type']}", report["traceback"])

    def as_info(self) -> dict[str, Any]:
        info = {
            "worker": self.worker,
            "env": self.env,
            "phase": self.phase,
            "cause": self.cause,
            "traceback": self.traceback,
            "restarts": self.restarts,
        }
        if self.node is not None:
            info["node"] = dict(self.node)
        return info

    def describe(self) -> str:
        where = f"env {self.env}" if self.env is not None else "its envs"
        return f"worker {self.worker}, {where}, {self.phase}: {self.cause}"


def fault_info(fault: Fault, agents: list | None) -> dict[str, Any]:
    """The info a faulted env reports: one ``fault`` entry, per agent for multi-agent envs."""
    entry = {"fault": fault.as_info()}
    if not agents or len(agents) == 1:
        return entry
    return {agent: dict(entry) for agent in agents}


@dataclass
class FaultLog:
    """Counts and streaks: ``envs.stats``. A streak is an env's faults with no successful step between."""

    max_restarts: int = DEFAULT_MAX_RESTARTS
    faults: int = 0
    restarts: int = 0
    restart_seconds: list[float] = field(default_factory=list)
    by_env: dict[int, int] = field(default_factory=dict)
    worker_restarts: dict[int, int] = field(default_factory=dict)
    streaks: dict[int, list[Fault]] = field(default_factory=dict)

    def record(self, fault: Fault, envs: range) -> None:
        """Count ``fault`` (in a worker holding ``envs``); raise WorkerError once a streak is too long."""
        self.faults += 1
        blamed = fault.env if fault.env is not None else envs.start
        self.by_env[blamed] = self.by_env.get(blamed, 0) + 1
        streak = self.streaks.setdefault(blamed, [])
        streak.append(fault)
        if len(streak) >= self.max_restarts:
            causes = "; ".join(f.cause + (f" ({f.phase})" if f.phase else "") for f in streak)
            raise WorkerError(
                f"env {blamed} (worker {fault.worker}) faulted {len(streak)} times in a row, which reaches "
                f"max_restarts={self.max_restarts}: {causes}; giving up (raise it with "
                "vector_kwargs={'max_restarts': N} if the env is only flaky)",
                worker=fault.worker,
                env_index=blamed,
                cause=fault.traceback or fault.cause,
            )
        self.worker_restarts[fault.worker] = self.worker_restarts.get(fault.worker, 0) + 1
        fault.restarts = self.worker_restarts[fault.worker]

    def restarted(self, fault: Fault) -> None:
        self.restarts += 1
        self.restart_seconds.append(time.perf_counter() - fault.noticed_at)

    def stepped(self, envs: range) -> None:
        """A worker holding ``envs`` finished a step: their streaks end."""
        if self.streaks:
            for env in envs:
                self.streaks.pop(env, None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "faults": self.faults,
            "restarts": self.restarts,
            "restart_seconds": [round(s, 4) for s in self.restart_seconds],
            "faults_by_env": dict(self.by_env),
        }
