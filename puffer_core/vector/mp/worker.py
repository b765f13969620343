"""A worker process: it waits for a command word in shared memory, runs it on its
``EnvGroup`` (the Serial engine) over its rows of the shared mapping, and publishes the
completion (:mod:`.protocol`: words, fences, polite spinning, sleeping on its command pipe).

The main process starts it (:mod:`.processes`) with a ``WorkerSpec``: its rows, the
mapping (or the memfd to map), its pipes, how to spin, and its owner's lifeline
(:mod:`.start`: it dies with the process that owns the vector env). It builds its envs and
reports in with the ``BUILD`` word; from then on it serves one command at a time until it
is told to quit, its command pipe closes, or its envs fault (it reports the fault and waits
to be closed)."""

from __future__ import annotations

import mmap
import os
import pickle
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any

from puffer_core.vector.autoreset import ResetPlan
from puffer_core.vector.calls import CallResult, sendable
from puffer_core.vector.env_group import EnvFault, EnvGroup
from puffer_core.vector.mp.protocol import (
    ARG_LEN,
    BUILD,
    CALL,
    CMD,
    DONE,
    DONE_NS,
    ERROR,
    HAS_MASK,
    HAS_SEEDS,
    HINT,
    INFO_LEN,
    INFO_MAILBOX,
    INFO_PIPE,
    LEN,
    OK,
    PROGRESS,
    RESET,
    RESET_FLAGS,
    SENT_NS,
    SLEEPING,
    STATUS,
    STEP,
    WAKE_ANY,
    spin_budget,
    usual_wait,
    write_all,
)
from puffer_core.vector.mp.shared_memory import ROW_FIELDS, SLOTS, FdHandle, Layout, fd_of, words
from puffer_core.vector.mp.start import die_with_owner
from puffer_core.vector.native_group import NativeGroup, make_group

__all__ = ["Pickled", "Worker", "WorkerSpec", "worker_main"]


class Pickled:
    """cloudpickle for the env factory of workers that are not forked (creators are often
    lambdas); pickled once, however many workers and replacements it goes to."""

    def __init__(self, obj: Any):
        self.obj = obj
        self._state: bytes | None = None

    def __getstate__(self) -> bytes:
        if self._state is None:
            try:
                import cloudpickle

                self._state = cloudpickle.dumps(self.obj)
            except ImportError:  # pragma: no cover - gymnasium depends on cloudpickle
                self._state = pickle.dumps(self.obj)
        return self._state

    def __setstate__(self, state: bytes) -> None:
        self.obj = pickle.loads(state)
        self._state = state


@dataclass
class WorkerSpec:
    """Everything one worker process needs (picklable, for spawned workers)."""

    worker: int
    factory: Any  # the EnvFactory, or a Pickled of it for spawn / forkserver
    first_env: int
    num_envs: int
    agents_per_env: int
    rows: tuple[int, int]
    layout: Layout
    memory: Any  # the mapping itself (fork) or a FdHandle of its memfd
    cmd: Any  # read end of the command-hint pipe
    done: Any  # write end of the shared completion-hint pipe
    data: Any  # write end of this worker's data pipe (large infos, errors)
    owner_pid: int  # the process of the vector env (not the OS parent under forkserver)
    owner: Any  # its lifeline (start.Lifeline.watch_fd; a FdHandle of it when not forked)
    use_pdeathsig: bool  # made from the owner's main thread: PR_SET_PDEATHSIG may watch the owner
    close_fds: list[int]  # fork: inherited ends of other workers' pipes
    spin: float
    spin_floor: float  # the shortest spin before sleeping (the whole ``spin`` when each process has a core)
    autoreset: str
    #: a replacement worker (on_fault="restart") resets its envs right after building them,
    #: with these seeds (``faults.restart_seeds``; None: unseeded), before it reports in
    reset_after_build: bool = False
    restart_seeds: Any = None
    #: this process's temp dir (the vector env's own, removed when it closes); None: the usual
    temp_dir: str | None = None


