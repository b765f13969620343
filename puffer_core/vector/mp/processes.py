"""The worker processes of a Multiprocessing vector env: starting them, telling what became of
one that faulted, replacing it, and releasing them with everything else the vector env holds
outside Python.

``Workers.spawn`` gives a worker its pipes and a ``WorkerSpec`` (:mod:`.worker`) and starts
it the way :mod:`.start` says; the book of :mod:`.commands` then waits for its BUILD word.
When :mod:`.commands` notices a fault (a reported error, a broken pipe, a dead process, a
deadline), ``Workers`` says what happened in a message naming the worker, the env and the
cause, and hands it to the vector env (``owner._fault``), which raises ``WorkerError`` or,
under ``on_fault="restart"``, calls ``replace``: the process is killed and made anew, it
rebuilds and resets its envs before it reports in, and the main process waits for just that
one (``await_rebuild``) while the others go on.

``Resources`` is what the vector env holds outside Python: processes, pipes, the mapping
and its memfd, the workers' temp dir and the owner's lifeline. ``release`` stops the
workers and frees all of it; the vector env runs it from ``close()`` and from a
``weakref.finalize`` (at garbage collection or interpreter exit, Ctrl-C included), once.
The workers' temp dir (``TMPDIR`` and :mod:`tempfile`'s) is a folder of the vector env's
own, shared by its workers and removed by ``release``: what a killed worker's envs could not
remove (each NetHack game keeps a folder there) goes with it, however many restarts a run had.
Where the owner itself was killed, the next vector env made on the machine sweeps the folder
(:mod:`.scratch`).
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from puffer_core.env.factory import EnvFactory
from puffer_core.vector.env_group import env_fault_message
from puffer_core.vector.faults import Fault, restart_seeds
from puffer_core.vector.mp.commands import Commands, Pipes, WorkerGone
from puffer_core.vector.mp.protocol import BUILD, CMD, DONE, ERROR, HINT, QUIT, STATUS, WAKE_ANY, Spin
from puffer_core.vector.mp.shared_memory import SLOTS, FdHandle, Layout
from puffer_core.vector.mp.start import (
    IMPORT_TIME_CAUSE,
    IMPORT_TIME_EXIT,
    WORKER_NAME,
    Lifeline,
    guard_hint,
    restart_start_method,
    worker_context,
)
from puffer_core.vector.mp.worker import Pickled, WorkerSpec, worker_main

__all__ = ["Resources", "UnitPlan", "Workers", "how_it_ended", "release"]


class UnitPlan(NamedTuple):
    """A worker's share: its first env, how many envs, and its agent rows (lo, hi)."""

    first_env: int
    num_envs: int
    rows: tuple[int, int]


@dataclass
class Resources:
    """What a vector env holds outside Python, all of it released by ``release``, once. It
    must not refer to the vector env (the finalizer holds it)."""

    workers: int
    layout: Layout
    buffer: Any = None  # the mapping (mmap)
    memfd: list[int] = field(default_factory=list)  # its fd, while open
    procs: list = field(default_factory=list)  # per worker: its Process (None before it starts)
    cmd_w: list[int] = field(default_factory=list)  # main's end of each worker's command-hint pipe (-1: none)
    data_r: list[int] = field(default_factory=list)  # main's end of each worker's data pipe
    shared_fds: list[int] = field(default_factory=list)  # the completion-hint pipe, both ends
    scratch: list[str] = field(default_factory=list)  # the workers' temp dir
    lifeline: list[Lifeline] = field(default_factory=list)
    grace: float = 1.0  # seconds workers get to close their envs

    def __post_init__(self) -> None:
        self.procs = [None] * self.workers
        self.cmd_w = [-1] * self.workers
        self.data_r = [-1] * self.workers

    @property
    def pipes(self) -> Pipes:
        """The pipe ends :class:`.commands.Commands` writes and reads (these lists themselves)."""
        return Pipes(self.cmd_w, self.data_r, self.shared_fds)


