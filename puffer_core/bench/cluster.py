"""Ray across nodes: steps/second and what the network carries per step, in one run.

``run_cluster(env_id)`` measures the same env, random actions and worker count on:

* Multiprocessing on this machine (shared memory: nothing is copied between processes);
* the Ray backend on a Ray instance of its own on this machine;
* the Ray backend on a simulated cluster of ``SIMULATED_NODES`` nodes on this machine
  (``puffer_core.testing.simulated_ray_cluster``, started here and shut down after), the
  workers placed with ``placement="spread"``: one per node, so every step crosses between
  nodes' object stores as it would between boxes, only over loopback;
* with ``address``, the Ray backend on that cluster (the user's), with ``placement``.

Every Ray row also reports the bytes per env step sent to the workers (actions) and received
from them (observation, reward, terminal, truncation and mask rows, and non-empty infos), in
total and for each worker with the node and host it ran on, from the backend's
``stats["traffic"]`` over an untimed pass of ``TRAFFIC_BATCHES`` batches; beside them, the
bytes of one env step's rows as the backend lays them out (observation, action, and what a
worker returns), so that what came back beyond the rows is the infos.

Ray's instance changes from phase to phase (its own, the simulated cluster, the user's), so
the rounds interleave only within a phase. ``run_cluster_standard(out_dir)`` runs the
standard envs (``CLUSTER_ENVS``) and stores the result as one dated JSON file
(``puffer_core.bench.runs.write_run`` with ``kind="cluster"``); ``render_markdown`` makes the
docs' table of it.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from puffer_core.atomic import private_directory
from puffer_core.bench.runs import available_envs, write_run
from puffer_core.env.random_actions import random_action_batches
from puffer_core.errors import APIUsageError
from puffer_core.testing.ray_cluster import simulated_ray_cluster
from puffer_core.vector.backends import make
from puffer_core.vector.base import allocate_arrays
from puffer_core.vector.timing import Measured, Progress, Turn, error_summary, run_rounds, time_async

__all__ = ["CLUSTER_ENVS", "SIMULATED_NODES", "format_bytes", "render_markdown", "run_cluster", "run_cluster_standard"]

#: Nodes of the simulated cluster (and the default worker count: one per node).
SIMULATED_NODES = 3
#: Batches of the untimed pass that counts the bytes per step.
TRAFFIC_BATCHES = 32
#: The standard cluster set: env id → num_envs (a multiple of the workers, so that every
#: worker holds as many envs and the per-worker figures compare).
CLUSTER_ENVS: dict[str, int] = {"classic/cartpole": 12, "atari/breakout": 6, "nethack/score": 6}


class _Case:
    """One row: a name, where it runs (``phase``) and the ``vector.make`` keyword arguments."""

    def __init__(self, name: str, phase: str, backend: str, vector_kwargs: dict[str, Any] | None = None):
        self.name, self.phase, self.backend = name, phase, backend
        self.vector_kwargs = vector_kwargs or None
        self.traffic: dict[str, Any] | None = None
        self.payload: dict[str, int] | None = None


def _cases(address: str | None, placement: str | None, simulated: bool) -> list[_Case]:
    cases = [_Case("Multiprocessing, this machine", "local", "multiprocessing")]
    cases.append(_Case("Ray, this machine", "local", "ray"))
    if simulated:
        cases.append(
            _Case(f"Ray, {SIMULATED_NODES} simulated nodes, spread", "simulated", "ray", {"placement": "spread"})
        )
    if address is not None:
        where = f", {placement}" if placement else ""
        cases.append(_Case(f"Ray, {address}{where}", "user", "ray", {"address": address, "placement": placement}))
    for case in cases:
        if case.vector_kwargs:
            case.vector_kwargs = {key: value for key, value in case.vector_kwargs.items() if value is not None} or None
    return cases


def run_cluster(
    env_id: str,
    num_envs: int = 12,
    num_workers: int = SIMULATED_NODES,
    seconds: float = 3.0,
    rounds: int = 1,
    progress: Progress | None = None,
    *,
    address: str | None = None,
    placement: str | None = None,
    simulated: bool = True,
    seed: int = 0,
) -> list[dict]:
    """Measure ``env_id`` on Multiprocessing, local Ray, a simulated cluster and (``address``)
    the user's cluster; see the module docstring for the rows.

    Args:
        env_id: the env to step with random actions.
        num_envs: envs of every row.
        num_workers: worker processes (Ray actors) of every row.
        seconds: the measuring time per row and round.
        rounds: rounds per row, interleaved within each phase; a row keeps its best.
        progress: ``progress(name, done, total)``, called before each measurement.
        address: a Ray cluster to measure too (``auto``, ``HOST:PORT``, ``ray://HOST:PORT``).
        placement: the placement of the workers on ``address``'s cluster (``spread``, ``pack``).
        simulated: include the simulated cluster (started here, shut down after).
        seed: the seed of the envs and the random actions.

    Returns:
        One dict per row: ``name``, ``kind`` ("cluster"), ``backend``, ``where``,
        ``num_envs``, ``num_workers``, ``batch_size``, ``sps``, ``error``, and for Ray rows
        ``sent_bytes_per_step``, ``received_bytes_per_step``, ``info_bytes_per_step``,
        ``observation_bytes``, ``row_bytes``, ``action_bytes`` and ``workers`` (per worker:
        ``worker``, ``envs``, ``node_id``, ``host``, and its bytes per step each way). A row
        that fails has ``sps=None`` and the error; the others still run.

    Raises:
        APIUsageError: Ray is initialised already in this process (the run starts and stops
            Ray instances of its own, which would end the caller's).
    """
    ray = _ray_or_none()
    if ray is not None and ray.is_initialized():
        raise APIUsageError(
            "the cluster bench starts and stops Ray instances of its own; run it in a process "
            "that has not called ray.init (or after ray.shutdown())"
        )
    cases = _cases(address, placement, simulated)
    measured: dict[str, Any] = {}
    total = len(cases) * rounds
    done = 0
    for phase in ("local", "simulated", "user"):
        chosen = [case for case in cases if case.phase == phase]
        if chosen:
            ticks = None if progress is None else _offset(progress, done, total)
            for case, result in zip(
                chosen, _run_phase(phase, chosen, env_id, num_envs, num_workers, seconds, rounds, seed, ticks)
            ):
                measured[case.name] = result
            done += len(chosen) * rounds
    return [_row(case, measured[case.name], env_id, num_envs, num_workers) for case in cases]


def _ray_or_none() -> Any:
    try:
        import ray
    except ImportError:
        return None
    return ray


def _offset(progress: Progress, done: int, total: int) -> Progress:
    return lambda name, turns, _: progress(name, done + turns, total)


def _run_phase(
    phase: str,
    cases: list[_Case],
    env_id: str,
    num_envs: int,
    num_workers: int,
    seconds: float,
    rounds: int,
    seed: int,
    progress: Progress | None,
) -> list[Measured]:
    """The rows of one phase, measured on its Ray (the simulated cluster started for it; Ray
    shut down after it); a cluster that does not start fails each of its rows with the reason."""
    with contextlib.ExitStack() as stack:
        if phase == "simulated":
            # one CPU per worker on each node: the placement group's bundles always fit
            per_node = max(1, -(-num_workers // SIMULATED_NODES))
            try:
                cluster = stack.enter_context(simulated_ray_cluster(SIMULATED_NODES, cpus_per_node=per_node))
                stack.callback(_shutdown_ray)
                _ray_or_none().init(address=cluster.address, log_to_driver=False)
            except Exception as exc:
                return [
                    Measured(case.name, error=f"the simulated cluster did not start: {error_summary(exc)}")
                    for case in cases
                ]
        else:
            stack.callback(_shutdown_ray)
        if phase == "local" and "RAY_ADDRESS" in os.environ:  # "this machine" means a Ray of our own
            stack.callback(os.environ.__setitem__, "RAY_ADDRESS", os.environ.pop("RAY_ADDRESS"))

        def measure(turn: Turn) -> float:
            return _measure(cases[turn.index], env_id, num_envs, num_workers, seconds, seed)

        return run_rounds([case.name for case in cases], measure, rounds, progress=progress)


def _shutdown_ray() -> None:
    ray = _ray_or_none()
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def _measure(case: _Case, env_id: str, num_envs: int, num_workers: int, seconds: float, seed: int) -> float:
    """Build the row's vector env, time it, count its bytes per step (Ray), close it."""
    envs = make(
        env_id,
        num_envs=num_envs,
        num_workers=num_workers,
        backend=case.backend,
        seed=seed,
        vector_kwargs=case.vector_kwargs,
    )
    try:
        if case.backend == "ray" and case.traffic is None:  # untimed, before the timing: counted once
            case.traffic = _traffic_per_step(envs, seed)
            case.payload = _payload(envs)
        warmup = min(1.0, seconds / 5)
        sps = time_async(envs, seconds, warmup, envs.batch_size, envs.single_action_space, seed)
    finally:
        envs.close()
    return sps


def _traffic_per_step(envs: Any, seed: int) -> dict[str, Any] | None:
    """Bytes per env step each way, in total and per worker, over ``TRAFFIC_BATCHES`` batches
    (None where the backend keeps no ``stats["traffic"]``)."""
    if "traffic" not in envs.stats:
        return None
    actions = random_action_batches(envs.single_action_space, envs.batch_size, 8, seed)
    envs.async_reset(seed)
    envs.recv()
    before = envs.stats["traffic"]
    instances = envs.num_envs // envs.agents_per_env
    for n in range(TRAFFIC_BATCHES):
        envs.send(actions[n % 8])
        envs.recv()
    steps = TRAFFIC_BATCHES * instances  # full batches: every env steps once per batch
    after = envs.stats["traffic"]
    where = {entry["worker"]: entry for entry in (getattr(envs, "placement", None) or [])}
    workers = []
    for now, then in zip(after["workers"], before["workers"]):  # one entry per worker, in order
        calls = now["calls"] - then["calls"]
        place = where.get(now["worker"], {})
        env_steps = calls * (len(place.get("envs", [])) or instances // envs.num_workers)
        workers.append(
            {
                "worker": now["worker"],
                "envs": len(place.get("envs", [])) or None,
                "node_id": place.get("node_id"),
                "host": place.get("host"),
                "sent_bytes_per_step": _per(now["sent_bytes"] - then["sent_bytes"], env_steps),
                "received_bytes_per_step": _per(now["received_bytes"] - then["received_bytes"], env_steps),
            }
        )
    return {
        "sent_bytes_per_step": _per(after["sent_bytes"] - before["sent_bytes"], steps),
        "received_bytes_per_step": _per(after["received_bytes"] - before["received_bytes"], steps),
        "workers": workers,
    }


def _per(count: int, steps: int) -> float | None:
    return round(count / steps, 1) if steps else None


def _payload(envs: Any) -> dict[str, int]:
    """The bytes of one env step's rows as the backend lays them out (``allocate_arrays``): the
    observation rows, and the rows a worker returns (observation, reward and the three flags)
    and is sent (the action)."""
    space = envs.single_action_space
    rows = allocate_arrays(envs.agents_per_env, envs.single_observation_space, space.shape, space.dtype)
    returned = sum(array.nbytes for name, array in rows.items() if name != "actions")
    return {
        "observation_bytes": rows["observations"].nbytes,
        "row_bytes": returned,
        "action_bytes": rows["actions"].nbytes,
    }


def _row(case: _Case, measured: Any, env_id: str, num_envs: int, num_workers: int) -> dict:
    row = {
        "name": case.name,
        "kind": "cluster",
        "backend": case.backend,
        "where": case.phase,
        "env": env_id,
        "num_envs": num_envs,
        "num_workers": num_workers,
        "batch_size": num_envs,
        "sps": None if measured.best is None else round(measured.best, 1),
        "error": measured.error,
    }
    if case.backend == "ray":
        row.update(case.payload or {"observation_bytes": None, "row_bytes": None, "action_bytes": None})
        row.update(case.traffic or {"sent_bytes_per_step": None, "received_bytes_per_step": None, "workers": []})
        received, rows = row["received_bytes_per_step"], row["row_bytes"]
        # what came back beyond the rows: the infos (episode statistics at episode ends)
        row["info_bytes_per_step"] = None if received is None or rows is None else round(max(0.0, received - rows), 1)
    return row


# --------------------------------------------------------------------------- standard run


def run_cluster_standard(
    out_dir: str | os.PathLike,
    seconds: float = 3.0,
    rounds: int = 2,
    progress: Progress | None = None,
    envs: dict[str, int] | None = None,
    address: str | None = None,
    placement: str | None = None,
) -> dict:
    """``run_cluster`` over ``envs`` (default ``CLUSTER_ENVS``), stored in ``out_dir`` as one
    dated JSON file (``kind: "cluster"``); envs whose plugin or package is missing are listed
    under ``skipped``. Returns the stored document."""
    private_directory(out_dir)  # refused now, not after minutes of measuring
    results: dict[str, list[dict]] = {}
    notes: list[str] = []
    for env_id, num_envs in available_envs(envs or CLUSTER_ENVS, notes).items():
        results[env_id] = run_cluster(
            env_id, num_envs, seconds=seconds, rounds=rounds, progress=progress, address=address, placement=placement
        )
    sections = {"kind": "cluster", "nodes": SIMULATED_NODES, "seconds": seconds, "rounds": rounds}
    return write_run(out_dir, {**sections, "results": results, "skipped": notes})


# --------------------------------------------------------------------------- rendering


def format_bytes(value: float | None) -> str:
    """``value`` bytes for a table: B, kB or MB; "–" for None."""
    if value is None:
        return "–"
    for unit, size in (("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:,.1f} {unit}"
    return f"{value:,.0f} B"


def render_markdown(results: dict[str, list[dict]]) -> str:
    """The rows of ``run_cluster`` per env as Markdown tables: steps/second, and for the Ray rows
    the bytes per env step to and from the workers, split into rows and infos."""
    lines = []
    for env_id, rows in results.items():
        num_envs = rows[0]["num_envs"] if rows else 0
        workers = rows[0]["num_workers"] if rows else 0
        lines += [
            f"### `{env_id}` ({num_envs} envs, {workers} workers)",
            "",
            "| configuration | steps/s | × Multiprocessing | to workers (actions) | from workers "
            "| of which rows | of which infos | nodes used |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        base = next((r["sps"] for r in rows if r["backend"] == "multiprocessing" and r.get("sps")), None)
        for row in rows:
            if row.get("sps") is None:
                error = (row.get("error") or "").replace("|", "/")
                lines.append(f"| {row['name']} | failed: {error} | | | | | | |")
                continue
            ratio = f"{row['sps'] / base:.2f}×" if base else "–"
            if row["backend"] != "ray":
                lines.append(f"| {row['name']} | {row['sps']:,.0f} | {ratio} | shared memory | shared memory | | | 1 |")
                continue
            nodes = len({w["node_id"] for w in row.get("workers", []) if w.get("node_id")}) or "–"
            lines.append(
                f"| {row['name']} | {row['sps']:,.0f} | {ratio} | {format_bytes(row.get('sent_bytes_per_step'))} "
                f"| {format_bytes(row.get('received_bytes_per_step'))} | {format_bytes(row.get('row_bytes'))} "
                f"| {format_bytes(row.get('info_bytes_per_step'))} | {nodes} |"
            )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
