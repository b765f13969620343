"""``Multiprocessing``: the vector env API over worker processes and, optionally, the main
share. It lays the envs out in units (:mod:`.main_share` ``plan_units``), sets up the shared
mapping (:mod:`.shared_memory`), the book of commands (:mod:`.commands`), the worker
processes (:mod:`.processes`) and the main share, and then drives them: ``send`` puts a
batch's actions in its rows and sends its units the STEP word, ``recv`` waits for a batch
and hands out its rows in place. A fault ends here, in ``_fault``: raise, or restart.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import numpy as np

from puffer_core.errors import EnvCallError, WorkerError
from puffer_core.vector.autoreset import DISABLED
from puffer_core.vector.base import VectorEnv
from puffer_core.vector.calls import CallResult, EnvCall, describe, per_worker
from puffer_core.vector.checks import available_cpus, check_info_buffer_bytes, check_main_share, check_spin_us
from puffer_core.vector.faults import Fault
from puffer_core.vector.mp.commands import Commands
from puffer_core.vector.mp.main_share import MainShare, ResetRows, plan_units
from puffer_core.vector.mp.processes import Resources, UnitPlan, Workers, release
from puffer_core.vector.mp.protocol import CALL, HAS_MASK, HAS_SEEDS, RESET, STEP, spin_of
from puffer_core.vector.mp.scratch import make_scratch
from puffer_core.vector.mp.shared_memory import ROW_FIELDS, Layout, map_shared
from puffer_core.vector.mp.start import Lifeline, check_not_bootstrapping, check_start_method, resolve_start_method
from puffer_core.vector.vector_settings import Counts, VectorSettings, WorkerOptions, option

__all__ = ["Multiprocessing", "MultiprocessingOptions"]

#: Seconds ``close`` gives workers to close their envs (a minute when env 0 records: ``close_grace``).
CLOSE_GRACE = 1.0


@dataclass(frozen=True)
class MultiprocessingOptions(WorkerOptions):
    """Multiprocessing's own settings, beyond the workers' ``timeout``, ``startup_timeout`` and
    ``max_restarts``: ``start_method`` ("fork", "forkserver" or "spawn"; all three pass the
    same tests; None: see :class:`Multiprocessing`), ``info_buffer_bytes`` (per-worker mailbox
    for infos and call arguments, default 256 KiB), ``spin_us`` (the longest a waiting side
    polls before it sleeps: the main process always, workers only when each has a core;
    None: ``DEFAULT_SPIN_US``; 0 never spins) and ``main_share`` (True, "auto" or a number of
    envs: the main process steps a share itself, see :mod:`.main_share`)."""

    start_method: str | None = option(None, check_start_method)
    info_buffer_bytes: int = option(256 * 1024, check_info_buffer_bytes)
    spin_us: float | None = option(None, check_spin_us)
    main_share: bool | str | int = option(False, check_main_share)

    def plan(self, num_envs: Any, num_workers: Any, batch_size: Any, backend: str) -> Counts:
        """The checked counts, the main share (if any) the last unit (:func:`.main_share.plan_units`)."""
        cpus = available_cpus()
        envs, workers, _, batch, counts = plan_units(num_envs, num_workers, batch_size, self.main_share, cpus)
        return Counts(envs, workers, batch, tuple(counts))


class BatchViews(NamedTuple):
    """A batch's arrays as ``recv`` hands them out, and its rows of the actions ``send`` fills."""

    observations: np.ndarray
    rewards: np.ndarray
    terminals: np.ndarray
    truncations: np.ndarray
    env_ids: np.ndarray
    masks: np.ndarray
    actions: np.ndarray | None