def release(res: Resources) -> None:
    """Stop the workers and release every resource. Safe to call more than once."""
    procs = res.procs
    procs[:] = [proc for proc in procs if proc is not None]  # a start that failed half-way leaves gaps
    buffer = res.buffer
    if buffer is not None and not buffer.closed and procs:
        try:
            words = res.layout.arrays(buffer)["to_worker"]
            words[:, CMD] = (1 << 62) | QUIT
            del words
        except (ValueError, TypeError):
            pass
    for fd in res.cmd_w:  # command pipes: wake sleepers (then EOF below)
        try:
            os.write(fd, HINT)
        except OSError:
            pass
    for group in (res.cmd_w, res.data_r, res.shared_fds):
        for fd in group:
            try:
                os.close(fd)
            except OSError:
                pass
        group.clear()
    deadline = time.monotonic() + res.grace
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.is_alive():
            proc.kill()
    for proc in procs:
        proc.join(5)
        try:
            proc.close()
        except (ValueError, AttributeError):
            pass
    procs.clear()
    if res.scratch:  # the workers' temp dir, with whatever a killed worker could not remove
        shutil.rmtree(res.scratch.pop(), ignore_errors=True)
    if res.memfd:
        try:
            os.close(res.memfd.pop())
        except OSError:
            pass
    if res.lifeline:  # only now: a pipe lifeline's EOF would end workers still closing their envs
        res.lifeline.pop().close()
    if buffer is not None:
        try:
            buffer.close()
        except BufferError:  # views still held by the user; the mapping dies with them
            pass


