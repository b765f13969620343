"""``Ray``: the vector env API over Ray actors, on this machine or a cluster.

Each actor (:mod:`.actor`) runs an ``EnvGroup`` (the Serial engine) over its share of the
envs and returns its rows (observations, rewards, terminals, truncations, masks) plus its
non-empty infos from every ``reset`` / ``step`` call. The main process keeps one array per
field for all rows, copies each actor's result into its rows, and hands out views like the
other backends. ``batch_size < num_envs`` returns whichever actors finish first
(``ray.wait``).

Which Ray (:mod:`.connect`): the one initialised in this process, the cluster ``address``
or ``RAY_ADDRESS`` names, or an instance of our own on loopback with token authentication
(:mod:`.start`). Ray is never shut down by this backend (it may be the user's, and other code
of the process may use it). Where the actors run (:mod:`.placement`): Ray's defaults, or a
placement group (``placement="spread" | "pack"``); ``envs.placement`` says which node each
worker is on.

Actors use Ray's defaults (one CPU to be scheduled, none held while running, so more
actors than CPUs is fine) unless ``actor_options`` or ``placement`` says otherwise, and
``max_concurrency=2`` so that the main process can ask a busy actor which env it is
stepping when it goes silent past ``timeout``. The actors and the placement group are
removed as the vector env closes, or, if it is never closed, when it is garbage-collected
or the interpreter exits (a ``weakref.finalize``).
"""

from __future__ import annotations

import re
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from puffer_core.env.factory import EnvFactory
from puffer_core.errors import APIUsageError, EnvCallError, WorkerError
from puffer_core.vector.autoreset import DISABLED, ResetPlan
from puffer_core.vector.base import VectorEnv, allocate_arrays
from puffer_core.vector.calls import CallResult, EnvCall, describe, per_worker
from puffer_core.vector.env_group import env_fault_message
from puffer_core.vector.faults import Fault, fault_info, restart_seeds
from puffer_core.vector.ray.actor import FIELDS, EnvActor
from puffer_core.vector.ray.connect import check_address, connect, import_ray
from puffer_core.vector.ray.placement import (
    Placement,
    bundle_cpus,
    check_actor_options,
    check_placement,
    dead_nodes,
    describe_node,
    resources_line,
)
from puffer_core.vector.ray.traffic import Traffic
from puffer_core.vector.vector_settings import VectorSettings, WorkerOptions, check_bool, option

__all__ = ["Ray", "RayOptions"]

#: Seconds ``close`` gives the actors to close their envs (a minute when env 0 records: ``close_grace``).
CLOSE_GRACE = 2.0

_RESTARTED = object()  # what _get returns when the actor faulted and was replaced


def _first_line(exc: BaseException) -> str:
    """A Ray error's first line (its message runs on with tracebacks), for a fault's cause."""
    return str(exc).strip().splitlines()[0][:200]


def _release(ray: Any, actors: list, grace: float, placement: Placement) -> None:
    """Let the actors close their envs (``grace`` seconds), kill them, then remove the
    placement group. Safe to call more than once; nothing to do once Ray is shut down (the
    actors went with it)."""
    doomed = list(actors)
    actors.clear()
    if doomed and ray.is_initialized():
        try:
            ray.wait([actor.close.remote() for actor in doomed], num_returns=len(doomed), timeout=grace)
        except Exception:
            pass
        for actor in doomed:
            try:
                ray.kill(actor)
            except Exception:
                pass
    placement.remove()


@dataclass(frozen=True)
class RayOptions(WorkerOptions):
    """Ray's own settings, beyond the workers' ``timeout``, ``startup_timeout`` and
    ``max_restarts`` (see :class:`Ray`): ``actor_options``, ``allow_unauthenticated_ray``,
    ``address`` and ``placement``."""

    actor_options: Mapping[str, Any] | None = option(None, check_actor_options)
    allow_unauthenticated_ray: bool = option(False, check_bool)  # a typo like "no" must not mean True
    address: str | None = option(None, check_address)
    placement: str | None = option(None, check_placement)

    def __post_init__(self) -> None:
        if self.placement is not None and "scheduling_strategy" in (self.actor_options or {}):
            raise APIUsageError(
                f"placement={self.placement!r} schedules the actors into its placement group; drop "
                "actor_options['scheduling_strategy'], or placement"
            )