class Multiprocessing(VectorEnv):
    """``num_envs`` envs over ``num_workers`` processes; see :mod:`puffer_core.vector.mp`.

    Parameters beyond ``make``'s: :class:`MultiprocessingOptions`.

    The default start method is safe to use from a process that runs threads (torch, Ray, a
    notebook kernel): "forkserver" when this process has other threads (counted by the OS:
    native ones too) or on Python 3.14+, "fork" when it has none, "spawn" off Linux; the
    method chosen is the ``start_method`` attribute. Forking a process with threads may
    deadlock the child, which Python 3.12+ warns about. "forkserver" and "spawn" workers
    unpickle the env creator (cloudpickle) and import the main module, so a script keeps its
    code under ``if __name__ == "__main__":``. A restarted worker (``on_fault="restart"``)
    starts the way the vector env did, except that a "fork" env's replacement comes from the
    fork server once the process has threads. Details: :mod:`puffer_core.vector.mp.start`.
    """

    backend = "multiprocessing"
    Options = MultiprocessingOptions

    def _open(self, settings: VectorSettings) -> None:
        check_not_bootstrapping()
        options = cast(MultiprocessingOptions, settings.options)
        workers, units = settings.num_workers, len(settings.counts)
        self._units = units
        self._spin = spin_of(options.spin_us, workers, available_cpus())
        #: how the workers were started: "fork", "forkserver" or "spawn" (see :mod:`.start`)
        self.start_method = resolve_start_method(options.start_method)
        self._init_workers(settings)  # num_workers counts processes; the main share is one more unit
        self._res = self._allocate(workers, options.info_buffer_bytes, settings.close_grace(CLOSE_GRACE))
        self._closed = False
        self._state = "new"
        self._held: list[int] | None = None  # the units of the batch recv handed out, until send
        try:
            self._start_units(settings, workers)
        except BaseException:
            self.close()
            raise

    # ---------------------------------------------------------------- start-up
    def _allocate(self, workers: int, info_buffer_bytes: int, grace: float) -> Resources:
        """The shared mapping, the lifeline and the workers' temp dir, owned by the finalizer from
        here on; ``close`` gives the workers ``grace`` seconds to close their envs."""
        obs_space = self.single_observation_space
        layout = Layout(  # control blocks and mailboxes for the worker processes only
            self.num_envs,
            self._env_count,
            workers,
            obs_space.shape,
            obs_space.dtype,
            self._action_shape,
            self._action_dtype,
            info_buffer_bytes,
        )
        res = Resources(workers, layout, grace=grace)
        self._finalizer = weakref.finalize(self, release, res)
        res.buffer, memfd = map_shared(layout.size, self.start_method)
        if memfd is not None:
            res.memfd.append(memfd)
        res.lifeline.append(Lifeline())  # what workers watch to die with this process (see .start)
        try:
            res.scratch.append(make_scratch())  # stale ones of dead processes swept first
        except OSError:  # no writable temp dir: the workers use the usual one (and envs may fail there too)
            pass
        return res

    def _start_units(self, settings: VectorSettings, workers: int) -> None:
        """Start the book of commands, the worker processes and the main share; wait until every
        unit has built its envs."""
        res, units, factory = self._res, self._units, settings.factory
        self._arrays = arrays = res.layout.arrays(res.buffer)
        self._map_views(arrays)
        owner = weakref.proxy(self)  # the parts report faults up here; a strong reference would be a cycle
        commands = Commands(
            arrays,
            units,
            workers,
            [self._envs_of(w) for w in range(units)],
            self._row_bounds,
            self.possible_agents if self.agents_per_env > 1 else None,
            self.timeout,
            self._startup_timeout,
            self._spin,
            self._fault_log,
            res.pipes,
        )
        self._commands, self._ready, self._infos = commands, commands.ready, commands.infos
        plan = [UnitPlan(self._first_env[w], self._env_counts[w], self._row_bounds[w]) for w in range(workers)]
        self._workers = Workers(
            owner, res, commands, factory, self.start_method, plan, self.agents_per_env, self._spin, self.autoreset_mode
        )
        commands.faults = weakref.proxy(self._workers)
        self._main: MainShare | None = None
        for w in range(workers):
            self._workers.spawn(w, self.start_method)
        if units > workers:  # the main share: built while the workers build theirs
            lo, hi = self._row_bounds[workers]
            envs = self._envs_of(workers)
            self._main = MainShare(
                owner,
                workers,
                commands,
                factory,
                self.agents_per_env,
                {name: arrays[name][lo:hi] for name in ROW_FIELDS},
                ResetRows(arrays["reset_seeds"][envs.start : envs.stop], arrays["reset_mask"][envs.start : envs.stop]),
                self.autoreset_mode,
            )
            self._main.build()
        commands.wait(workers, "building")
        commands.clear()
        self._started = True  # from now on a fault may restart a worker

    def _map_views(self, arrays: dict) -> None:
        """The row arrays, and each batch shape's views made once: every unit's, and all rows'."""
        self._obs, self._rew = arrays["observations"], arrays["rewards"]
        self._term, self._trunc = arrays["terminals"], arrays["truncations"]
        self._masks, self._actions = arrays["masks"], arrays["actions"]
        self._reset_seeds, self._reset_mask = arrays["reset_seeds"], arrays["reset_mask"]
        every = (self._obs, self._rew, self._term, self._trunc, self._all_ids, self._masks, self._actions)
        self._all_views = BatchViews(*every)
        self._unit_views = [BatchViews(*(view[lo:hi] for view in every)) for lo, hi in self._row_bounds]

    # ---------------------------------------------------------------- faults
    def _fault(self, fault: Fault, message: str, due: bool = True, cause: str | None = None) -> None:
        """``on_fault="raise"`` (and any fault while starting up): close and raise WorkerError
        (its ``cause``: the traceback, how the process ended, or "timeout"); else restart.
        ``due``: the unit owed a completion (it was running), which the restart then gives."""
        if self._on_fault == "restart" and self._started:
            self._restart(fault, due)
            return
        self.close()
        cause = cause or fault.traceback or fault.cause
        raise WorkerError(message, worker=fault.worker, env_index=fault.env, cause=cause)

    def _restart(self, fault: Fault, due: bool) -> None:
        """Replace unit ``fault.worker``'s envs; its rows come back truncated with the fault in their infos."""
        w, commands = fault.worker, self._commands
        if self._main is not None and w == self._main.unit:
            fault = self._main.rebuild(fault, self._seed)
        else:
            self._workers.replace(fault, self._seed)
        self._fault_log.restarted(fault)
        ready = commands.ready
        if fault.phase == "call":  # the call fails; the rows learn of the fault with the next results
            commands.call_results[w] = fault
            commands.pending_faults[w] = fault
            if due:
                ready.append(w)  # ends the call's wait (which then drops it from the ready list)
        elif due or w in ready:
            commands.mark_faulted(w, fault)
            if w not in ready:
                ready.append(w)
        else:  # idle, its rows held by the caller: the fault comes with its next results
            commands.pending_faults[w] = fault

    @property
    def stats(self) -> dict:
        """Faults and restarts so far (``on_fault="restart"``): counts, latencies, faults per env."""
        return self._fault_log.as_dict()

    @property
    def lost_wakeups(self) -> int:
        """Completions noticed only when ``timeout`` ran out (a lost wake-up); always 0."""
        commands = self.__dict__.get("_commands")
        return commands.lost_wakeups if commands is not None else self.__dict__.get("_lost_wakeups", 0)

    # ---------------------------------------------------------------- commands to units
    def _send(self, units: Any, op: int) -> None:
        """Command ``op`` to ``units``: the workers' words first, then the main share's part."""
        main = self._main
        if main is None or main.unit not in units:
            self._commands.send(units, op)
            return
        word = self._commands.send([w for w in units if w != main.unit], op)
        if op == STEP and self._workers_per_batch < self._units:
            main.queue(word)  # stepped while recv waits (see MainShare.step)
        else:  # the workers are on their way: now the main process's own share
            main.run(op, word)

    def _put_argument(self, w: int, argument: Any) -> None:
        if self._main is not None and w == self._main.unit:
            self._main.argument = argument
        else:
            self._commands.put_argument(w, argument)

    def _finish_in_flight(self) -> None:
        """Let every unit finish what it is on; its results stay ready."""
        if self._main is not None:
            self._main.step()
        commands = self._commands
        if commands.running:
            commands.wait(len(commands.ready) + len(commands.running))

    # ---------------------------------------------------------------- the API
    def async_reset(self, seed: Any = None, options: dict | None = None) -> None:
        self._check_open()
        plan = self._plan_reset(seed, options)
        # Results still in flight belong to the old episode: wait for them and drop them.
        self._finish_in_flight()
        self._commands.clear()
        self._held = None
        flags = 0
        if plan.seeds is not None:
            self._reset_seeds[...] = plan.seeds
            flags |= HAS_SEEDS
        if plan.mask is not None:
            self._reset_mask[...] = plan.mask
            flags |= HAS_MASK
        self._commands.put_reset_flags(flags)
        if self._main is not None:
            self._main.reset_flags = flags
        for w in range(self._units):
            self._put_argument(w, plan.options)
        self._send(range(self._units), RESET)
        self._state = "running"

    def _call(self, indices: list[int], request: EnvCall) -> list[CallResult]:
        commands = self._commands
        self._finish_in_flight()  # its results stay ready for recv
        ready, by_worker = list(commands.ready), per_worker(indices, request, self._first_env)
        commands.call_results.clear()
        for w, argument in by_worker.items():
            self._put_argument(w, argument)
        self._send(list(by_worker), CALL)
        commands.wait(len(ready) + len(by_worker))
        commands.ready.clear()  # the call's completions are not batches
        commands.ready.extend(ready)
        results = {}
        for w in by_worker:
            answer = commands.call_results.pop(w)
            if isinstance(answer, Fault):  # the worker died during the call and was replaced
                raise EnvCallError(
                    f"{describe(request)}: worker {w} faulted during the call ({answer.cause}) and was restarted; "
                    "its envs are fresh, the call did not complete",
                    env_index=answer.env,
                )
            results.update((r.env_index, r) for r in answer)
        return [results[i] for i in indices]

    def recv(self) -> tuple:
        held = self._held
        if held is not None or self._closed or self._state == "new":
            self._check_recv(holding=held is not None)  # raises, naming the misuse
        k, commands, ready = self._workers_per_batch, self._commands, self._ready
        if k < self._units and commands.running:
            commands.scan()  # workers that finished meanwhile queue up now, not after the main share
        if len(ready) < k:
            main = self._main
            if main is not None and main.pending is not None:
                main.step(k)
            if len(ready) < k:
                commands.wait(k)
        obs, rew, term, trunc, env_ids, masks, _ = self._take(k)
        return obs, rew, term, trunc, self._batch_infos(self._held), env_ids, masks

    def _take(self, k: int) -> BatchViews:
        """Hand out the next batch, ``k`` of the ready units (held until ``send``): its rows'
        views, made once for all rows or one unit, else gathered (see ``_map_views``)."""
        ready = self._ready
        if len(ready) == k:
            batch = [ready.popleft()] if k == 1 else sorted(ready)
            ready.clear()
        elif k == 1:  # oldest command first, as below
            batch = [min(ready, key=self._commands.sent_at.__getitem__)]
            ready.remove(batch[0])
        else:
            # Oldest command first among the finished: the main share, always finished at once,
            # must not starve workers that were sent their command before it.
            batch = sorted(ready, key=self._commands.sent_at.__getitem__)[:k]
            for w in batch:
                ready.remove(w)
            batch.sort()
        if k < self._units and self._commands.running:
            self._commands.look_at_late()
        self._held = batch
        if k == self._units:
            return self._all_views
        if k == 1:
            return self._unit_views[batch[0]]
        rows, env_ids = self._batch_rows(batch)
        return BatchViews(
            self._obs[rows], self._rew[rows], self._term[rows], self._trunc[rows], env_ids, self._masks[rows], None
        )

    def send(self, actions: Any) -> None:
        batch = self._held
        if batch is None or self._closed:
            self._check_send(holding=batch is not None)  # raises, naming the misuse
        actions = self._check_actions(actions, self.batch_size)
        if self.autoreset_mode == DISABLED:  # disabled needs full batches
            self._check_not_ended(self._term, self._trunc)
        # Into the batch's rows: through the views made once for all rows or one unit, else unit by unit.
        if len(batch) == self._units:
            self._actions[...] = actions
        elif len(batch) == 1:
            self._unit_views[batch[0]].actions[...] = actions
        else:
            start = 0
            for w in batch:
                lo, hi = self._row_bounds[w]
                self._actions[lo:hi] = actions[start : start + hi - lo]
                start += hi - lo
        self._held = None
        self._send(batch, STEP)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Drop every view of the mapping before unmapping; the finalizer does the rest (once).
        main = self.__dict__.pop("_main", None)
        if main is not None:
            main.close()
            main.rows = main.plans = None
        commands = self.__dict__.pop("_commands", None)
        if commands is not None:
            self._lost_wakeups = commands.lost_wakeups
            commands.release()
        for name in (
            "_arrays",
            "_obs",
            "_rew",
            "_term",
            "_trunc",
            "_masks",
            "_actions",
            "_reset_seeds",
            "_reset_mask",
            "_all_views",
            "_unit_views",
        ):
            self.__dict__.pop(name, None)
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()

    @property
    def pids(self) -> list[int]:
        """Worker process ids (for diagnostics and tests)."""
        res = self.__dict__.get("_res")
        return [proc.pid for proc in res.procs if proc is not None] if res is not None else []
