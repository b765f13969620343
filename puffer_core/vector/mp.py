"""Multiprocessing: envs in worker processes writing straight into shared memory.

Memory
    One anonymous shared mapping (``memfd_create`` + ``mmap``; nothing in ``/dev/shm``, so
    nothing can leak there even if every process is SIGKILLed; forked workers inherit it, the
    others map the fd they are handed) holds the observations,
    rewards, terminals, truncations, masks and actions of every agent row, plus a small
    control block per worker (status word, the index of the env it is stepping, an info
    mailbox). Each worker runs an ``EnvGroup`` (the Serial engine) whose emulators write
    their observations into their rows in place.

Synchronisation (a short polite spin, then block)
    Commands and completions are words in shared memory: the main process writes
    ``seq << 8 | op`` into a worker's command word, the worker copies it into its done
    word when finished. A waiting side raises its "sleeping" flag, re-checks the word and
    sleeps in ``read`` / ``poll`` on a pipe; the other side writes one byte to that pipe
    only when the flag is up. So a wake-up system call (about 15 µs of the waker's CPU in
    this VM, where it costs an inter-processor interrupt) is paid only when someone really
    sleeps. A lock acquire/release between the flag and the re-check (and between the
    word and the flag check) is the memory fence that makes this free of lost wake-ups;
    pipe bytes are only hints, the words are the truth (``lost_wakeups`` counts any
    completion noticed only by the timeout: the tests require 0).
    * When the main process waits for every worker on one command, only the last worker
      to finish wakes it (each checks all done words after its fence), not each of them.
    * The main process blocks in ``poll`` on its wake-up pipe together with every
      worker's process sentinel, with a deadline: a dead worker or one silent past
      ``timeout`` seconds is noticed at once, never waited on forever.
    * ``batch_size < num_envs`` returns whichever workers finished first (EnvPool-style),
      oldest command first among those.
    * Spinning (``spin_us``, default 100 µs): before sleeping, a side polls its word,
      calling ``sched_yield()`` between looks; not at all when its waits usually run
      longer than twice ``spin_us``. When every process has a core of its own (workers +
      the main process ≤ cpus) it spins the whole ``spin_us``: a sleep costs a wake-up
      (a round trip through a pipe takes about 100 µs in this VM), a spin costs nobody.
      When they share cores, it spins for about 1.5× its usual wait. Workers spin only
      when ``num_workers <= cpus``; the main process always may, since at each look it
      hands its core to whichever worker shares it. The yield matters: a spin without it
      that shares a core with the process it waits for holds that core for its whole
      budget. Spinning workers on a core with another of ours slow synchronous batches,
      so with more workers than cores they sleep at once; ``spin_us=0`` turns all
      spinning off. (The measurements behind these choices: README, "Vectorization".)
    * A usual wait is timed by the other side's clock: the main process stamps each
      command with when it sent it, a worker stamps each completion with when it
      finished. Timed by when the waiter got to run, one slow wake-up would count as a
      slow partner: the waiter would stop spinning, and every wake-up after it be slow.

Infos
    Only non-empty info lists travel: pickled into the worker's mailbox in shared memory
    (or, when larger than the mailbox, over the worker's data pipe after the completion
    byte). Env errors travel the same way, with the traceback text.

The main share (``main_share=True``, or a number of envs)
    The main process steps one more unit of envs itself: no process of its own, no
    control block. With full batches it steps them in ``send``, right after it has
    signalled the workers, and its unit completes before ``send`` returns. With async
    batches (``batch_size < num_envs``) ``send`` only queues them, and ``recv`` steps them
    one env at a time while it waits, looking at the workers between envs: a worker that
    finishes is served at once instead of after the whole share (envs whose step time
    varies, like NetHack's, would otherwise leave the worker idle for most of it).
    ``main_share=k`` gives it k envs and the workers the rest (full batches only): it also
    receives, sends and runs the caller's code, so a lighter share can keep the workers
    from waiting for it.

One-unit batches
    When ``batch_size`` is one unit's envs (1 worker + the main share with half the envs per
    batch, or k workers with 1/k of them), ``recv`` and ``send`` take a short path: the same
    checks and the same order (oldest command first), with each unit's row views made once
    and the call-order checks run only when something is off. On few cores this code is on
    the workers' critical path.

Faults
    An env that raises, a worker that dies, or one silent past ``timeout``: under
    ``on_fault="raise"`` the vector env closes itself and ``WorkerError`` names the worker,
    the env index and the cause; under ``on_fault="restart"`` the worker is replaced
    (:mod:`puffer_core.vector.faults`): its pipes and process are made anew, it rebuilds
    and resets its envs before it reports in, and the main process waits for just that one
    while the others go on. A dead worker that is never waited on (the others fill every
    async batch) is noticed from its sentinel once its command runs late. Workers die with
    the process that owns the vector env, whatever the start method (``PR_SET_PDEATHSIG``
    where it is their OS parent, else a watcher thread on its pidfd: :mod:`.mp_start`; and
    EOF on their command pipe everywhere). ``close()`` is idempotent and also runs from a
    ``weakref.finalize`` (at garbage collection or interpreter exit, Ctrl-C included). The
    workers' temp dir (``TMPDIR`` and :mod:`tempfile`'s) is a folder of the vector env's own,
    shared by its workers and removed when it closes: what a killed worker's envs could not
    remove (each NetHack game keeps a folder there) goes with it, however many restarts a run
    had.
"""

from __future__ import annotations

import mmap
import os
import pickle
import select
import shutil
import signal
import sys
import tempfile
import threading
import time
import weakref
from collections import deque
from typing import Any

import numpy as np

