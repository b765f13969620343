"""The main share (``main_share=True``, or a number of envs): the main process steps one more
unit of envs itself, the last one, after the workers: no process of its own, no control
block. Its envs write into their rows of the shared mapping like a worker's do.

With full batches it steps them in ``send``, right after the workers were signalled
(``run``), and its unit completes before ``send`` returns. With async batches
(``batch_size < num_envs``) ``send`` only queues them (``queue``), and ``recv`` steps them
one env at a time while it waits (``step``), looking at the workers between envs
(:meth:`.commands.Commands.scan`): a worker that finishes is served at once instead of
after the whole share (envs whose step time varies, like NetHack's, would otherwise leave
the worker idle for most of it). ``main_share=k`` gives it k envs and the workers the rest
(full batches only): it also receives, sends and runs the caller's code, so a lighter share
can keep the workers from waiting for it.

It enters the book of :mod:`.commands` as a unit that is never "running": stamped with its
command word when it gets one (so async batches take the oldest command first, the main
share's too), ready when its envs are done. An env of it that raises goes to the vector
env's ``_fault`` like a worker's; a restart re-creates its envs here (``rebuild``).
"""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import numpy as np

from puffer_core.env.factory import EnvFactory
from puffer_core.errors import APIUsageError
from puffer_core.vector.autoreset import ResetPlan
from puffer_core.vector.calls import sendable
from puffer_core.vector.checks import check_counts, check_main_share, split_envs
from puffer_core.vector.env_group import EnvFault, EnvGroup, env_fault_message
from puffer_core.vector.faults import Fault, restart_seeds
from puffer_core.vector.mp.commands import Commands
from puffer_core.vector.mp.protocol import CALL, HAS_MASK, HAS_SEEDS, RESET, STEP
from puffer_core.vector.native_group import NativeGroup, make_group

__all__ = ["MainShare", "ResetRows", "plan_units", "wants_main_share"]


def wants_main_share(main_share: Any, num_envs: Any, num_workers: Any, cpus: int) -> bool:
    """Whether the main process steps a share of the envs itself (see the module docstring)."""
    main_share = check_main_share(main_share)
    if _is_count(main_share):
        return True  # _main_counts checks the count against the envs and workers
    if not isinstance(num_envs, int) or isinstance(num_envs, bool):
        return False  # check_counts says what is wrong with num_envs
    if main_share == "auto":  # on when the main process would be one process too many for the cores
        workers = num_workers if isinstance(num_workers, int) else min(num_envs, cpus)
        return workers + 1 > cpus and num_envs >= 2
    if main_share and num_envs < 2:
        raise APIUsageError(
            f"main_share needs num_envs ≥ 2 (a share for the main process and one for a worker), got {num_envs}"
        )
    return bool(main_share)


def plan_units(
    num_envs: Any, num_workers: Any, batch_size: Any, main_share: Any, cpus: int
) -> tuple[int, int, int, int, list[int]]:
    """(envs, worker processes, units, batch, envs per unit): the main share, if any, is the
    last unit, after the workers (default: one fewer worker than cores then)."""
    main_share = check_main_share(main_share)
    if not wants_main_share(main_share, num_envs, num_workers, cpus):
        envs, workers, batch, counts = check_counts(num_envs, num_workers, batch_size, "multiprocessing")
        return envs, workers, workers, batch, counts
    workers = num_workers if num_workers is not None else max(1, min(num_envs, cpus) - 1)
    envs, units, batch, counts = check_counts(num_envs, workers + 1, batch_size, "multiprocessing")
    if _is_count(main_share):
        counts = _main_counts(main_share, envs, units - 1, batch)
    return envs, units - 1, units, batch, counts


def _is_count(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)  # numpy ints too


def _main_counts(main_envs: int, envs: int, workers: int, batch: int) -> list[int]:
    """Env counts per unit when the main process steps ``main_envs`` of ``envs`` itself and the
    workers share the rest (full batches only: smaller ones need units of one size)."""
    if not 1 <= main_envs <= envs - workers:
        left = f"leaves {envs - main_envs}" if main_envs <= envs else f"is more than num_envs {envs}, leaving none"
        raise APIUsageError(
            f"main_share={main_envs} envs for the main process {left} for {workers} "
            f"worker(s); give 1 to {envs - workers}, or True for an even share"
        )
    if batch != envs:
        raise APIUsageError(
            f"main_share={main_envs} (an uneven share) needs full batches (batch_size={envs}); "
            f"with batch_size={batch} use main_share=True"
        )
    return [*split_envs(envs - main_envs, workers), main_envs]