def how_it_ended(proc: Any) -> str:
    proc.join(0.5)
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class Workers:
    """The worker processes of one vector env (see the module docstring).

    ``owner`` is a weak proxy of the vector env (its ``_fault`` decides: raise or restart);
    ``plan`` holds each worker's share; ``spin`` how long workers spin (:func:`.protocol.spin_budget`)."""

    def __init__(
        self,
        owner: Any,
        res: Resources,
        commands: Commands,
        factory: EnvFactory,
        start_method: str,
        plan: list[UnitPlan],
        agents_per_env: int,
        spin: Spin,
        autoreset: str,
    ):
        self.owner, self.res, self.commands = owner, res, commands
        self.factory, self.start_method = factory, start_method
        self.plan, self.agents_per_env = plan, agents_per_env
        self.spin, self.autoreset = spin, autoreset
        self.lifeline = res.lifeline[0]  # what workers watch to die with this process (see .start)
        self._pickled: Pickled | None = None  # the factory for workers that are not forked, pickled once
        #: per worker: the start method of its process (a fork env's replacement may differ)
        self.methods = [start_method] * len(plan)

    @property
    def procs(self) -> list:
        return self.res.procs

    def _pickled_factory(self) -> Pickled:
        if self._pickled is None:
            self._pickled = Pickled(self.factory)
        return self._pickled

    def _creator_pickles(self) -> bool:
        try:
            self._pickled_factory().__getstate__()
        except Exception:
            return False
        return True

    def restart_method(self) -> str:
        """The start method of a replacement worker (see :func:`.start.restart_start_method`)."""
        if self.start_method != "fork" or not self.res.memfd:  # no memfd: only a forked child sees the mapping
            return self.start_method
        return restart_start_method("fork", self._creator_pickles())

    def spawn(self, w: int, method: str, restart_seeds: Any = None, reset_after_build: bool = False) -> None:
        """Start worker ``w`` (again) with start method ``method``: its pipes, its process; it
        reports in with the BUILD word."""
        res, fork = self.res, method == "fork"
        cmd_r, cmd_w = os.pipe()
        data_r, data_w = os.pipe()
        os.set_blocking(cmd_w, False)
        res.cmd_w[w], res.data_r[w] = cmd_w, data_r
        self.commands.clean_slate(w)
        ours = [fd for fd in (*res.cmd_w, *res.data_r, self.commands.done_r, *res.memfd) if fd >= 0]
        if self.lifeline.keep_fd is not None:
            ours.append(self.lifeline.keep_fd)  # a pipe lifeline: the owner's end must be the owner's alone

        def handle(fd: int) -> Any:
            return fd if fork else FdHandle(fd)

        first_env, num_envs, rows = self.plan[w]
        spec = WorkerSpec(
            worker=w,
            factory=self.factory if fork else self._pickled_factory(),
            first_env=first_env,
            num_envs=num_envs,
            agents_per_env=self.agents_per_env,
            rows=rows,
            layout=res.layout,
            memory=res.buffer if fork else FdHandle(res.memfd[0]),
            cmd=handle(cmd_r),
            done=handle(self.commands.done_w),
            data=handle(data_w),
            owner_pid=self.lifeline.pid,
            owner=handle(self.lifeline.watch_fd),
            # PDEATHSIG fires when the thread that made the child ends, not the process
            use_pdeathsig=threading.current_thread() is threading.main_thread(),
            close_fds=ours if fork else [],  # fork: the child drops the main process's ends
            spin=self.spin.worker,
            spin_floor=self.spin.floor,
            autoreset=self.autoreset,
            reset_after_build=reset_after_build,
            restart_seeds=restart_seeds,
            temp_dir=res.scratch[0] if res.scratch else None,
        )
        name = f"{WORKER_NAME}{w}"
        proc = worker_context(method).Process(target=worker_main, name=name, args=(spec,), daemon=True)
        try:
            proc.start()
        finally:
            os.close(cmd_r)  # the child holds its ends now
            os.close(data_w)
        res.procs[w] = proc
        self.methods[w] = method
        self.commands.started(w, proc.sentinel)

    def retire(self, w: int) -> None:
        """Kill worker ``w``'s process and release what the main process holds of it."""
        proc, res = self.res.procs[w], self.res
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        self.commands.stopped(w, proc.sentinel)
        proc.close()
        for fds in (res.cmd_w, res.data_r):
            if fds[w] >= 0:
                os.close(fds[w])
                fds[w] = -1

    # ---------------------------------------------------------------- what went wrong
    def reported(self, w: int, report: dict) -> None:
        """Worker ``w``'s env raised (its ``EnvFault`` report)."""
        message = env_fault_message(report, f"Multiprocessing: worker {w} (pid {self.procs[w].pid}): ")
        self.owner._fault(Fault.reported(w, report), message)

    def gone(self, w: int, gone: WorkerGone) -> None:
        """Worker ``w``'s data pipe broke or stalled mid-message."""
        fault = Fault(w, None, self.commands.phase(w), str(gone))
        self.owner._fault(fault, f"Multiprocessing: worker {w} {gone}", cause=gone.cause)

    def died(self, events: list) -> None:
        """Of the ``poll`` events, those of worker sentinels: the worker died; say how, where."""
        commands = self.commands
        for fd, _ in events:
            w = commands.sentinels.get(fd)
            if w is None or self.procs[w].sentinel != fd:  # not a worker's, or replaced already
                continue
            how = how_it_ended(self.procs[w])
            env_index, phase = commands.where(w), commands.phase(w)
            message = f"Multiprocessing: worker {w} (pid {self.procs[w].pid}) {how} {self._doing(w, phase, env_index)}"
            method = self.methods[w]
            if self.procs[w].exitcode == IMPORT_TIME_EXIT:
                script = os.path.basename(getattr(sys.modules["__main__"], "__file__", None) or "the script")
                fault = Fault(w, env_index, phase, how)
                message = f"{guard_hint(script)} (Multiprocessing: {method} worker {w} exited)"
                self.owner._fault(fault, message, due=w in commands.running, cause=IMPORT_TIME_CAUSE)
                continue
            if phase == "construction" and env_index is None and method != "fork":
                message += (
                    f"; a {method} worker imports the main module and unpickles the env creator first (its "
                    "traceback is on stderr): the modules the creator uses must import in a fresh process "
                    "(a lambda or a function of the script itself travels by value), or pass "
                    "vector_kwargs={'start_method': 'fork'}"
                )
            self.owner._fault(Fault(w, env_index, phase, how), message, due=w in commands.running)

    def _doing(self, w: int, phase: str, env_index: int | None) -> str:
        envs = self.commands.envs_of[w]
        if env_index is not None:
            return f"while {'building' if phase == 'construction' else 'stepping'} env {env_index}"
        if phase == "construction":
            which = f"env {envs.start}" if len(envs) == 1 else f"envs {envs.start}–{envs.stop - 1}"
            return f"while starting, before building {which}"
        return f"while idle (it holds envs {envs.start}–{envs.stop - 1})"

    def late(self, doing: str) -> None:
        """A worker is silent past its deadline: kill it, and say so."""
        commands, now = self.commands, time.monotonic()
        late = sorted(w for w in commands.running if now >= commands.sent_at[w] + commands.allowed[w])
        if not late:
            return
        w = late[0]
        env_index = commands.where(w)
        what = f"env {env_index}" if env_index is not None else "its envs"
        others = f" (also late: workers {late[1:]})" if len(late) > 1 else ""
        allowed = commands.allowed[w]
        self.procs[w].kill()  # it is stuck: no grace period for it
        self.owner._fault(
            Fault(w, env_index, commands.phase(w), f"silent for {allowed:g} s"),
            f"Multiprocessing: worker {w} (pid {self.procs[w].pid}) silent for {allowed:g} s while {doing} "
            f"{what}{others}; raise `timeout` (vector_kwargs={{'timeout': …}}) if the env is just slow",
            cause="timeout",
        )

    # ---------------------------------------------------------------- restarts
    def replace(self, fault: Fault, run_seed: int | None) -> None:
        """Replace worker ``fault.worker`` until a replacement builds and resets its envs;
        each failure counts as one more fault (``owner._count_fault``: too many raise)."""
        w, log = fault.worker, self.commands.fault_log
        failure: Fault | None = fault
        while failure is not None:
            self.owner._count_fault(failure, w)
            self.retire(w)
            first_env, num_envs, _ = self.plan[w]
            seeds = restart_seeds(run_seed, first_env, num_envs, log.worker_restarts[w])
            self.spawn(w, self.restart_method(), seeds, reset_after_build=True)
            failure = self.await_rebuild(w)
        fault.restarts = log.worker_restarts.get(w, fault.restarts)

    def await_rebuild(self, w: int) -> Fault | None:
        """Wait for replacement worker ``w`` to build and reset its envs; its fault if it does not."""
        commands = self.commands
        from_w, main_ctl, fence = commands.from_w, commands.main_ctl, commands.fence
        while True:
            if from_w[w * SLOTS + DONE] == BUILD:
                fence.acquire()  # fence: read the status only after the done word
                fence.release()
                del commands.running[w]
                if from_w[w * SLOTS + STATUS] != ERROR:
                    return None
                try:
                    return Fault.reported(w, pickle.loads(commands.read_payload(w)))
                except WorkerGone as gone:
                    return Fault(w, None, "construction", gone.cause)
            proc = self.procs[w]
            if not proc.is_alive():
                return Fault(w, commands.where(w), "construction", how_it_ended(proc))
            left = commands.sent_at[w] + commands.allowed[w] - time.monotonic()
            if left <= 0:
                proc.kill()
                return Fault(w, commands.where(w), "construction", f"silent for {commands.allowed[w]:g} s")
            main_ctl[0] = WAKE_ANY
            fence.acquire()  # fence: the flag is visible before we re-check the done word
            fence.release()
            if from_w[w * SLOTS + DONE] != BUILD:
                commands.poller.poll(max(1, min(int(left * 1000) + 1, 100)))
            main_ctl[0] = 0
            commands.drain_hints()

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self.res.procs if proc is not None]