from puffer_core.env_factory import EnvFactory
from puffer_core.errors import APIUsageError, EnvCallError, WorkerError
from puffer_core.vector.autoreset import DISABLED, NEXT_STEP, ResetPlan, check_seed
from puffer_core.vector.base import VectorEnv
from puffer_core.vector.calls import CallResult, EnvCall, describe, per_worker, sendable
from puffer_core.vector.checks import available_cpus, check_counts, check_timeout, split_envs
from puffer_core.vector.env_group import EnvFault, EnvGroup, env_fault_message
from puffer_core.vector.faults import (
    DEFAULT_MAX_RESTARTS,
    Fault,
    FaultLog,
    check_max_restarts,
    check_on_fault,
    fault_info,
    restart_seeds,
)
from puffer_core.vector.mp_start import (
    Lifeline,
    check_not_bootstrapping,
    resolve_start_method,
    restart_start_method,
    worker_context,
)
from puffer_core.vector.mp_worker import (
    ARG_LEN,
    BUILD,
    CALL,
    CMD,
    DEFAULT_SPIN_US,
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
    MIN_SPIN,
    PROGRESS,
    QUIT,
    RESET,
    RESET_FLAGS,
    SENT_NS,
    SLEEPING,
    STATUS,
    STEP,
    WAKE_ANY,
    Pickled,
    WorkerSpec,
    worker_main,
)
from puffer_core.vector.shared_memory import ROW_FIELDS, SLOTS, FdHandle, Layout, words

__all__ = ["DEFAULT_SPIN_US", "Multiprocessing"]


#: a command running longer than this while other workers fill the batches gets its worker's
#: sentinel checked (a dead worker would otherwise go unnoticed until everyone else waits)
_LATE = 0.005
#: Seconds ``close`` waits for workers when env 0 records (see ``__init__``).
RECORDING_CLOSE_GRACE = 60.0


def _wants_main_share(main_share: Any, num_envs: Any, num_workers: Any, cpus: int) -> bool:
    """Whether the main process steps a share of the envs itself (see the class docstring)."""
    if _is_count(main_share):
        return True  # _main_counts checks the count against the envs and workers
    if main_share not in (False, True, "auto"):
        raise APIUsageError(f"main_share must be True, False, 'auto' or a number of envs (int ≥ 1), got {main_share!r}")
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


def _plan_units(
    num_envs: Any, num_workers: Any, batch_size: Any, main_share: Any, cpus: int
) -> tuple[int, int, int, int, list[int]]:
    """(envs, worker processes, units, batch, envs per unit): the main share, if any, is the
    last unit, after the workers (default: one fewer worker than cores then)."""
    if not _wants_main_share(main_share, num_envs, num_workers, cpus):
        envs, workers, batch, counts = check_counts(num_envs, num_workers, batch_size, "multiprocessing")
        return envs, workers, workers, batch, counts
    workers = num_workers if num_workers is not None else max(1, min(num_envs, cpus) - 1)
    envs, units, batch, counts = check_counts(num_envs, workers + 1, batch_size, "multiprocessing")
    if _is_count(main_share):
        counts = _main_counts(main_share, envs, units - 1, batch)
    return envs, units - 1, units, batch, counts


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _main_counts(main_envs: int, envs: int, workers: int, batch: int) -> list[int]:
    """Env counts per unit when the main process steps ``main_envs`` of ``envs`` itself and the
    workers share the rest (full batches only: smaller ones need units of one size)."""
    if not 1 <= main_envs <= envs - workers:
        raise APIUsageError(
            f"main_share={main_envs} envs for the main process leaves {envs - main_envs} for {workers} "
            f"worker(s); give 1 to {envs - workers}, or True for an even share"
        )
    if batch != envs:
        raise APIUsageError(
            f"main_share={main_envs} (an uneven share) needs full batches (batch_size={envs}); "
            f"with batch_size={batch} use main_share=True"
        )
    return [*split_envs(envs - main_envs, workers), main_envs]


class _WorkerGone(Exception):
    """A worker's data pipe broke or stalled mid-message; ``cause`` is "died" or "timeout"."""

    def __init__(self, message: str, cause: str):
        super().__init__(message)
        self.cause = cause


def _how_it_ended(proc: Any) -> str:
    proc.join(0.5)
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def _cleanup(
    procs: list, fds: list, buffer: Any, layout: Any, memfd_box: list, scratch: list, lifeline: list, grace: float
) -> None:
    """Stop workers and release every resource. Safe to call more than once."""
    procs[:] = [proc for proc in procs if proc is not None]  # a start that failed half-way leaves gaps
    if buffer is not None and not buffer.closed and procs:
        try:
            words = layout.arrays(buffer)["to_worker"]
            words[:, CMD] = (1 << 62) | QUIT
            del words
        except (ValueError, TypeError):
            pass
    for fd in fds[0]:  # command pipes: wake sleepers (then EOF below)
        try:
            os.write(fd, HINT)
        except OSError:
            pass
    for group in fds:
        for fd in group:
            try:
                os.close(fd)
            except OSError:
                pass
        group.clear()
    deadline = time.monotonic() + grace
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
    if scratch:  # the workers' temp dir, with whatever a killed worker could not remove
        shutil.rmtree(scratch.pop(), ignore_errors=True)
    if memfd_box:
        try:
            os.close(memfd_box.pop())
        except OSError:
            pass
    if lifeline:  # only now: a pipe lifeline's EOF would end workers still closing their envs
        lifeline.pop().close()
    if buffer is not None:
        try:
            buffer.close()
        except BufferError:  # views still held by the user; the mapping dies with them
            pass