class Ray(VectorEnv):
    """``num_envs`` envs over ``num_workers`` Ray actors, on this machine or a Ray cluster.

    Extra parameters (``vector_kwargs``, or keywords: :class:`RayOptions`): ``timeout``
    (seconds an actor may stay silent on one call, default 60), ``startup_timeout`` (for
    placing the actors and building their envs, default 120), ``actor_options`` (passed to
    ``.options()`` of every actor, e.g. ``{"num_cpus": 0.5}``), ``address``, ``placement``,
    ``allow_unauthenticated_ray`` (default False: see below), ``max_restarts``.

    Which Ray (``address``): None (default) uses Ray if it is initialised in this process
    (Ray is one per process: every vector env of the process shares it), else the cluster
    ``RAY_ADDRESS`` names, as Ray reads it, else a new instance of our own on this machine.
    ``"auto"`` (the cluster ``ray start`` runs on this machine), ``"host:port"`` (a head's
    GCS, port 6379 by default; this machine must be a node of that cluster) or
    ``"ray://host:port"`` (Ray Client, from outside the cluster) connect to that cluster;
    an address nothing answers at is an APIUsageError (``RayConnectionError``) within
    seconds, naming it and how to start a head. With Ray initialised already, an address
    naming another cluster is refused. A cluster's security is its owner's: Ray's services
    run any code sent to them and belong on a trusted private network only; never expose
    their ports on a public interface, and keep Ray's token authentication on (a driver
    needs the cluster's token: ``RAY_AUTH_TOKEN`` or the token file). Our own instance's
    services listen on loopback only, the dashboard is off, and Ray's token authentication
    is on (the token in ``~/.ray/auth_token``, written readable by its owner only; its files in a
    temporary directory of the user's only: :mod:`.private`). If token
    authentication would be off (``RAY_AUTH_MODE`` set to anything but ``token``, or a Ray
    without it) it refuses with an APIUsageError, unless ``allow_unauthenticated_ray=True``
    says the caller accepts an instance any local user can run code on.

    Where the actors run (``placement``): None leaves it to Ray. ``"spread"`` / ``"pack"``
    make a placement group of one ``{"CPU": c}`` bundle per worker (``c`` =
    ``actor_options["num_cpus"]``, else 1), spread over as many nodes as possible or packed
    on as few, each actor in its bundle; bundles the cluster can never hold are an
    APIUsageError naming its resources. ``envs.placement`` lists each worker's node.

    A node lost mid-run: under ``on_fault="restart"`` each worker lost with it is created
    again where Ray finds room (its bundle placed again, or the actor re-scheduled), its
    envs re-made and reset with restart seeds, its rows returned truncated with a
    ``"fault"`` info whose ``"node"`` names the lost node; no room within
    ``startup_timeout`` is a WorkerError naming the node and the resources missing. Under
    ``"raise"`` the WorkerError names the node and every worker lost with it.
    """

    backend = "ray"
    Options = RayOptions

    def _open(self, settings: VectorSettings) -> None:
        options = cast(RayOptions, settings.options)
        actor_options = options.actor_options or {}
        cpus = bundle_cpus(actor_options) if options.placement else 0.0
        ray = import_ray()
        self._ray = ray
        workers = settings.num_workers
        self._traffic = Traffic(workers)
        self._init_workers(settings)
        self._arrays = allocate_arrays(
            self.num_envs, self.single_observation_space, self._action_shape, self._action_dtype
        )

        connect(ray, options.address, options.allow_unauthenticated_ray)
        self._placement = Placement(ray, options.placement, workers, cpus)
        self._actors: list = []
        # Removes the actors and the placement group however the vector env ends: close(),
        # garbage collection, exit. It holds Ray, the actor list and the group, never the
        # vector env.
        grace = settings.close_grace(CLOSE_GRACE)
        self._finalizer = weakref.finalize(self, _release, ray, self._actors, grace, self._placement)
        self._pending: dict = {}  # ObjectRef -> worker
        self._sent_at = [0.0] * workers
        self._ready: list[int] = []
        self._incarnations: list[str | None] = [None] * workers
        self._nodes: list[dict | None] = [None] * workers
        self._infos: list[list] = [[] for _ in range(workers)]
        self._held: list[int] | None = None
        self._state = "new"
        self._closed = False
        try:
            self._placement.create(max(self.timeout, self._startup_timeout))
            self._start_actors(settings.factory, self._env_counts, self._options(actor_options))
        except BaseException:
            self.close()
            raise
        self._started = True

    # ---------------------------------------------------------------- start-up
    def _options(self, actor_options: Mapping[str, Any]) -> dict:
        options = {"max_concurrency": 2, **actor_options}
        if self._on_fault == "restart":
            # Ray restarts a dead actor itself (re-running __init__: its envs are re-created),
            # also on another node when its node died; "in a row" is counted here (FaultLog),
            # so Ray's lifetime count is unlimited.
            options = {"max_restarts": -1, "max_task_retries": 0, **options}
        return options

    def _start_actors(self, factory: EnvFactory, counts: list[int], options: dict) -> None:
        """One actor per worker, each building its envs; raises WorkerError if one cannot."""
        ray, workers = self._ray, len(counts)
        remote_cls = ray.remote(EnvActor)
        for w in range(workers):
            self._actors.append(
                remote_cls.options(**{**options, **self._placement.actor_options(w)}).remote(
                    factory,
                    self._first_env[w],
                    counts[w],
                    self.agents_per_env,
                    self.single_observation_space,
                    self._action_shape,
                    self._action_dtype,
                    self.autoreset_mode,
                )
            )
        refs = [actor.ready.remote() for actor in self._actors]
        self._sent_at = [time.monotonic()] * workers
        allowed = max(self.timeout, self._startup_timeout)
        done, not_done = ray.wait(refs, num_returns=len(refs), timeout=allowed)
        if not_done:
            w = refs.index(not_done[0])
            self._fault(
                Fault(w, None, "construction", f"silent for {allowed:g} s"),
                f"Ray: actor {w} did not build its envs within {allowed:g} s; if it was never scheduled, the "
                f"cluster ({resources_line(ray)}) lacks the resources asked for in actor_options ({options})",
                cause="timeout",
            )
        for w, ref in enumerate(refs):
            self._incarnations[w], report, self._nodes[w] = self._get(ref, w, "construction")
            if report is not None:
                self._fault(*self._reported(w, report))

    # ---------------------------------------------------------------- faults
    def _get(self, ref: Any, w: int, phase: str = "step", timeout: float | None = None) -> Any:
        """``ray.get(ref)``; a dead or failed actor is a fault (``_RESTARTED`` once replaced)."""
        ray = self._ray
        try:
            return ray.get(ref, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            raise
        except ray.exceptions.RayActorError as exc:
            self._died(w, phase, exc)
        except ray.exceptions.RayError as exc:
            self._fault(Fault(w, None, phase, f"actor failed: {_first_line(exc)}"), f"Ray: actor {w} failed: {exc}")
        return _RESTARTED

    def _died(self, w: int, phase: str, exc: Any = None) -> None:
        """Actor ``w`` died (``exc``), or Ray restarted it between two calls (``exc`` None):
        with its node, if the cluster says that node is dead."""
        node = self._nodes[w]
        # The cluster's node table, or Ray's own words when the table has not caught up yet
        said = exc is not None and re.search(r"\bnode\b.*\b(died|dead)\b", str(exc), re.IGNORECASE) is not None
        if node is not None and (said or node["node_id"] in dead_nodes(self._ray)):
            lost = [v for v, other in enumerate(self._nodes) if other and other["node_id"] == node["node_id"]]
            fault = Fault(w, None, phase, f"lost with its {describe_node(node)}", node=dict(node))
            message = (
                f"Ray: {describe_node(node)} was lost, and with it worker(s) "
                f"{', '.join(map(str, lost))} (envs {', '.join(self._env_span(v) for v in lost)})"
            )
            self._fault(fault, message, kill=False, cause="node lost")
            return
        if exc is None:
            self._fault(Fault(w, None, phase, "actor died: Ray restarted it"), f"Ray: actor {w} died", kill=False)
            return
        self._fault(Fault(w, None, phase, f"actor died: {_first_line(exc)}"), f"Ray: actor {w} died: {exc}", kill=False)

    def _env_span(self, w: int) -> str:
        envs = self._envs_of(w)
        return f"{envs.start}-{envs.stop - 1}" if len(envs) > 1 else str(envs.start)

    def _reported(self, w: int, report: dict) -> tuple[Fault, str]:
        return Fault.reported(w, report), env_fault_message(report, f"Ray: actor {w}: ")

    def _fault(self, fault: Fault, message: str, kill: bool = True, due: bool = True, cause: str | None = None) -> None:
        """``on_fault="raise"`` (or while starting): close and raise WorkerError; else restart the actor."""
        if self._on_fault == "restart" and self._started:
            self._restart(fault, kill, due)
            return
        self.close()
        raise WorkerError(
            message, worker=fault.worker, env_index=fault.env, cause=cause or fault.traceback or fault.cause
        )

    def _restart(self, fault: Fault, kill: bool, due: bool) -> None:
        """Ray re-creates actor ``w`` (its ``max_restarts``); we reset its envs and report the fault."""
        w = fault.worker
        for ref in [ref for ref, v in self._pending.items() if v == w]:
            del self._pending[ref]  # its task died with it
        failure: Fault | None = fault
        while failure is not None:
            self._count_fault(failure, w)
            if kill:
                self._ray.kill(self._actors[w], no_restart=False)  # Ray's own restart, not ours
            failure = self._rebuild(w, fault.node)
            kill = True
        self._fault_log.restarted(fault)
        lo, hi = self._row_bounds[w]
        self._arrays["truncations"][lo:hi] = True
        self._arrays["terminals"][lo:hi] = False
        self._arrays["rewards"][lo:hi] = 0
        agents = self.possible_agents if self.agents_per_env > 1 else None
        self._infos[w].extend((env, fault_info(fault, agents)) for env in self._envs_of(w))
        if due and w not in self._ready:
            self._ready.append(w)

    def _rebuild(self, w: int, lost_node: dict | None) -> Fault | None:
        """Wait for restarted actor ``w``, then reset its envs with restart seeds; a new fault if
        that fails. After a node loss, no room for it within the startup timeout is WorkerError."""
        ray, actor = self._ray, self._actors[w]
        envs = self._envs_of(w)
        seeds = restart_seeds(self._seed, envs.start, len(envs), self._fault_log.worker_restarts[w])
        allowed = max(self.timeout, self._startup_timeout)
        deadline = time.monotonic() + allowed
        try:
            incarnation, built, self._nodes[w] = self._when_back(
                actor.ready.remote, deadline, replacing=self._incarnations[w]
            )
            self._incarnations[w] = incarnation
            if built is not None:
                return self._reported(w, built)[0]
            plan = ResetPlan(seeds, None, None)
            self._traffic.sent_to(w, plan)
            # A reset is safe to send again: the same seeds give the same envs.
            status, payload, infos = self._when_back(lambda: actor.reset.remote(plan), deadline)
        except ray.exceptions.GetTimeoutError:
            if lost_node is not None:
                self._no_room(w, lost_node, allowed)
            return Fault(w, None, "construction", f"silent for {allowed:g} s")
        except ray.exceptions.RayError as exc:
            return Fault(w, None, "construction", f"actor died: {_first_line(exc)}")
        if status == "error":
            return self._reported(w, payload)[0]
        self._traffic.received_from(w, payload, infos)
        self._store(w, payload)
        return None

    def _no_room(self, w: int, lost_node: dict, allowed: float) -> None:
        """Raise WorkerError: worker ``w``, lost with ``lost_node``, found no room elsewhere."""
        needs = f"{{'CPU': {self._placement.cpus:g}}} (its bundle)" if self._placement.strategy else "its actor_options"
        line = resources_line(self._ray)
        self.close()
        raise WorkerError(
            f"Ray: worker {w} was lost with its {describe_node(lost_node)} and found no room on the surviving "
            f"nodes within {allowed:g} s (startup_timeout): it needs {needs}, the cluster has {line}; add a node, "
            "or use smaller bundles (actor_options={'num_cpus': 0.5})",
            worker=w,
            cause="node lost",
        )

    def _when_back(self, call: Any, deadline: float, replacing: str | None = None) -> Any:
        """``ray.get(call())`` once Ray has the restarted actor running again, asking again until
        ``deadline``: calls made while it restarts fail as "unavailable" (also one queued before
        the kill), and with ``replacing`` (the old incarnation) an answer from the old actor,
        which ``ray.kill`` has not stopped yet, does not count either."""
        ray = self._ray
        while True:
            try:
                answer = ray.get(call(), timeout=max(0.0, deadline - time.monotonic()))
                if replacing is None or answer[0] != replacing:
                    return answer
            except ray.exceptions.ActorUnavailableError:
                pass
            if time.monotonic() >= deadline:
                raise ray.exceptions.GetTimeoutError("the restarted actor did not answer within the deadline")
            time.sleep(0.05)

    def _submit(self, w: int, ref: Any) -> None:
        self._pending[ref] = w
        self._sent_at[w] = time.monotonic()

    def _store(self, w: int, payload: tuple) -> None:
        lo, hi = self._row_bounds[w]
        for name, array in zip(FIELDS, payload):
            self._arrays[name][lo:hi] = array

    def _collect(self, ref: Any) -> None:
        w = self._pending.pop(ref)
        out = self._get(ref, w)
        if out is _RESTARTED:
            return  # the restart made w ready, its rows truncated
        status, payload, infos = out
        if status == "error":
            self._fault(*self._reported(w, payload))
            return
        if status == "fresh":  # Ray restarted the actor since our last call (its node died, or it did)
            self._died(w, "idle")
            return
        self._traffic.received_from(w, payload, infos)
        self._store(w, payload)
        if infos:
            self._infos[w].extend(infos)
        self._fault_log.stepped(self._envs_of(w))
        self._ready.append(w)

    def _wait(self, needed: int) -> None:
        ray = self._ray
        while len(self._ready) < needed:
            refs = list(self._pending)
            if not refs:  # pragma: no cover - guarded by the state checks
                raise APIUsageError("recv() with no batch in flight; call send() first")
            oldest = min(self._sent_at[self._pending[r]] for r in refs)
            left = oldest + self.timeout - time.monotonic()
            done = []
            if left > 0:
                done, _ = ray.wait(refs, num_returns=min(len(refs), needed - len(self._ready)), timeout=left)
            if not done:
                self._timeout()
            for ref in done:
                self._collect(ref)

    def _timeout(self) -> None:
        ray = self._ray
        now = time.monotonic()
        late = sorted(self._pending.values(), key=lambda w: self._sent_at[w])
        w = late[0]
        env_index = None
        try:
            local = ray.get(self._actors[w].where.remote(), timeout=1.0)
            env_index = self._first_env[w] + local if local >= 0 else None
        except Exception:
            pass
        what = f"env {env_index}" if env_index is not None else "its envs"
        self._fault(
            Fault(w, env_index, "step", f"silent for {self.timeout:g} s"),
            f"Ray: actor {w} silent for {now - self._sent_at[w]:.1f} s (timeout {self.timeout:g} s) while stepping "
            f"{what}; raise `timeout` (vector_kwargs={{'timeout': …}}) if the env is just slow",
            cause="timeout",
        )

    @property
    def stats(self) -> dict:
        """Faults and restarts so far (``on_fault="restart"``: counts, latencies, faults per env),
        and ``"traffic"``: what crossed between the main process and each actor
        (:mod:`puffer_core.vector.ray.traffic`)."""
        return {**self._fault_log.as_dict(), "traffic": self._traffic.as_dict()}

    @property
    def placement(self) -> list[dict]:
        """Where each worker runs, as its actor reported it (again after a restart): one dict
        per worker, ``{"worker": w, "envs": [its env indices], "node_id": Ray's node id (hex),
        "host": host name, "address": node IP}``."""
        return [
            {"worker": w, "envs": list(self._envs_of(w)), **(self._nodes[w] or {})} for w in range(self.num_workers)
        ]

    # ---------------------------------------------------------------- async API
    def async_reset(self, seed: Any = None, options: dict | None = None) -> None:
        self._check_open()
        plan = self._plan_reset(seed, options)
        if self._pending:  # results in flight belong to the old episode
            self._wait(len(self._ready) + len(self._pending))
        self._ready.clear()
        self._held = None
        self._infos = [[] for _ in range(self.num_workers)]
        for w, actor in enumerate(self._actors):
            first = self._first_env[w]
            own = plan.envs(first, first + self._env_counts[w])
            self._traffic.sent_to(w, own)
            self._submit(w, actor.reset.remote(own))
        self._state = "running"

    def _call(self, indices: list[int], request: EnvCall) -> list[CallResult]:
        self._check_open()
        if self._pending:  # actors run two calls at once: let in-flight steps finish first
            self._wait(len(self._ready) + len(self._pending))
        results = {}
        for w, (local, own) in per_worker(indices, request, self._first_env).items():
            answer = self._get(self._actors[w].call.remote(local, own), w, phase="call", timeout=self.timeout)
            if answer is _RESTARTED:
                raise EnvCallError(
                    f"{describe(request)}: actor {w} faulted during the call and was restarted; its envs are "
                    "fresh, the call did not complete",
                    env_index=None,
                )
            results.update((r.env_index, r) for r in answer)
        return [results[i] for i in indices]

    def recv(self) -> tuple:
        self._check_recv(holding=self._held is not None)
        k = self._workers_per_batch
        self._wait(k)
        batch = sorted(self._ready[:k])
        del self._ready[:k]
        self._held = batch
        infos = self._batch_infos(batch)
        arrays = self._arrays
        rows, env_ids = self._batch_rows(batch)
        return (
            arrays["observations"][rows],
            arrays["rewards"][rows],
            arrays["terminals"][rows],
            arrays["truncations"][rows],
            infos,
            env_ids,
            arrays["masks"][rows],
        )

    def send(self, actions: Any) -> None:
        self._check_send(holding=self._held is not None)
        batch = self._held
        actions = self._check_actions(actions, self.batch_size)
        if self.autoreset_mode == DISABLED:  # disabled needs full batches
            self._check_not_ended(self._arrays["terminals"], self._arrays["truncations"])
        start = 0
        for w in batch:
            lo, hi = self._row_bounds[w]
            own = np.ascontiguousarray(actions[start : start + hi - lo])
            self._traffic.sent_to(w, own)
            self._submit(w, self._actors[w].step.remote(own))
            start += hi - lo
        self._held = None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pending = {}
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()  # empties self._actors, removes the placement group