class Worker:
    """A worker process's side of the protocol: wait for a command word, run it on the
    worker's ``EnvGroup``, publish the completion (see :mod:`.protocol`)."""

    def __init__(self, spec: WorkerSpec):
        self.spec = spec
        self.cmd_fd, self.done_fd, self.data_fd = fd_of(spec.cmd), fd_of(spec.done), fd_of(spec.data)
        if isinstance(spec.memory, (FdHandle, int)):
            memfd = fd_of(spec.memory)
            self.buffer = mmap.mmap(memfd, spec.layout.size)
            os.close(memfd)
        else:
            self.buffer = spec.memory
        arrays = spec.layout.arrays(self.buffer)
        lo, hi = spec.rows
        self.arrays = {name: arrays[name][lo:hi] for name in ROW_FIELDS}
        envs = slice(spec.first_env, spec.first_env + spec.num_envs)
        self.reset_seeds, self.reset_mask = arrays["reset_seeds"][envs], arrays["reset_mask"][envs]
        self.to_me = words(arrays["to_worker"][spec.worker])
        self.from_me = words(arrays["from_worker"][spec.worker])
        self.main_ctl = words(arrays["main"])
        self.done_words = words(arrays["from_worker"])  # every worker's done word: v * SLOTS + DONE
        self.mailbox = memoryview(arrays["mailbox"][spec.worker])
        self.progress = self.from_me[PROGRESS : PROGRESS + 1]
        self.progress[0] = -1
        self.fence = threading.Lock()
        self.group: EnvGroup | NativeGroup | None = None

    def finish(self, word: int, status: int, payload: bytes | None = None) -> None:
        """Publish completion of ``word``; wake the main process only if it sleeps."""
        from_me, fence = self.from_me, self.fence
        from_me[STATUS] = status
        if status == INFO_MAILBOX:
            self.mailbox[: len(payload)] = payload
            from_me[INFO_LEN] = len(payload)
        elif payload is not None:
            from_me[INFO_LEN] = len(payload)
        from_me[DONE_NS] = time.monotonic_ns()  # when it finished, however late the main process looks
        fence.acquire()  # fence: results visible before the done word (weakly ordered CPUs; free on x86)
        fence.release()
        from_me[DONE] = word
        fence.acquire()  # fence: the done word is visible before we look at the flag
        fence.release()
        flag = self.main_ctl[0]  # 0: awake; WAKE_ANY: sleeping; a word: sleeping until all finish it
        if flag == WAKE_ANY or (flag == word and self._all_done(word)):
            try:
                os.write(self.done_fd, HINT)
            except BlockingIOError:  # the pipe is full of hints already
                pass
        if status in (INFO_PIPE, ERROR):  # after the done word: the main process reads while we write
            write_all(self.data_fd, LEN.pack(len(payload)) + payload)

    def _all_done(self, word: int) -> bool:
        done_words = self.done_words
        return all(done_words[v] == word for v in range(DONE, len(done_words), SLOTS))

    def report(self, word: int, result: Any) -> None:
        """Finish ``word`` with a picklable result (infos or call results)."""
        data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        self.finish(word, INFO_MAILBOX if len(data) <= len(self.mailbox) else INFO_PIPE, data)

    def report_fault(self, word: int, fault: EnvFault) -> None:
        self.finish(word, ERROR, pickle.dumps(fault.to_dict(), protocol=pickle.HIGHEST_PROTOCOL))

    def request(self) -> Any:
        """The main process's pickled argument in the mailbox (reset options, a call), or None."""
        n = self.to_me[ARG_LEN]
        return pickle.loads(self.mailbox[:n]) if n else None

    def build(self) -> None:
        spec = self.spec
        try:
            self.group = make_group(
                spec.factory,
                spec.num_envs,
                spec.agents_per_env,
                self.arrays,
                first_env=spec.first_env,
                progress=self.progress,
                autoreset=spec.autoreset,
            )
            if spec.reset_after_build:
                self.group.reset(ResetPlan(spec.restart_seeds, None, None))
        except BaseException as exc:  # reported, never swallowed; the main process closes us
            if self.group is not None:
                self.group.close()
                self.group = None
            fault = exc if isinstance(exc, EnvFault) else EnvFault(spec.first_env, "construction", exc)
            self.report_fault(BUILD, fault)
        else:
            self.finish(BUILD, OK)

    def run(self) -> None:
        """Serve commands until told to quit, the command pipe closes, or an env faults."""
        self.build()
        to_me, from_me, fence, cmd_fd = self.to_me, self.from_me, self.fence, self.cmd_fd
        read, now, yield_ = os.read, time.monotonic, os.sched_yield
        spin, floor = self.spec.spin, self.spec.spin_floor
        last = 0  # the command word as the main process left it (nothing sent yet)
        started, idle = now(), 0.0
        while True:
            # Wait for the next command word: spin politely, then sleep on the pipe.
            word = to_me[CMD]
            # Adaptive: spin about as long as the main process usually takes to answer; not
            # at all when it thinks for long (a trainer's forward pass gets sleeping workers).
            if word == last:
                end = started + spin_budget(spin, floor, idle)
                while word == last and now() < end:
                    yield_()
                    word = to_me[CMD]
            while word == last:
                from_me[SLEEPING] = 1
                fence.acquire()  # fence: the flag is visible before we re-check the word
                fence.release()
                word = to_me[CMD]
                if word != last:
                    break
                if not read(cmd_fd, 64):  # EOF: the main process closed us or died
                    return
                word = to_me[CMD]
            from_me[SLEEPING] = 0
            fence.acquire()  # fence: read the actions / arguments only after the word that published them
            fence.release()
            # How long the main process took to answer, from its stamp: our own wake-up latency
            # must not count, or one slow wake-up makes us sleep, and sleeping makes wake-ups
            # slow, for good (a stale stamp on a weakly ordered CPU only skews one sample).
            idle = usual_wait(idle, max(0.0, to_me[SENT_NS] * 1e-9 - started))
            last = word
            if not self.execute(word):
                return
            started = now()

    def execute(self, word: int) -> bool:
        """Run one command; False when the worker should stop (quit, or its envs faulted)."""
        op, group = word & 0xFF, self.group
        if group is None:  # after a fault the main process only ever closes us
            return False
        try:
            if op == STEP:
                infos = group.step()
            elif op == RESET:
                infos = group.reset(self.reset_plan())
            elif op == CALL:
                self.report(word, self.call())
                return True
            else:  # QUIT
                return False
        except EnvFault as fault:
            self.report_fault(word, fault)
            self.group = None
            group.close()
            return True  # stay until the main process, which reads the fault, closes us
        if infos:
            self.report(word, infos)
        else:
            self.finish(word, OK)
        return True

    def reset_plan(self) -> ResetPlan:
        flags = self.to_me[RESET_FLAGS]
        return ResetPlan(
            self.reset_seeds.copy() if flags & HAS_SEEDS else None,
            self.reset_mask.copy() if flags & HAS_MASK else None,
            self.request(),
        )

    def call(self) -> list[CallResult]:
        indices, request = self.request()
        return sendable(self.group.call(indices, request))


def worker_main(spec: WorkerSpec) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    die_with_owner(spec.owner_pid, fd_of(spec.owner), spec.use_pdeathsig)
    for fd in spec.close_fds:  # fork: drop inherited ends of other workers' pipes (EOF must work)
        try:
            os.close(fd)
        except OSError:
            pass
    if spec.temp_dir is not None:  # before any env is built: files a SIGKILL leaves behind go with the vector env
        os.environ["TMPDIR"] = tempfile.tempdir = spec.temp_dir
    if isinstance(spec.factory, Pickled):
        spec.factory = spec.factory.obj
    worker = None
    try:
        worker = Worker(spec)
        worker.run()
    except BrokenPipeError:
        pass
    finally:
        if worker is not None and worker.group is not None:
            worker.group.close()
        os._exit(0)  # skip atexit handlers and finalizers inherited from the parent