class Multiprocessing(VectorEnv):
    """``num_envs`` envs over ``num_workers`` processes; see the module docstring.

    Parameters beyond ``make``'s: ``timeout`` (seconds a worker may stay silent on one
    command, default 60; env construction gets ``max(timeout, startup_timeout)``),
    ``start_method`` ("fork", "forkserver" or "spawn"; all three pass the same tests),
    ``info_buffer_bytes`` (per-worker mailbox for infos and call arguments, default 256 KiB) and ``spin_us``
    (the longest a waiting side polls before it sleeps: the main process always, workers
    only when each has a core; default ``DEFAULT_SPIN_US``; 0 never spins).

    The default start method is safe to use from a process that runs threads (torch, Ray, a
    notebook kernel): "forkserver" when this process has other threads (counted by the OS:
    native ones too) or on Python 3.14+, "fork" when it has none, "spawn" off Linux; the
    method chosen is the ``start_method`` attribute. Forking a process with threads may
    deadlock the child, which Python 3.12+ warns about. "forkserver" and "spawn" workers
    unpickle the env creator (cloudpickle) and import the main module, so a script keeps its
    code under ``if __name__ == "__main__":``. A restarted worker (``on_fault="restart"``)
    starts the way the vector env did, except that a "fork" env's replacement comes from the
    fork server once the process has threads. Details: :mod:`puffer_core.vector.mp_start`.
    """

    backend = "multiprocessing"

    def __init__(
        self,
        env: Any,
        num_envs: int = 1,
        num_workers: int | None = None,
        batch_size: int | None = None,
        seed: int | None = None,
        env_kwargs: dict | None = None,
        timeout: float = 60.0,
        startup_timeout: float = 120.0,
        start_method: str | None = None,
        info_buffer_bytes: int = 256 * 1024,
        spin_us: float | None = None,
        autoreset: str = NEXT_STEP,
        on_fault: str = "raise",
        max_restarts: int = DEFAULT_MAX_RESTARTS,
        main_share: Any = False,
    ):
        self._closed = True  # until fully started; close() is then a no-op
        check_not_bootstrapping()
        factory = env if isinstance(env, EnvFactory) else EnvFactory(env, env_kwargs)
        cpus = available_cpus()
        envs, workers, units, batch, counts = _plan_units(num_envs, num_workers, batch_size, main_share, cpus)
        self._procs_n, self._units = workers, units
        #: the unit the main process steps itself (``main_share``), after the workers; None: none
        self._main_unit: int | None = workers if units > workers else None
        self._main_group: EnvGroup | None = None
        self._main_argument: Any = None
        self._main_reset_flags = 0
        self._init_autoreset(autoreset, batch, envs)
        self._on_fault = check_on_fault(on_fault, "multiprocessing")
        self._fault_log = FaultLog(check_max_restarts(max_restarts))
        self._pending_faults: dict[int, Fault] = {}
        self._started = False
        self.timeout = check_timeout(timeout)
        self._seed = check_seed(seed)
        self._startup_timeout = float(startup_timeout)
        spin = max(0.0, float(DEFAULT_SPIN_US if spin_us is None else spin_us)) / 1e6
        # Workers spin only when each can have a core; the main process's spin yields at
        # every look, so it costs a worker sharing its core no more than a context switch.
        self._spin = spin
        self._worker_spin = spin if workers <= cpus else 0.0
        # When every process has a core of its own, a spin costs nobody anything and sleeping
        # costs both sides a wake-up, so each spins its whole budget; when they share, a
        # spin lasts about as long as waits usually do (see the module docstring).
        self._spin_floor = spin if workers + 1 <= cpus else min(spin, MIN_SPIN)

        #: how the workers were started: "fork", "forkserver" or "spawn" (see :mod:`.mp_start`)
        self.start_method = resolve_start_method(start_method)

        self._init_workers(factory, envs, units, batch, counts)
        #: async batches of one unit each (``batch_size`` = one worker's envs): recv/send take
        #: their short path (see ``_recv_unit``)
        self._unit_batches = self._workers_per_batch == 1 < units
        self.num_workers = workers  # processes; the main share is one more unit of ``counts``
        self._allocate(envs, workers, info_buffer_bytes, recording=factory.recording is not None)
        self._closed = False
        self._state = "new"
        try:
            self._start(factory)
        except BaseException:
            self.close()
            raise

    # ---------------------------------------------------------------- start-up
    def _allocate(self, envs: int, workers: int, info_buffer_bytes: int, recording: bool) -> None:
        """The shared memory and pipe slots, all owned by the finalizer from here on."""
        obs_space = self.single_observation_space
        layout = Layout(  # control blocks and mailboxes for the worker processes only
            self.num_envs,
            envs,
            workers,
            obs_space.shape,
            obs_space.dtype,
            self._action_shape,
            self._action_dtype,
            info_buffer_bytes,
        )
        self._layout = layout
        self._procs: list = [None] * workers
        self._cmd_w: list[int] = [-1] * workers  # main's end of each worker's command-hint pipe
        self._data_r: list[int] = [-1] * workers  # main's end of each worker's data pipe
        self._shared_fds: list[int] = []  # the completion-hint pipe (both ends: replacements need it)
        self._fd_groups = [self._cmd_w, self._data_r, self._shared_fds]
        self._memfd_box: list[int] = []
        self._scratch: list[str] = []  # the workers' temp dir (see "Faults" in the module docstring)
        self._lifeline_box: list[Lifeline] = []
        self._buffer = self._map_memory(layout.size)
        # Workers get a second to close their envs, or a minute when env 0 records (its
        # worker writes the video's end, a GIF all of it, as env 0 closes).
        grace = RECORDING_CLOSE_GRACE if recording else 1.0
        self._finalizer = weakref.finalize(
            self,
            _cleanup,
            self._procs,
            self._fd_groups,
            self._buffer,
            layout,
            self._memfd_box,
            self._scratch,
            self._lifeline_box,
            grace,
        )
        self._lifeline = Lifeline()  # what workers watch to die with this process (see mp_start)
        self._lifeline_box.append(self._lifeline)
        try:
            self._scratch.append(tempfile.mkdtemp(prefix="puffer-vector-"))
        except OSError:  # no writable temp dir: the workers use the usual one (and envs may fail there too)
            pass

    def _map_memory(self, size: int) -> mmap.mmap:
        """A memfd mapping (never in /dev/shm; forked workers inherit the mapping, the others map
        the fd), whatever the start method: a fork env's replacement may come from the fork
        server. Without memfd (not Linux) an anonymous mapping, which only forked workers see."""
        if hasattr(os, "memfd_create"):
            memfd = os.memfd_create("puffer-vector", os.MFD_CLOEXEC)
            self._memfd_box.append(memfd)
            os.ftruncate(memfd, size)
            # Python 3.13+: no dup of the fd inside the mmap, which views left alive after close
            # (a traceback's) would keep open; before, it goes when they do.
            return mmap.mmap(memfd, size, **({"trackfd": False} if sys.version_info >= (3, 13) else {}))
        if self.start_method == "fork":  # pragma: no cover - not Linux
            return mmap.mmap(-1, size, flags=mmap.MAP_SHARED)
        raise APIUsageError(  # pragma: no cover - not Linux
            f"start_method {self.start_method!r} needs os.memfd_create (Linux); use 'fork'"
        )

    def _map_arrays(self) -> None:
        self._arrays = arrays = self._layout.arrays(self._buffer)
        self._obs, self._rew = arrays["observations"], arrays["rewards"]
        self._term, self._trunc = arrays["terminals"], arrays["truncations"]
        self._masks, self._actions = arrays["masks"], arrays["actions"]
        self._mailbox = arrays["mailbox"]
        self._reset_seeds, self._reset_mask = arrays["reset_seeds"], arrays["reset_mask"]
        self._to_w = words(arrays["to_worker"])  # worker w's slot k: w * SLOTS + k
        self._from_w = words(arrays["from_worker"])
        self._main_ctl = words(arrays["main"])
        #: per unit: (observations, rewards, terminals, truncations, env ids, masks, actions),
        #: its rows' views, made once for the one-unit path
        self._unit_views = []
        for w in range(self._units):
            rows, ids = self._batch_rows([w])
            views = (arrays[name][rows] for name in ("observations", "rewards", "terminals", "truncations"))
            self._unit_views.append((*views, ids, arrays["masks"][rows], arrays["actions"][rows]))

    def _init_state(self, workers: int) -> None:
        self._expected = [BUILD] * workers  # the command word each worker is working on
        self._sent_at = [time.monotonic()] * workers
        self._allowed = [max(self.timeout, self._startup_timeout)] * workers  # seconds the command may take
        self._running: dict[int, None] = {}  # in order of sending
        self._ready: deque[int] = deque()
        self._infos: list[list] = [[] for _ in range(workers)]
        self._call_results: dict[int, Any] = {}
        self._held: list[int] | None = None
        self._seq = 0
        self._expected_wait = 0.0
        self._last_done_ns = 0  # the latest completion stamp read from a worker (DONE_NS)
        self._uniform_word = BUILD
        #: async batches: the next env of the main share still to step (None: nothing pending)
        self._main_pending: int | None = None
        #: completions noticed only when ``timeout`` ran out (a lost wake-up); always 0
        self.lost_wakeups = 0
        self._fence = threading.Lock()
        self._sentinels: dict[int, int] = {}
        self._poller = select.poll()

    def _start(self, factory: Any) -> None:
        self._map_arrays()
        self._init_state(self._units)
        done_r, done_w = os.pipe()
        self._shared_fds += [done_r, done_w]
        os.set_blocking(done_r, False)
        os.set_blocking(done_w, False)  # hints only: a full pipe just drops them
        self._done_r, self._done_w = done_r, done_w
        self._poller.register(done_r, select.POLLIN)
        self._factory = factory
        self._pickled: Pickled | None = None  # the factory for workers that are not forked, pickled once
        #: per worker: the start method of its process (a fork env's replacement may differ)
        self._methods = [self.start_method] * self._procs_n
        for w in range(self._procs_n):
            self._spawn(w, self.start_method)
        if self._main_unit is not None:  # built while the workers build theirs
            self._main_group = self._build_main_group(None)
        self._wait(self._procs_n, "building")
        self._ready.clear()
        self._infos = [[] for _ in range(self._units)]
        self._started = True  # from now on a fault may restart a worker

    def _pickled_factory(self) -> Pickled:
        if self._pickled is None:
            self._pickled = Pickled(self._factory)
        return self._pickled

    def _creator_pickles(self) -> bool:
        try:
            self._pickled_factory().__getstate__()
        except Exception:
            return False
        return True

    def _restart_method(self) -> str:
        """The start method of a replacement worker (see :func:`.mp_start.restart_start_method`)."""
        if self.start_method != "fork" or not self._memfd_box:  # no memfd: only a forked child sees the mapping
            return self.start_method
        return restart_start_method("fork", self._creator_pickles())

    def _spawn(self, w: int, method: str, restart_seeds: Any = None, reset_after_build: bool = False) -> None:
        """Start worker ``w`` (again) with start method ``method``: its pipes, its process; it
        reports in with the BUILD word."""
        fork = method == "fork"
        cmd_r, cmd_w = os.pipe()
        data_r, data_w = os.pipe()
        os.set_blocking(cmd_w, False)
        self._cmd_w[w], self._data_r[w] = cmd_w, data_r
        for slot in (CMD, RESET_FLAGS, ARG_LEN):  # a replacement must not replay its predecessor's command
            self._to_w[w * SLOTS + slot] = 0
        self._from_w[w * SLOTS + DONE] = 0
        self._from_w[w * SLOTS + PROGRESS] = -1  # no env yet (a worker that dies unpickling names none)
        lifeline = self._lifeline
        ours = [fd for fd in (*self._cmd_w, *self._data_r, self._done_r, *self._memfd_box) if fd >= 0]
        if lifeline.keep_fd is not None:
            ours.append(lifeline.keep_fd)  # a pipe lifeline: the owner's end must be the owner's alone

        def handle(fd: int) -> Any:
            return fd if fork else FdHandle(fd)

        spec = WorkerSpec(
            worker=w,
            factory=self._factory if fork else self._pickled_factory(),
            first_env=self._first_env[w],
            num_envs=self._env_counts[w],
            agents_per_env=self.agents_per_env,
            rows=self._row_bounds[w],
            layout=self._layout,
            memory=self._buffer if fork else FdHandle(self._memfd_box[0]),
            cmd=handle(cmd_r),
            done=handle(self._done_w),
            data=handle(data_w),
            owner_pid=lifeline.pid,
            owner=handle(lifeline.watch_fd),
            # PDEATHSIG fires when the thread that made the child ends, not the process
            use_pdeathsig=threading.current_thread() is threading.main_thread(),
            close_fds=ours if fork else [],  # fork: the child drops the main process's ends
            spin=self._worker_spin,
            spin_floor=self._spin_floor,
            autoreset=self.autoreset_mode,
            reset_after_build=reset_after_build,
            restart_seeds=restart_seeds,
            temp_dir=self._scratch[0] if self._scratch else None,
        )
        name = f"puffer-vector-worker-{w}"
        proc = worker_context(method).Process(target=worker_main, name=name, args=(spec,), daemon=True)
        try:
            proc.start()
        finally:
            os.close(cmd_r)  # the child holds its ends now
            os.close(data_w)
        self._procs[w] = proc
        self._methods[w] = method
        self._sentinels[proc.sentinel] = w
        self._poller.register(proc.sentinel, select.POLLIN)
        self._expected[w] = BUILD
        self._sent_at[w] = time.monotonic()
        self._allowed[w] = max(self.timeout, self._startup_timeout)
        self._running[w] = None

    # ---------------------------------------------------------------- waiting
    def _scan(self) -> None:
        """Move every running worker whose done word matches its command to ``_ready``."""
        from_w, expected, finished = self._from_w, self._expected, None
        for w in self._running:  # a loop, not a comprehension: this runs between the main share's envs
            if from_w[w * SLOTS + DONE] == expected[w]:
                finished = [w] if finished is None else [*finished, w]
        if finished is None:
            return
        self._fence.acquire()  # fence: read results only after the done words (weak CPUs)
        self._fence.release()
        for w in finished:
            del self._running[w]
            self._complete(w)

    def _wait(self, needed: int, doing: str = "stepping") -> None:
        """Until ``needed`` workers are ready: spin politely for ``spin_us``, then sleep."""
        self._scan()
        if len(self._ready) >= needed:
            return
        now = time.monotonic
        start = now()
        # Adaptive: spin about as long as workers usually take; not at all when they take
        # much longer than ``spin_us`` (heavy envs leave the cores to the workers).
        expected = self._expected_wait
        if self._spin and expected <= 2 * self._spin:
            scan, ready, yield_ = self._scan, self._ready, os.sched_yield
            end = start + min(self._spin, max(self._spin_floor, 1.5 * expected))
            while now() < end:
                yield_()
                scan()
                if len(ready) >= needed:
                    self._expected_wait = 0.7 * expected + 0.3 * (now() - start)
                    return
        self._block(needed, doing)
        # The wait lasted until the last worker's stamp, not until we woke: counting our own
        # wake-up latency would make one slow wake-up a habit of sleeping (see the worker).
        waited = min(now(), self._last_done_ns * 1e-9) - start
        self._expected_wait = 0.7 * expected + 0.3 * max(0.0, waited)

    def _block(self, needed: int, doing: str) -> None:
        main_ctl, acquire, release = self._main_ctl, self._fence.acquire, self._fence.release
        while len(self._ready) < needed:
            if not self._running:  # pragma: no cover - guarded by the state checks
                raise APIUsageError("recv() with no batch in flight; call send() first")
            running = self._running
            left = min(self._sent_at[w] + self._allowed[w] for w in running) - time.monotonic()
            if left <= 0:
                self._timeout(doing)
                continue
            # Waiting for every worker on one command word: only the last to finish wakes us
            # (workers store their done word, fence, then check all of them: at least one
            # of two simultaneous finishers sees the other's word). Otherwise anyone does.
            every = needed - len(self._ready) == len(running) == self._procs_n and self._uniform_word >= 0
            main_ctl[0] = self._uniform_word if every else WAKE_ANY
            acquire()  # fence: the flag is visible before we re-check the done words
            release()
            self._scan()
            if len(self._ready) >= needed:
                main_ctl[0] = 0
                return
            events = self._poller.poll(max(1, int(left * 1000) + 1))
            main_ctl[0] = 0
            self._drain_hints()
            before = len(self._ready)
            self._scan()
            if not events and len(self._ready) > before:
                self.lost_wakeups += 1  # finished without waking us: a protocol bug, counted
            if any(fd != self._done_r for fd, _ in events):
                self._check_deaths(events)

    def _drain_hints(self) -> None:
        try:
            while len(os.read(self._done_r, 4096)) == 4096:
                pass
        except BlockingIOError:
            pass

    def _complete(self, w: int) -> None:
        """Collect worker ``w``'s finished command: its infos or call results, or its fault."""
        base = w * SLOTS
        status = self._from_w[base + STATUS]
        self._last_done_ns = max(self._last_done_ns, self._from_w[base + DONE_NS])
        try:
            if status == ERROR:
                report = pickle.loads(self._read_payload(w))
                self._fault(Fault.reported(w, report), self._error_message(w, report))
                return  # a restart made w ready again (or raised)
            if status in (INFO_MAILBOX, INFO_PIPE):
                if status == INFO_MAILBOX:
                    result = pickle.loads(self._mailbox[w, : self._from_w[base + INFO_LEN]])
                else:
                    result = pickle.loads(self._read_payload(w))
                if self._expected[w] & 0xFF == CALL:
                    self._call_results[w] = result
                else:
                    self._infos[w].extend(result)
        except _WorkerGone as gone:
            message = f"Multiprocessing: worker {w} {gone}"
            self._fault(Fault(w, None, self._phase(w), str(gone)), message, cause=gone.cause)
            return
        if self._expected[w] & 0xFF == STEP:
            self._fault_log.stepped(self._envs_of(w))
        pending = self._pending_faults.pop(w, None)
        if pending is not None:
            self._mark_faulted(w, pending)
        self._ready.append(w)

    def _read_payload(self, w: int) -> bytes:
        fd = self._data_r[w]
        header = self._read_exact(fd, LEN.size)
        return self._read_exact(fd, LEN.unpack(header)[0])

    def _read_exact(self, fd: int, n: int) -> bytes:
        chunks, got = [], 0
        deadline = time.monotonic() + self.timeout
        while got < n:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise _WorkerGone(f"stopped mid-message (no data for {self.timeout:g} s)", "timeout")
            chunk = os.read(fd, n - got)
            if not chunk:
                raise _WorkerGone("died while sending its results", "died")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    # ---------------------------------------------------------------- faults
    def _where(self, w: int) -> int | None:
        env = self._from_w[w * SLOTS + PROGRESS]
        return self._first_env[w] + env if env >= 0 else None

    def _phase(self, w: int) -> str:
        if w not in self._running:
            return "idle"
        return {BUILD: "construction", STEP: "step", RESET: "reset", CALL: "call"}.get(self._expected[w] & 0xFF, "")

    def _error_message(self, w: int, report: dict) -> str:
        return env_fault_message(report, f"Multiprocessing: worker {w} (pid {self._procs[w].pid}): ")

    def _check_deaths(self, events: list) -> None:
        for fd, _ in events:
            w = self._sentinels.get(fd)
            if w is None or self._procs[w].sentinel != fd:  # not a worker's, or replaced already
                continue
            how = _how_it_ended(self._procs[w])
            env_index = self._where(w)
            envs = self._envs_of(w)
            phase = self._phase(w)
            if env_index is not None:
                where = f"while {'building' if phase == 'construction' else 'stepping'} env {env_index}"
            elif phase == "construction":
                which = f"env {envs.start}" if len(envs) == 1 else f"envs {envs.start}–{envs.stop - 1}"
                where = f"while starting, before building {which}"
            else:
                where = f"while idle (it holds envs {envs.start}–{envs.stop - 1})"
            message = f"Multiprocessing: worker {w} (pid {self._procs[w].pid}) {how} {where}"
            method = self._methods[w]
            if phase == "construction" and env_index is None and method != "fork":
                message += (
                    f"; a {method} worker imports the main module and unpickles the env creator first (its "
                    "traceback is on stderr): keep a script's code under `if __name__ == '__main__':` and the "
                    "creator importable, or pass vector_kwargs={'start_method': 'fork'}"
                )
            self._fault(Fault(w, env_index, phase, how), message, due=w in self._running)

    def _timeout(self, doing: str) -> None:
        now = time.monotonic()
        late = sorted(w for w in self._running if now >= self._sent_at[w] + self._allowed[w])
        if not late:
            return
        w = late[0]
        env_index = self._where(w)
        what = f"env {env_index}" if env_index is not None else "its envs"
        others = f" (also late: workers {late[1:]})" if len(late) > 1 else ""
        allowed = self._allowed[w]
        self._procs[w].kill()  # it is stuck: no grace period for it
        self._fault(
            Fault(w, env_index, self._phase(w), f"silent for {allowed:g} s"),
            f"Multiprocessing: worker {w} (pid {self._procs[w].pid}) silent for {allowed:g} s while {doing} "
            f"{what}{others}; raise `timeout` (vector_kwargs={{'timeout': …}}) if the env is just slow",
            cause="timeout",
        )

    def _fault(self, fault: Fault, message: str, due: bool = True, cause: str | None = None) -> None:
        """``on_fault="raise"`` (and any fault while starting up): close and raise WorkerError
        (its ``cause``: the traceback, how the process ended, or "timeout"); else restart.
        ``due``: the worker owed a completion (it was running), which the restart then gives."""
        if self._on_fault == "restart" and self._started:
            self._restart(fault, due)
            return
        self.close()
        cause = cause or fault.traceback or fault.cause
        raise WorkerError(message, worker=fault.worker, env_index=fault.env, cause=cause)

    def _restart(self, fault: Fault, due: bool) -> None:
        """Replace worker ``fault.worker``; its rows come back truncated with the fault in their infos."""
        w = fault.worker
        if w == self._main_unit:
            self._restart_main(fault)
            return
        failure: Fault | None = fault
        while failure is not None:
            self._count_fault(failure, w)
            self._retire(w)
            envs = self._envs_of(w)
            seeds = restart_seeds(self._seed, envs.start, len(envs), self._fault_log.worker_restarts[w])
            self._spawn(w, self._restart_method(), seeds, reset_after_build=True)
            failure = self._await_rebuild(w)
        fault.restarts = self._fault_log.worker_restarts.get(w, fault.restarts)
        self._fault_log.restarted(fault)
        if fault.phase == "call":  # the call fails; the rows learn of the fault with the next results
            self._call_results[w] = fault
            self._pending_faults[w] = fault
            if due:
                self._ready.append(w)  # ends the call's wait (which then drops it from the ready list)
        elif due or w in self._ready:
            self._mark_faulted(w, fault)
            if w not in self._ready:
                self._ready.append(w)
        else:  # idle, its rows held by the caller: the fault comes with its next results
            self._pending_faults[w] = fault

    def _restart_main(self, fault: Fault) -> None:
        """The main share's envs raised: re-create them here (there is no process to replace)."""
        w = self._main_unit
        while True:
            self._count_fault(fault, w)
            if self._main_group is not None:
                self._main_group.close()
                self._main_group = None
            envs = self._envs_of(w)
            seeds = restart_seeds(self._seed, envs.start, len(envs), self._fault_log.worker_restarts[w])
            try:
                self._main_group = self._build_main_group(seeds)
                break
            except EnvFault as exc:
                fault = Fault.reported(w, exc.to_dict())
        self._fault_log.restarted(fault)
        if fault.phase == "call":
            self._call_results[w] = fault
            self._pending_faults[w] = fault
        else:
            self._mark_faulted(w, fault)
        self._ready.append(w)

    def _retire(self, w: int) -> None:
        """Kill worker ``w``'s process and release what the main process holds of it."""
        proc = self._procs[w]
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        self._poller.unregister(proc.sentinel)
        self._sentinels.pop(proc.sentinel, None)
        proc.close()
        for fds in (self._cmd_w, self._data_r):
            if fds[w] >= 0:
                os.close(fds[w])
                fds[w] = -1
        self._running.pop(w, None)

    def _await_rebuild(self, w: int) -> Fault | None:
        """Wait for replacement worker ``w`` to build and reset its envs; its fault if it does not."""
        main_ctl = self._main_ctl
        while True:
            if self._from_w[w * SLOTS + DONE] == BUILD:
                self._fence.acquire()  # fence: read the status only after the done word
                self._fence.release()
                del self._running[w]
                if self._from_w[w * SLOTS + STATUS] != ERROR:
                    return None
                try:
                    return Fault.reported(w, pickle.loads(self._read_payload(w)))
                except _WorkerGone as gone:
                    return Fault(w, None, "construction", gone.cause)
            proc = self._procs[w]
            if not proc.is_alive():
                return Fault(w, self._where(w), "construction", _how_it_ended(proc))
            left = self._sent_at[w] + self._allowed[w] - time.monotonic()
            if left <= 0:
                proc.kill()
                return Fault(w, self._where(w), "construction", f"silent for {self._allowed[w]:g} s")
            main_ctl[0] = WAKE_ANY
            self._fence.acquire()  # fence: the flag is visible before we re-check the done word
            self._fence.release()
            if self._from_w[w * SLOTS + DONE] != BUILD:
                self._poller.poll(max(1, min(int(left * 1000) + 1, 100)))
            main_ctl[0] = 0
            self._drain_hints()

    def _mark_faulted(self, w: int, fault: Fault) -> None:
        """Worker ``w``'s rows: truncated, reward 0, each env's info carrying the fault."""
        lo, hi = self._row_bounds[w]
        self._trunc[lo:hi] = True
        self._term[lo:hi] = False
        self._rew[lo:hi] = 0
        agents = self.possible_agents if self.agents_per_env > 1 else None
        self._infos[w].extend((env, fault_info(fault, agents)) for env in self._envs_of(w))

    @property
    def stats(self) -> dict:
        """Faults and restarts so far (``on_fault="restart"``): counts, latencies, faults per env."""
        return self._fault_log.as_dict()

    # ---------------------------------------------------------------- async API
    def _send_command(self, workers: Any, op: int) -> None:
        self._seq += 1
        word = (self._seq << 8) | op
        # The word every worker is on, when one command went to all of them (else -1).
        main = self._main_unit
        if main is not None and main in workers:
            workers = [w for w in workers if w != main]
        else:
            main = None
        self._uniform_word = word if len(workers) == self._procs_n else -1
        stamp = time.monotonic_ns()
        now = stamp * 1e-9
        to_w, from_w, expected, sent_at, running = (
            self._to_w,
            self._from_w,
            self._expected,
            self._sent_at,
            self._running,
        )
        self._fence.acquire()  # fence: actions visible before the command words (weak CPUs)
        self._fence.release()
        allowed = self._allowed
        for w in workers:
            expected[w] = word
            sent_at[w] = now
            allowed[w] = self.timeout
            running[w] = None
            to_w[w * SLOTS + SENT_NS] = stamp
            to_w[w * SLOTS + CMD] = word
        self._fence.acquire()  # fence: the words are visible before we look at the flags
        self._fence.release()
        for w in workers:
            if from_w[w * SLOTS + SLEEPING]:
                self._wake(w)
        if main is None:
            return
        if op == STEP and self._workers_per_batch < self._units:
            self._queue_main(word)  # stepped while recv waits (see _step_main_share)
        else:  # the workers are on their way: now the main process's own share
            self._run_main(op, word)

    def _wake(self, w: int) -> None:
        """Wake worker ``w``, which sleeps on its command pipe."""
        try:
            os.write(self._cmd_w[w], HINT)
        except BlockingIOError:  # full of hints: it will wake
            pass
        except BrokenPipeError:  # it died: its sentinel tells how (restart or raise there)
            self._check_deaths([(self._procs[w].sentinel, select.POLLIN)])

    # ---------------------------------------------------------------- the main process's share
    def _build_main_group(self, restart_seeds: Any) -> EnvGroup:
        w = self._main_unit
        lo, hi = self._row_bounds[w]
        arrays = {name: self._arrays[name][lo:hi] for name in ROW_FIELDS}
        envs = self._envs_of(w)
        group = EnvGroup(
            self._factory,
            len(envs),
            self.agents_per_env,
            arrays,
            first_env=envs.start,
            autoreset=self.autoreset_mode,
        )
        if restart_seeds is not None or self._started:
            group.reset(ResetPlan(restart_seeds, None, None))
        return group

    def _queue_main(self, word: int) -> None:
        """An async batch's step for the main share: its envs step one at a time while recv
        waits, so a worker that finishes meanwhile is not kept waiting for the whole share."""
        w = self._main_unit
        self._expected[w] = word
        self._sent_at[w] = time.monotonic()
        self._main_pending = 0

    def _step_main_share(self, needed: int | None = None) -> None:
        """Step the main share's pending envs, one at a time, until ``needed`` units are ready
        (None: all of them); between envs, workers that finished queue up."""
        if self._main_pending is None:
            return
        w, group, ready = self._main_unit, self._main_group, self._ready
        step_one, last, scan = group.step_one, group.num_envs - 1, self._scan
        while self._main_pending is not None and (needed is None or len(ready) < needed):
            i = self._main_pending
            self._main_pending = i + 1 if i < last else None
            try:
                infos = step_one(i)
            except EnvFault as exc:
                self._main_pending = None
                self._main_fault(exc)
                return
            if infos:
                self._infos[w].extend(infos)
            if i == last:
                self._fault_log.stepped(self._envs_of(w))
                ready.append(w)
            scan()

    def _main_fault(self, exc: EnvFault) -> None:
        """The main share's env raised: raise WorkerError, or (``on_fault="restart"``) re-create its envs."""
        report = exc.to_dict()
        message = env_fault_message(report, "Multiprocessing: the main process's share: ")
        self._fault(Fault.reported(self._main_unit, report), message)

    def _run_main(self, op: int, word: int) -> None:
        """Run command ``op`` on the main share, here, now; it is ready when this returns."""
        w, group = self._main_unit, self._main_group
        self._expected[w] = word
        self._sent_at[w] = time.monotonic()
        try:
            if op == STEP:
                self._infos[w].extend(group.step())
                self._fault_log.stepped(self._envs_of(w))
            elif op == RESET:
                envs = self._envs_of(w)
                flags = self._main_reset_flags
                seeds = self._reset_seeds[envs.start : envs.stop].copy() if flags & HAS_SEEDS else None
                mask = self._reset_mask[envs.start : envs.stop].copy() if flags & HAS_MASK else None
                self._infos[w].extend(group.reset(ResetPlan(seeds, mask, self._main_argument)))
            elif op == CALL:
                local, request = self._main_argument
                self._call_results[w] = sendable(group.call(local, request))
        except EnvFault as exc:
            self._main_fault(exc)
            return
        self._ready.append(w)

    def async_reset(self, seed: Any = None, options: dict | None = None) -> None:
        self._check_open()
        plan = self._plan_reset(seed, options)
        # Results still in flight belong to the old episode: wait for them and drop them.
        self._step_main_share()
        if self._running:
            self._wait(len(self._ready) + len(self._running))
        self._ready.clear()
        self._held = None
        self._infos = [[] for _ in range(self._units)]
        flags = 0
        if plan.seeds is not None:
            self._reset_seeds[...] = plan.seeds
            flags |= HAS_SEEDS
        if plan.mask is not None:
            self._reset_mask[...] = plan.mask
            flags |= HAS_MASK
        self._main_reset_flags = flags
        for w in range(self._units):
            if w != self._main_unit:
                self._to_w[w * SLOTS + RESET_FLAGS] = flags
            self._put_argument(w, plan.options)
        self._send_command(range(self._units), RESET)
        self._state = "running"

    def _put_argument(self, w: int, argument: Any) -> None:
        """Leave a pickled argument for worker ``w``'s next command in its mailbox (None: none)."""
        if w == self._main_unit:
            self._main_argument = argument
            return
        if argument is None:
            self._to_w[w * SLOTS + ARG_LEN] = 0
            return
        try:
            import cloudpickle  # gymnasium's dependency; pickles lambdas and local functions too

            data = cloudpickle.dumps(argument)
        except Exception as exc:
            raise APIUsageError(f"cannot send {argument!r} to the workers: it does not pickle ({exc})") from None
        mailbox = self._mailbox[w]
        if len(data) > len(mailbox):
            raise APIUsageError(
                f"an argument of {len(data):,} bytes does not fit the workers' {len(mailbox):,}-byte mailbox; "
                "raise vector_kwargs={'info_buffer_bytes': …}"
            )
        mailbox[: len(data)] = np.frombuffer(data, np.uint8)
        self._to_w[w * SLOTS + ARG_LEN] = len(data)

    def _call(self, indices: list[int], request: EnvCall) -> list[CallResult]:
        self._step_main_share()  # finish what is in flight first; its results stay ready for recv
        if self._running:
            self._wait(len(self._ready) + len(self._running))
        ready, by_worker = list(self._ready), per_worker(indices, request, self._first_env)
        self._call_results = {}
        for w, argument in by_worker.items():
            self._put_argument(w, argument)
        self._send_command(list(by_worker), CALL)
        self._wait(len(ready) + len(by_worker))
        self._ready = deque(ready)  # the call's completions are not batches
        results = {}
        for w in by_worker:
            answer = self._call_results.pop(w)
            if isinstance(answer, Fault):  # the worker died during the call and was replaced
                raise EnvCallError(
                    f"{describe(request)}: worker {w} faulted during the call ({answer.cause}) and was restarted; "
                    "its envs are fresh, the call did not complete",
                    env_index=answer.env,
                )
            results.update((r.env_index, r) for r in answer)
        return [results[i] for i in indices]

    def recv(self) -> tuple:
        if self._unit_batches:
            return self._recv_unit()
        self._check_recv(holding=self._held is not None)
        k = self._workers_per_batch
        if k < self._units:
            self._scan()  # workers that finished meanwhile queue up now, not after the main share
        if len(self._ready) < k and self._main_pending is not None:
            self._step_main_share(k)
        if len(self._ready) < k:
            self._wait(k)
        if k == self._units:
            batch = sorted(self._ready)
            self._ready.clear()
        else:
            # Oldest command first among the finished: the main share, always finished at once,
            # must not starve workers that were sent their command before it.
            batch = sorted(self._ready, key=self._sent_at.__getitem__)[:k]
            for w in batch:
                self._ready.remove(w)
            batch.sort()
            if self._running:
                self._look_at_late()
        self._held = batch
        infos = self._batch_infos(batch)
        if k == self._units:
            return self._obs, self._rew, self._term, self._trunc, infos, self._all_ids, self._masks
        rows, env_ids = self._batch_rows(batch)
        return (
            self._obs[rows],
            self._rew[rows],
            self._term[rows],
            self._trunc[rows],
            infos,
            env_ids,
            self._masks[rows],
        )

    def _look_at_late(self) -> None:
        """Healthy workers may keep every async batch full, so a worker that died or hangs may
        never be waited on: look at the others' sentinels and deadlines once they run late."""
        now, sent_at, running = time.monotonic(), self._sent_at, self._running
        if now - min(sent_at[w] for w in running) <= min(_LATE, self.timeout):
            return  # nobody late yet (a deadline is never sooner than ``timeout``)
        self._check_deaths([event for event in self._poller.poll(0) if event[0] != self._done_r])
        if any(now >= sent_at[w] + self._allowed[w] for w in running):
            self._scan()  # it may just be unread
            self._timeout("stepping")

    def _recv_unit(self) -> tuple:
        """``recv`` when each batch is one unit: the same steps as the general path, with
        nothing to sort, gather or slice. With few cores the workers wait for this code (the
        main process steps its share too), so it is kept short: each µs it costs next to
        NetHack's games is about 1% of the steps/s (README, "Performance")."""
        if self._closed or self._held is not None or self._state == "new":
            self._check_recv(holding=self._held is not None)  # raises, naming the misuse
        ready = self._ready
        if self._running:
            self._scan()  # workers that finished meanwhile queue up now, not after the main share
        if not ready:
            if self._main_pending is not None:
                self._step_main_share(1)
            if not ready:
                self._wait(1)
        if len(ready) == 1:
            w = ready.popleft()
        else:  # oldest command first, as in recv
            w = min(ready, key=self._sent_at.__getitem__)
            ready.remove(w)
        if self._running:
            self._look_at_late()
        self._held = [w]
        obs, rew, term, trunc, env_ids, masks, _ = self._unit_views[w]
        return obs, rew, term, trunc, self._batch_infos(self._held), env_ids, masks

    def _send_unit(self, actions: Any) -> None:
        """``send`` for the one-unit path (see ``_recv_unit``)."""
        if self._closed or self._held is None:
            self._check_send(holding=self._held is not None)  # raises, naming the misuse
        w = self._held[0]
        self._unit_views[w][6][...] = self._check_actions(actions, self.batch_size)
        self._held = None
        self._send_command((w,), STEP)  # the main share's unit is queued there, stepped while recv waits

    def send(self, actions: Any) -> None:
        if self._unit_batches:
            self._send_unit(actions)
            return
        self._check_send(holding=self._held is not None)
        batch = self._held
        actions = self._check_actions(actions, self.batch_size)
        if self.autoreset_mode == DISABLED:  # disabled needs full batches
            self._check_not_ended(self._term, self._trunc)
        if len(batch) == self._units:
            self._actions[...] = actions
        else:
            start = 0
            for w in batch:
                lo, hi = self._row_bounds[w]
                self._actions[lo:hi] = actions[start : start + hi - lo]
                start += hi - lo
        self._held = None
        self._send_command(batch, STEP)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        group, self._main_group = getattr(self, "_main_group", None), None
        if group is not None:
            group.close()
        # Drop our own views before unmapping; the finalizer does the rest (once).
        for name in (
            "_arrays",
            "_obs",
            "_rew",
            "_term",
            "_trunc",
            "_masks",
            "_actions",
            "_mailbox",
            "_reset_seeds",
            "_reset_mask",
            "_to_w",
            "_from_w",
            "_main_ctl",
            "_unit_views",
        ):
            value = self.__dict__.pop(name, None)
            if isinstance(value, memoryview):
                value.release()
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()

    @property
    def pids(self) -> list[int]:
        """Worker process ids (for diagnostics and tests)."""
        return [proc.pid for proc in getattr(self, "_procs", [])]
