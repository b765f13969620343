"""The configurations ``puffer bench`` measures on one env, Puffer Core's own: a raw env
loop, Serial, the machine's ceilings, Multiprocessing at the settings of
:mod:`puffer_core.vector.settings`, Ray on request, the ecosystem adapters and the cost of
``send``'s action checks. The peers' configurations are in :mod:`puffer_core.bench.peers`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import time
from collections.abc import Callable
from typing import Any

from puffer_core import vector
from puffer_core.bench.ceiling import parallel_ceiling
from puffer_core.env.environments import make, make_raw
from puffer_core.env.factory import has_native_batches
from puffer_core.env.random_actions import random_action_batches
from puffer_core.vector.checks import available_cpus
from puffer_core.vector.settings import main_share_settings, mp_settings
from puffer_core.vector.timing import Measured, time_async, time_gym_vector, time_raw, time_sb3

__all__ = ["Case", "puffer_cases"]


class Case:
    """One configuration: ``build()`` makes its env (the runner closes it), ``measure(env,
    seconds, warmup)`` gives its steps/second; ``extra`` holds what a measurement adds to
    the row (an adapter's ``backend_sps``)."""

    def __init__(
        self,
        name: str,
        kind: str,
        backend: str,
        num_envs: int,
        num_workers: int,
        batch_size: int,
        build: Callable[[], Any],
        measure: Callable[[Any, float, float], float],
    ):
        self.name, self.kind, self.backend = name, kind, backend
        self.num_envs, self.num_workers, self.batch_size = num_envs, num_workers, batch_size
        self.build, self.measure = build, measure
        self.extra: dict[str, Any] = {}

    def row(self, measured: Measured) -> dict:
        """The row of this configuration given its figures over the rounds (``puffer_core.vector.timing``)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "backend": self.backend,
            "num_envs": self.num_envs,
            "num_workers": self.num_workers,
            "batch_size": self.batch_size,
            "sps": measured.best,
            "error": measured.error,
            **self.extra,
        }


def puffer_cases(
    env_id: str,
    num_envs: int,
    seed: int,
    settings: list[tuple[int, int]] | None = None,
    include_ray: bool = False,
    include_adapters: bool = True,
    include_action_check: bool = True,
) -> list[Case]:
    """Puffer Core's configurations on ``env_id``, in the order of the report (see the module
    docstring); ``settings`` replaces the Multiprocessing (num_workers, batch_size) pairs
    and drops the main-share ones."""
    cases = [
        Case(
            "raw env loop (1 env)",
            "raw",
            "raw",
            1,
            1,
            1,
            lambda: make_raw(env_id),
            lambda env, s, w: time_raw(env, s, w, seed),
        ),
        _vector_case(env_id, num_envs, seed, "Serial", "serial", None, num_envs),
    ]
    cases.extend(_ceiling_cases(env_id, num_envs, seed))
    for workers, batch in settings or mp_settings(num_envs):
        label = f"Multiprocessing w={workers} b={batch}"
        cases.append(_vector_case(env_id, num_envs, seed, label, "multiprocessing", workers, batch))
    for workers, batch in [] if settings else main_share_settings(num_envs):
        label = f"Multiprocessing w={workers}+main b={batch}"
        cases.append(_vector_case(env_id, num_envs, seed, label, "multiprocessing", workers, batch, main_share=True))
        even = num_envs // (workers + 1)
        if batch == num_envs and workers == 1 and even >= 2:  # the main process one env lighter
            label = f"Multiprocessing w={workers}+main({even - 1}) b={batch}"
            lighter = {"main_share": even - 1}
            cases.append(_vector_case(env_id, num_envs, seed, label, "multiprocessing", workers, batch, **lighter))
    if has_native_batches(env_id):  # native batches: both ways
        cases.append(_vector_case(env_id, num_envs, seed, "Serial native", "serial", None, num_envs, native=True))
        for workers, batch in settings or mp_settings(num_envs):
            label = f"Multiprocessing w={workers} b={batch} native"
            cases.append(_vector_case(env_id, num_envs, seed, label, "multiprocessing", workers, batch, native=True))
    if include_ray and importlib.util.find_spec("ray") is not None:
        workers = min(num_envs, available_cpus())
        cases.append(_vector_case(env_id, num_envs, seed, f"Ray w={workers} b={num_envs}", "ray", workers, num_envs))
    if include_adapters:
        cases.extend(_adapter_cases(env_id, num_envs, seed))
    if include_action_check:
        cases.append(_action_check_case(env_id, num_envs, seed))
    return cases


def _vector_case(
    env_id: str,
    num_envs: int,
    seed: int,
    name: str,
    backend: str,
    workers: int | None,
    batch: int,
    **vector_kwargs: Any,
) -> Case:
    """A vector env of ``backend`` stepped through recv/send."""

    def build() -> Any:
        return vector.make(
            env_id,
            num_envs=num_envs,
            num_workers=workers,
            batch_size=batch,
            backend=backend,
            seed=seed,
            vector_kwargs=vector_kwargs or None,
        )

    def measure(env: Any, seconds: float, warmup: float) -> float:
        return time_async(env, seconds, warmup, env.batch_size, env.single_action_space, seed)

    case = Case(name, "puffer", backend, num_envs, workers or 1, batch, build, measure)
    if vector_kwargs:  # what makes the setting again (the step-time budget of the fastest one)
        case.extra["vector_kwargs"] = dict(vector_kwargs)
    return case


def _ceiling_cases(env_id: str, num_envs: int, seed: int) -> list[Case]:
    """Independent Serial processes, one per CPU, that never talk: what no backend can beat
    here; and the same processes waiting for each other after every batch: what no
    synchronous (full-batch) setting can beat."""
    processes = min(available_cpus(), num_envs)

    def case(name: str, backend: str, lockstep: bool) -> Case:
        def measure(_: Any, seconds: float, warmup: float) -> float:
            return parallel_ceiling(env_id, num_envs, seconds, processes, seed, lockstep=lockstep)

        return Case(name, "ceiling", backend, num_envs, processes, num_envs, lambda: None, measure)

    return [
        case(f"ceiling: {processes} independent Serial processes (no communication)", "independent", False),
        case(
            f"ceiling, lock-step: {processes} Serial processes that wait for each other after every batch",
            "independent-lockstep",
            True,
        ),
    ]


def _adapter_cases(env_id: str, num_envs: int, seed: int) -> list[Case]:
    """``to_gymnasium`` and ``to_sb3`` over Multiprocessing (one worker per core, full batch).
    Each case alternates, on one vector env, between stepping it directly and through the
    adapter (same autoreset mode), so the ratio measures the adapter and not the noise
    between two sets of worker processes."""
    workers = min(available_cpus(), num_envs)
    setting = f"Multiprocessing w={workers} b={num_envs}"

    def case(name: str, mode: str, adapt: Callable[[Any], Any], timer: Callable[..., float]) -> Case:
        def build() -> Any:
            envs = vector.make(
                env_id, num_envs=num_envs, num_workers=workers, backend="multiprocessing", seed=seed, autoreset=mode
            )
            return adapt(envs)

        def measure(adapter: Any, seconds: float, warmup: float) -> float:
            envs, space = adapter.envs, adapter.envs.single_action_space
            direct, adapted = [], []
            for _ in range(4):
                direct.append(time_gym_vector(envs, seconds / 4, warmup / 4, envs.num_envs, space, seed))
                adapted.append(timer(adapter, seconds / 4, warmup / 4, envs.num_envs, space, seed))
            this.extra["backend_sps"] = max(max(direct), this.extra.get("backend_sps", 0.0))
            return max(adapted)

        this = Case(name, "adapter", "multiprocessing", num_envs, workers, num_envs, build, measure)
        return this

    cases = [case(f"to_gymnasium({setting})", "next_step", vector.to_gymnasium, time_gym_vector)]
    if _sb3_takes(env_id):
        cases.append(case(f"to_sb3({setting} same_step)", "same_step", vector.to_sb3, time_sb3))
    return cases


def _action_check_case(env_id: str, num_envs: int, seed: int) -> Case:
    """Multiprocessing (one worker per core, full batch) with ``send``'s action checks on,
    alternating on one vector env with ``check_actions=False`` in eight short stretches
    (row: ``unchecked_sps`` and ``checked_short_sps``, the best stretch of each, and
    ``ratio_vs_unchecked``). The row's own steps/second is timed as every other row's (one
    stretch of ``seconds``): the best of many short stretches runs high, so only the ratio
    uses them. The check's own time per send, measured in-process, gives ``check_us`` and
    its share of a send at this throughput, ``check_share``: the same cost without the
    noise of the worker processes."""
    workers = min(available_cpus(), num_envs)

    def build() -> Any:
        return vector.make(env_id, num_envs=num_envs, num_workers=workers, backend="multiprocessing", seed=seed)

    def measure(envs: Any, seconds: float, warmup: float) -> float:
        space, rows = envs.single_action_space, envs.batch_size
        sps: dict[bool, list[float]] = {True: [], False: []}
        for pair in range(4):
            for checked in (True, False) if pair % 2 == 0 else (False, True):  # either goes first as often
                envs.check_actions = checked
                sps[checked].append(time_async(envs, seconds / 8, warmup / 8, rows, space, seed))
        envs.check_actions = True
        this.extra["unchecked_sps"] = max(max(sps[False]), this.extra.get("unchecked_sps", 0.0))
        this.extra["checked_short_sps"] = max(max(sps[True]), this.extra.get("checked_short_sps", 0.0))
        check_us = min(_action_check_us(envs, seed), this.extra.get("check_us", float("inf")))
        this.extra["check_us"] = round(check_us, 3)
        checked_sps = time_async(envs, seconds, warmup, rows, space, seed)
        this.extra["check_share"] = round(check_us * 1e-6 * checked_sps / rows, 5)  # check seconds per second
        return checked_sps

    name = f"Multiprocessing w={workers} b={num_envs} check_actions=True"
    this = Case(name, "action-check", "multiprocessing", num_envs, workers, num_envs, build, measure)
    return this


def _action_check_us(envs: Any, seed: int, calls: int = 20_000) -> float:
    """Microseconds ``send`` spends checking one batch of valid actions (checks on minus off)."""
    actions = random_action_batches(envs.single_action_space, envs.batch_size, 1, seed)[0]
    per_call = {}
    for checked in (True, False, True, False):
        envs.check_actions = checked
        start = time.perf_counter()
        for _ in range(calls):
            envs._check_actions(actions, envs.batch_size)
        elapsed = (time.perf_counter() - start) / calls
        per_call[checked] = min(elapsed, per_call.get(checked, elapsed))
    envs.check_actions = True
    return max(0.0, per_call[True] - per_call[False]) * 1e6


def _sb3_takes(env_id: str) -> bool:
    """SB3 is importable and the env's flat observation holds numbers, not mixed-dtype bytes."""
    if importlib.util.find_spec("stable_baselines3") is None:
        return False

    env = make(env_id)
    try:
        return not env.obs_layout.mixed_dtypes
    finally:
        with contextlib.suppress(Exception):
            env.close()
