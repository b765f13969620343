"""Multiprocessing: envs in worker processes writing straight into shared memory.

Memory
    One anonymous shared mapping (``memfd_create`` + ``mmap``; nothing in ``/dev/shm``, so
    nothing can leak there even if every process is SIGKILLed) holds the observations,
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
      calling ``sched_yield()`` between looks, for about 1.5× its usual wait (at most
      ``spin_us``; not at all when waits run longer than twice that). Workers spin only
      when ``num_workers <= cpus``; the main process always may, since at each look it
      hands its core to whichever worker shares it. Measured on 2 cores, 2 workers,
      CartPole 16 envs: 160k steps/s with only the workers spinning, 235k with the main
      process too (NetHack 4 envs, batch 2: 32k → 37k; Breakout unchanged: its waits are
      too long to spin). The yield matters: a spin without it that shares a core with the
      process it waits for holds that core for its whole budget (about 400 µs per step
      seen here), which is what made PufferLib's busy-waiting backend crawl at 300
      steps/s with 2 workers on 2 cores. Spinning workers on a core with another of
      ours slowed synchronous batches (NetHack, 4 workers, batch 8: 21k → 16k steps/s),
      so with more workers than cores they sleep at once; ``spin_us=0`` turns all
      spinning off.

Infos
    Only non-empty info lists travel: pickled into the worker's mailbox in shared memory
    (or, when larger than the mailbox, over the worker's data pipe after the completion
    byte). Env errors travel the same way, with the traceback text.

Faults
    An env that raises, a worker that dies, or one silent past ``timeout`` → the vector env
    closes itself and ``WorkerError`` names the worker, the env index and the cause.
    Workers die with their parent (``PR_SET_PDEATHSIG`` on Linux, and EOF on their command
    pipe everywhere). ``close()`` is idempotent and also runs from a ``weakref.finalize``
    (at garbage collection or interpreter exit, Ctrl-C included).
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
import pickle
import select
import signal
import sys
import threading
import time
import weakref
from collections import deque
from typing import Any

import numpy as np

from puffer_core.errors import APIUsageError, WorkerError
from puffer_core.vector.autoreset import DISABLED, NEXT_STEP, check_seed
from puffer_core.vector.base import (
    EnvFactory,
    VectorEnv,
    available_cpus,
    check_counts,
    check_timeout,
    format_infos,
)
from puffer_core.vector.calls import CallResult, EnvCall, per_worker
from puffer_core.vector.mp_worker import (
    ARG_LEN,
    BUILD,
    CALL,
    CMD,
    DEFAULT_SPIN_US,
    DONE,
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
    SLEEPING,
    STATUS,
    STEP,
    WAKE_ANY,
    Pickled,
    WorkerSpec,
    worker_main,
)
from puffer_core.vector.shared_memory import SLOTS, FdHandle, Layout, words

__all__ = ["DEFAULT_SPIN_US", "Multiprocessing"]


def _cleanup(procs: list, fds: list, buffer: Any, layout: Any, memfd_box: list, grace: float) -> None:
    """Stop workers and release every resource. Safe to call more than once."""
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
    if memfd_box:
        try:
            os.close(memfd_box.pop())
        except OSError:
            pass
    if buffer is not None:
        try:
            buffer.close()
        except BufferError:  # views still held by the user; the mapping dies with them
            pass


class Multiprocessing(VectorEnv):
    """``num_envs`` envs over ``num_workers`` processes; see the module docstring.

    Parameters beyond ``make``'s: ``timeout`` (seconds a worker may stay silent on one
    command, default 60; env construction gets ``max(timeout, startup_timeout)``),
    ``start_method`` ("fork" on Linux by default, "spawn" / "forkserver" also work),
    ``info_buffer_bytes`` (per-worker mailbox for infos and call arguments, default 256 KiB) and ``spin_us``
    (the longest a waiting side polls before it sleeps: the main process always, workers
    only when each has a core; default ``DEFAULT_SPIN_US``; 0 never spins).
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
    ):
        self._closed = True  # until fully started; close() is then a no-op
        factory = env if isinstance(env, EnvFactory) else EnvFactory(env, env_kwargs)
        envs, workers, batch, counts = check_counts(num_envs, num_workers, batch_size, "multiprocessing")
        self._init_autoreset(autoreset, batch, envs)
        self.timeout = check_timeout(timeout)
        self._seed = check_seed(seed)
        self._startup_timeout = float(startup_timeout)
        spin = max(0.0, float(DEFAULT_SPIN_US if spin_us is None else spin_us)) / 1e6
        cpus = available_cpus()
        # Workers spin only when each can have a core; the main process's spin yields at
        # every look, so it costs a worker sharing its core no more than a context switch.
        self._spin = spin
        self._worker_spin = spin if workers <= cpus else 0.0

        if start_method is None:
            start_method = "fork" if sys.platform.startswith("linux") else "spawn"
        try:
            ctx = multiprocessing.get_context(start_method)
        except ValueError as exc:
            raise APIUsageError(f"start_method {start_method!r} is not available here: {exc}") from None

        self._init_workers(factory, envs, workers, batch, counts)
        a, action_dtype = self.agents_per_env, self._action_dtype

        obs_space = self.single_observation_space
        layout = Layout(
            self.num_envs,
            envs,
            workers,
            obs_space.shape,
            obs_space.dtype,
            self._action_shape,
            action_dtype,
            info_buffer_bytes,
        )
        self._layout = layout

        # Resources, all owned by the finalizer from here on.
        self._procs: list = []
        cmd_w: list[int] = []
        parent_fds: list[int] = []  # read ends of the completion/data pipes
        self._fd_groups = [cmd_w, parent_fds]
        memfd_box: list[int] = []
        if start_method == "fork":  # inherited by the children: no file, no fd, nothing to leak
            self._buffer = mmap.mmap(-1, layout.size, flags=mmap.MAP_SHARED)
        elif hasattr(os, "memfd_create"):  # an fd the spawned children map (never in /dev/shm)
            memfd = os.memfd_create("puffer-vector", os.MFD_CLOEXEC)
            memfd_box.append(memfd)
            os.ftruncate(memfd, layout.size)
            self._buffer = mmap.mmap(memfd, layout.size)
        else:  # pragma: no cover - non-Linux without fork
            raise APIUsageError(f"start_method {start_method!r} needs os.memfd_create (Linux); use 'fork'")
        self._finalizer = weakref.finalize(
            self, _cleanup, self._procs, self._fd_groups, self._buffer, layout, memfd_box, 1.0
        )
        self._closed = False
        self._state = "new"
        try:
            self._start(ctx, start_method, factory, memfd_box, cmd_w, parent_fds, envs, a)
        except BaseException:
            self.close()
            raise

    # ---------------------------------------------------------------- start-up
    def _start(
        self,
        ctx: Any,
        start_method: str,
        factory: Any,
        memfd_box: list,
        cmd_w: list,
        parent_fds: list,
        envs: int,
        a: int,
    ) -> None:
        self._arrays = arrays = self._layout.arrays(self._buffer)
        self._obs, self._rew = arrays["observations"], arrays["rewards"]
        self._term, self._trunc = arrays["terminals"], arrays["truncations"]
        self._masks, self._actions = arrays["masks"], arrays["actions"]
        self._mailbox = arrays["mailbox"]
        self._reset_seeds, self._reset_mask = arrays["reset_seeds"], arrays["reset_mask"]
        self._to_w = words(arrays["to_worker"])  # worker w's slot k: w * SLOTS + k
        self._from_w = words(arrays["from_worker"])
        self._main_ctl = words(arrays["main"])
        del arrays  # no local views: a failing start-up's traceback must not pin the mapping

        workers = self.num_workers
        child_fds: list[int] = []
        cmd_r = []
        data_r, data_w = [], []
        for _ in range(workers):
            r, w = os.pipe()
            cmd_r.append(r)
            cmd_w.append(w)
            child_fds.append(r)
            os.set_blocking(w, False)
            r, w = os.pipe()
            data_r.append(r)
            data_w.append(w)
            parent_fds.append(r)
            child_fds.append(w)
        done_r, done_w = os.pipe()
        parent_fds.append(done_r)
        child_fds.append(done_w)
        os.set_blocking(done_r, False)
        os.set_blocking(done_w, False)  # hints only: a full pipe just drops them
        self._fd_groups.append(child_fds)  # closed by the finalizer if start-up fails midway
        self._done_r = done_r
        self._data_r = data_r
        self._cmd_w = cmd_w

        fork = start_method == "fork"
        memory: Any = self._buffer if fork else FdHandle(memfd_box[0])
        wrapped = factory if fork else Pickled(factory)
        use_pdeathsig = threading.current_thread() is threading.main_thread()
        everything = cmd_r + cmd_w + data_r + data_w + [done_r, done_w] + memfd_box
        parent_pid = os.getpid()

        def handle(fd: int) -> Any:
            return fd if fork else FdHandle(fd)

        self._expected = [BUILD] * workers  # the command word each worker is working on
        self._sent_at = [time.monotonic()] * workers
        self._running: dict[int, None] = dict.fromkeys(range(workers))  # in order of sending
        self._ready: deque[int] = deque()
        self._infos: list[list] = [[] for _ in range(workers)]
        self._call_results: dict[int, list] = {}
        self._held: list[int] | None = None
        self._seq = 0
        self._expected_wait = 0.0
        self._uniform_word = BUILD
        #: completions noticed only when ``timeout`` ran out (a lost wake-up); always 0
        self.lost_wakeups = 0
        self._fence = threading.Lock()
        for w in range(workers):
            own = {cmd_r[w], data_w[w], done_w}
            close_fds = [fd for fd in everything if fd not in own] if fork else []
            spec = WorkerSpec(
                worker=w,
                factory=wrapped,
                first_env=self._first_env[w],
                num_envs=self._env_counts[w],
                agents_per_env=a,
                rows=self._row_bounds[w],
                layout=self._layout,
                memory=memory,
                cmd=handle(cmd_r[w]),
                done=handle(done_w),
                data=handle(data_w[w]),
                parent_pid=parent_pid,
                use_pdeathsig=use_pdeathsig,
                close_fds=close_fds,
                spin=self._worker_spin,
                autoreset=self.autoreset_mode,
            )
            proc = ctx.Process(target=worker_main, name=f"puffer-vector-worker-{w}", args=(spec,), daemon=True)
            proc.start()
            self._procs.append(proc)
        # The children hold their ends now.
        for fd in child_fds:
            os.close(fd)
        child_fds.clear()
        self._sentinels = {proc.sentinel: w for w, proc in enumerate(self._procs)}
        self._poller = select.poll()
        self._poller.register(done_r, select.POLLIN)
        for sentinel in self._sentinels:
            self._poller.register(sentinel, select.POLLIN)
        # Wait for every worker to have built its envs.
        self._wait(workers, max(self.timeout, self._startup_timeout), "building")
        self._ready.clear()
        self._infos = [[] for _ in range(workers)]

    # ---------------------------------------------------------------- waiting
    def _scan(self) -> None:
        """Move every running worker whose done word matches its command to ``_ready``."""
        from_w, expected = self._from_w, self._expected
        finished = [w for w in self._running if from_w[w * SLOTS + DONE] == expected[w]]
        if finished:
            self._fence.acquire()  # fence: read results only after the done words (weak CPUs)
            self._fence.release()
        for w in finished:
            del self._running[w]
            self._complete(w)

    def _wait(self, needed: int, timeout: float, doing: str = "stepping") -> None:
        """Until ``needed`` workers are ready: spin politely for ``spin_us``, then sleep."""
        self._scan()
        if len(self._ready) >= needed:
            return
        perf = time.perf_counter
        start = perf()
        # Adaptive: spin about as long as workers usually take; not at all when they take
        # much longer than ``spin_us`` (heavy envs leave the cores to the workers).
        expected = self._expected_wait
        if self._spin and expected <= 2 * self._spin:
            scan, ready, yield_ = self._scan, self._ready, os.sched_yield
            end = start + min(self._spin, max(MIN_SPIN, 1.5 * expected))
            while perf() < end:
                yield_()
                scan()
                if len(ready) >= needed:
                    self._expected_wait = 0.7 * expected + 0.3 * (perf() - start)
                    return
        self._block(needed, timeout, doing)
        self._expected_wait = 0.7 * expected + 0.3 * (perf() - start)

    def _block(self, needed: int, timeout: float, doing: str) -> None:
        main_ctl, acquire, release = self._main_ctl, self._fence.acquire, self._fence.release
        while len(self._ready) < needed:
            if not self._running:  # pragma: no cover - guarded by the state checks
                raise APIUsageError("recv() with no batch in flight; call send() first")
            running = self._running
            oldest = min(map(self._sent_at.__getitem__, running))
            left = oldest + timeout - time.monotonic()
            if left <= 0:
                self._timeout(set(running), timeout, doing)
            # Waiting for every worker on one command word: only the last to finish wakes us
            # (workers store their done word, fence, then check all of them: at least one
            # of two simultaneous finishers sees the other's word). Otherwise anyone does.
            every = needed == len(running) == self.num_workers and self._uniform_word >= 0
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
        base = w * SLOTS
        status = self._from_w[base + STATUS]
        if status in (INFO_MAILBOX, INFO_PIPE):
            if status == INFO_MAILBOX:
                result = pickle.loads(self._mailbox[w, : self._from_w[base + INFO_LEN]])
            else:
                result = pickle.loads(self._read_payload(w))
            if self._expected[w] & 0xFF == CALL:
                self._call_results[w] = result
            else:
                self._infos[w].extend(result)
        elif status == ERROR:
            payload = pickle.loads(self._read_payload(w))
            self._fail(
                f"Multiprocessing: worker {w} (pid {self._procs[w].pid}): env {payload['env_index']} raised "
                f"{payload['exc_type']} in {payload['phase']}; its traceback:\n{payload['traceback'].rstrip()}",
                worker=w,
                env_index=payload["env_index"],
                cause=payload["traceback"],
            )
        self._ready.append(w)

    def _read_payload(self, w: int) -> bytes:
        fd = self._data_r[w]
        header = self._read_exact(fd, LEN.size, w)
        return self._read_exact(fd, LEN.unpack(header)[0], w)

    def _read_exact(self, fd: int, n: int, w: int) -> bytes:
        chunks, got = [], 0
        deadline = time.monotonic() + self.timeout
        while got < n:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                self._fail(
                    f"Multiprocessing: worker {w} stopped mid-message (no data for {self.timeout:g} s)",
                    worker=w,
                    env_index=None,
                    cause="timeout",
                )
            chunk = os.read(fd, n - got)
            if not chunk:
                self._fail(
                    f"Multiprocessing: worker {w} died while sending its infos", worker=w, env_index=None, cause="died"
                )
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def _where(self, w: int) -> int | None:
        env = self._from_w[w * SLOTS + PROGRESS]
        return self._first_env[w] + env if env >= 0 else None

    def _check_deaths(self, events: list) -> None:
        for fd, _ in events:
            w = self._sentinels.get(fd)
            if w is None:
                continue
            proc = self._procs[w]
            proc.join(0.5)
            code = proc.exitcode
            if code is not None and code < 0:
                try:
                    how = f"killed by signal {signal.Signals(-code).name}"
                except ValueError:
                    how = f"killed by signal {-code}"
            else:
                how = f"exited with code {code}"
            env_index = self._where(w)
            last = self._first_env[w] + self._env_counts[w] - 1
            where = (
                f"while stepping env {env_index}"
                if env_index is not None
                else f"while idle (it holds envs {self._first_env[w]}–{last})"
            )
            self._fail(
                f"Multiprocessing: worker {w} (pid {proc.pid}) {how} {where}",
                worker=w,
                env_index=env_index,
                cause=how,
            )

    def _timeout(self, late: set, timeout: float, doing: str) -> None:
        now = time.monotonic()
        late = [w for w in sorted(late) if now - self._sent_at[w] >= timeout] or sorted(late)
        w = late[0]
        env_index = self._where(w)
        what = f"env {env_index}" if env_index is not None else "its envs"
        others = f" (also late: workers {late[1:]})" if len(late) > 1 else ""
        self._fail(
            f"Multiprocessing: worker {w} (pid {self._procs[w].pid}) silent for {timeout:g} s while {doing} "
            f"{what}{others}; raise `timeout` (vector_kwargs={{'timeout': …}}) if the env is just slow",
            worker=w,
            env_index=env_index,
            cause="timeout",
        )

    def _fail(self, message: str, worker: int | None, env_index: int | None, cause: str) -> None:
        if worker is not None and cause == "timeout" and worker < len(self._procs):
            self._procs[worker].kill()  # it is stuck: no grace period for it in close()
        self.close()
        raise WorkerError(message, worker=worker, env_index=env_index, cause=cause)

    # ---------------------------------------------------------------- async API
    def _send_command(self, workers: Any, op: int) -> None:
        self._seq += 1
        word = (self._seq << 8) | op
        # The word every worker is on, when one command went to all of them (else -1).
        self._uniform_word = word if len(workers) == self.num_workers else -1
        now = time.monotonic()
        to_w, from_w, expected, sent_at, running = (
            self._to_w,
            self._from_w,
            self._expected,
            self._sent_at,
            self._running,
        )
        self._fence.acquire()  # fence: actions visible before the command words (weak CPUs)
        self._fence.release()
        for w in workers:
            expected[w] = word
            sent_at[w] = now
            running[w] = None
            to_w[w * SLOTS + CMD] = word
        self._fence.acquire()  # fence: the words are visible before we look at the flags
        self._fence.release()
        for w in workers:
            if from_w[w * SLOTS + SLEEPING]:
                try:
                    os.write(self._cmd_w[w], HINT)
                except BlockingIOError:  # full of hints: it will wake
                    pass
                except BrokenPipeError:
                    events = self._poller.poll(1000)
                    self._check_deaths(events)
                    self._fail(
                        f"Multiprocessing: worker {w} is gone (its command pipe is closed)",
                        worker=w,
                        env_index=None,
                        cause="died",
                    )

    def async_reset(self, seed: Any = None, options: dict | None = None) -> None:
        self._check_open()
        plan = self._plan_reset(seed, options)
        # Results still in flight belong to the old episode: wait for them and drop them.
        if self._running:
            self._wait(len(self._ready) + len(self._running), self.timeout)
        self._ready.clear()
        self._held = None
        self._infos = [[] for _ in range(self.num_workers)]
        flags = 0
        if plan.seeds is not None:
            self._reset_seeds[...] = plan.seeds
            flags |= HAS_SEEDS
        if plan.mask is not None:
            self._reset_mask[...] = plan.mask
            flags |= HAS_MASK
        for w in range(self.num_workers):
            self._to_w[w * SLOTS + RESET_FLAGS] = flags
            self._put_argument(w, plan.options)
        self._send_command(range(self.num_workers), RESET)
        self._state = "running"

    def _put_argument(self, w: int, argument: Any) -> None:
        """Leave a pickled argument for worker ``w``'s next command in its mailbox (None: none)."""
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
        if self._running:  # finish what is in flight first; its results stay ready for recv
            self._wait(len(self._ready) + len(self._running), self.timeout)
        ready, by_worker = list(self._ready), per_worker(indices, request, self._first_env)
        self._call_results = {}
        for w, argument in by_worker.items():
            self._put_argument(w, argument)
        self._send_command(list(by_worker), CALL)
        self._wait(len(ready) + len(by_worker), self.timeout)
        self._ready = deque(ready)  # the call's completions are not batches
        results = {r.env_index: r for w in by_worker for r in self._call_results.pop(w)}
        return [results[i] for i in indices]

    def recv(self) -> tuple:
        self._check_open()
        if self._state == "new":
            raise APIUsageError("recv() before async_reset(); call reset() or async_reset() first")
        if self._held is not None:
            raise APIUsageError("recv() called twice without send(); send actions for the last batch first")
        k = self._workers_per_batch
        if len(self._ready) < k:
            self._wait(k, self.timeout)
        if k == self.num_workers:
            batch = sorted(self._ready)
            self._ready.clear()
        else:
            batch = sorted(self._ready.popleft() for _ in range(k))
            # Healthy workers may keep every batch full: make sure none has been silent too long.
            if self._running and time.monotonic() - min(self._sent_at[w] for w in self._running) > self.timeout:
                self._scan()  # it may just be unread
                now = time.monotonic()
                late = {w for w in self._running if now - self._sent_at[w] > self.timeout}
                if late:
                    self._timeout(late, self.timeout, "stepping")
        self._held = batch
        infos: list = []
        for w in batch:
            if self._infos[w]:
                infos.extend(self._infos[w])
                self._infos[w] = []
        infos = format_infos(infos, self.agents_per_env, self.possible_agents) if infos else infos
        if k == self.num_workers:
            return self._obs, self._rew, self._term, self._trunc, infos, self._all_ids, self._masks
        lo, hi = self._row_bounds[batch[0]][0], self._row_bounds[batch[-1]][1]
        if hi - lo == self.batch_size:  # contiguous workers: views
            rows: Any = slice(lo, hi)
            env_ids = self._all_ids[rows]
        else:
            rows = np.concatenate([self._env_ids[w] for w in batch])
            env_ids = rows
        return (
            self._obs[rows],
            self._rew[rows],
            self._term[rows],
            self._trunc[rows],
            infos,
            env_ids,
            self._masks[rows],
        )

    def send(self, actions: Any) -> None:
        self._check_open()
        batch = self._held
        if batch is None:
            raise APIUsageError(
                "send() without a batch to act on; call reset()/async_reset() and recv() first"
                if self._state == "new"
                else "send() called twice without recv(); call recv() to get the next batch first"
            )
        actions = self._check_actions(actions, self.batch_size)
        if self.autoreset_mode == DISABLED:  # disabled needs full batches
            self._check_not_ended(self._term, self._trunc)
        if len(batch) == self.num_workers:
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
        ):
            value = self.__dict__.pop(name, None)
            if isinstance(value, memoryview):
                value.release()
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()

    def _check_open(self) -> None:
        if self._closed:
            raise APIUsageError("this Multiprocessing vector env is closed")

    @property
    def pids(self) -> list[int]:
        """Worker process ids (for diagnostics and tests)."""
        return [proc.pid for proc in getattr(self, "_procs", [])]