class ResetRows(NamedTuple):
    """The main share's envs' slices of a reset's plan in the shared mapping."""

    seeds: np.ndarray  #: ``reset_seeds``
    mask: np.ndarray  #: ``reset_mask``


class MainShare:
    """Unit ``unit``: the envs the main process steps itself (see the module docstring).

    ``owner`` is a weak proxy of the vector env (``_fault``, ``_count_fault``); ``rows`` its
    rows of the shared mapping, by field; ``plans`` where a reset's plan for its envs sits."""

    def __init__(
        self,
        owner: Any,
        unit: int,
        commands: Commands,
        factory: EnvFactory,
        agents_per_env: int,
        rows: dict,
        plans: ResetRows,
        autoreset: str,
    ):
        self.owner, self.unit, self.commands = owner, unit, commands
        self.factory, self.agents_per_env, self.autoreset = factory, agents_per_env, autoreset
        self.rows, self.plans = rows, plans
        self.envs = commands.envs_of[unit]
        self.group: EnvGroup | NativeGroup | None = None
        #: async batches: the next env still to step (None: nothing pending)
        self.pending: int | None = None
        #: the next command's argument (reset options; a call's local indices and request)
        self.argument: Any = None
        self.reset_flags = 0  # the next reset's HAS_SEEDS / HAS_MASK

    def build(self, seeds: Any = None, reset: bool = False) -> None:
        """Make its envs (and reset them with ``seeds`` when ``reset``: a restart)."""
        self.group = make_group(
            self.factory,
            len(self.envs),
            self.agents_per_env,
            self.rows,
            first_env=self.envs.start,
            autoreset=self.autoreset,
        )
        if reset:
            self.group.reset(ResetPlan(seeds, None, None))

    def queue(self, word: int) -> None:
        """An async batch's step: its envs step one at a time while recv waits (``step``)."""
        self.commands.stamp(self.unit, word)
        self.pending = 0

    def step(self, needed: int | None = None) -> None:
        """Step the pending envs, one at a time, until ``needed`` units are ready (None: all of
        them); between envs, workers that finished queue up."""
        if self.pending is None:
            return
        w, group, commands = self.unit, self.group, self.commands
        ready, scan, step_one, last = commands.ready, commands.scan, group.step_one, group.num_envs - 1
        while self.pending is not None and (needed is None or len(ready) < needed):
            i = self.pending
            self.pending = i + 1 if i < last else None
            try:
                infos = step_one(i)
            except EnvFault as exc:
                self.pending = None
                self._fault(exc)
                return
            if infos:
                commands.infos[w].extend(infos)
            if i == last:
                commands.finished(w)
            scan()

    def run(self, op: int, word: int) -> None:
        """Run command ``op`` here, now; the unit is ready when this returns."""
        w, group, commands = self.unit, self.group, self.commands
        commands.stamp(w, word)
        try:
            if op == STEP:
                commands.infos[w].extend(group.step())
            elif op == RESET:
                plans = self.plans
                seeds = plans.seeds.copy() if self.reset_flags & HAS_SEEDS else None
                mask = plans.mask.copy() if self.reset_flags & HAS_MASK else None
                commands.infos[w].extend(group.reset(ResetPlan(seeds, mask, self.argument)))
            elif op == CALL:
                local, request = self.argument
                commands.call_results[w] = sendable(group.call(local, request))
        except EnvFault as exc:
            self._fault(exc)
            return
        commands.finished(w)

    def _fault(self, exc: EnvFault) -> None:
        """An env raised: the vector env raises WorkerError, or (``on_fault="restart"``) has it rebuilt."""
        report = exc.to_dict()
        message = env_fault_message(report, "Multiprocessing: the main process's share: ")
        self.owner._fault(Fault.reported(self.unit, report), message)

    def rebuild(self, fault: Fault, run_seed: int | None) -> Fault:
        """Re-create its envs after ``fault`` (there is no process to replace); each failure to
        build counts as one more fault (too many raise). The last fault."""
        w, log = self.unit, self.commands.fault_log
        while True:
            self.owner._count_fault(fault, w)
            self.close()
            seeds = restart_seeds(run_seed, self.envs.start, len(self.envs), log.worker_restarts[w])
            try:
                self.build(seeds, reset=True)
                return fault
            except EnvFault as exc:
                fault = Fault.reported(w, exc.to_dict())

    def close(self) -> None:
        group, self.group = self.group, None
        self.pending = None
        if group is not None:
            group.close()
