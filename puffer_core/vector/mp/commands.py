"""The main process's side of the command protocol (:mod:`.protocol`), and the book it keeps
of every unit: the command word it is on, since when, how long it may take, whether it has
finished, and what it left (infos, call results, faults still to report).

A unit is a worker process, or the main share (:mod:`.main_share`), the last unit, whose
envs the main process steps itself: it has no control block, so ``send`` and ``scan`` deal
with workers only, and the main share enters the book through ``stamp`` and ``ready``.

``send`` publishes command words and wakes workers that sleep; ``scan`` moves each worker
whose done word matches its command to ``ready``, collecting its infos, call results or
error; ``wait`` spins politely, then sleeps in ``poll`` on the wake-up pipe and every
worker's sentinel until enough units are ready. What goes wrong on the way (an env's error,
a pipe that broke mid-message, a dead worker, a deadline) goes to ``faults``: the keeper of
the worker processes (:class:`.processes.Workers`), which diagnoses it and hands it to the
vector env to raise or restart.
"""

from __future__ import annotations

import os
import pickle
import select
import threading
import time
from collections import deque
from typing import Any, NamedTuple

import numpy as np

from puffer_core.errors import APIUsageError
from puffer_core.vector.faults import Fault, FaultLog, fault_info
from puffer_core.vector.mp.protocol import (
    ARG_LEN,
    BUILD,
    CALL,
    CMD,
    DONE,
    DONE_NS,
    ERROR,
    HINT,
    INFO_LEN,
    INFO_MAILBOX,
    INFO_PIPE,
    LEN,
    PHASES,
    PROGRESS,
    RESET_FLAGS,
    SENT_NS,
    SLEEPING,
    STATUS,
    STEP,
    WAKE_ANY,
    Spin,
    spin_budget,
    usual_wait,
)
from puffer_core.vector.mp.shared_memory import SLOTS, words

__all__ = ["LATE", "Commands", "Pipes", "WorkerGone"]

#: a command running longer than this while other units fill the batches gets its worker's
#: sentinel checked (a dead worker would otherwise go unnoticed until everyone else waits)
LATE = 0.005


class WorkerGone(Exception):
    """A worker's data pipe broke or stalled mid-message; ``cause`` is "died" or "timeout"."""

    def __init__(self, message: str, cause: str):
        super().__init__(message)
        self.cause = cause


class Pipes(NamedTuple):
    """The main process's pipe ends, per worker filled in by whoever starts it (-1 while it has
    none), and those every worker shares (closed with the vector env)."""

    cmd_w: list[int]  #: each worker's command-hint pipe, its write end
    data_r: list[int]  #: each worker's data pipe, its read end
    shared: list[int]  #: the completion-hint pipe, both ends (added here)


class Commands:
    """Commands to the workers and their completions, for ``units`` units of which the first
    ``workers`` are processes (see the module docstring): each command may take ``timeout``
    seconds, the first one (building the envs) ``max(timeout, startup_timeout)``; waits spin
    as ``spin`` says. ``faults`` is set by whoever starts the workers."""

    def __init__(
        self,
        arrays: dict,
        units: int,
        workers: int,
        envs_of: list[range],
        row_bounds: list[tuple[int, int]],
        agents: list | None,
        timeout: float,
        startup_timeout: float,
        spin: Spin,
        fault_log: FaultLog,
        pipes: Pipes,
    ):
        self.timeout, self.startup_timeout = timeout, max(timeout, startup_timeout)
        self.spin, self.spin_floor = spin.main, spin.floor  # (:func:`.protocol.spin_budget`)
        self.workers = workers
        self.envs_of, self.row_bounds = envs_of, row_bounds
        self.agents = agents  # a multi-agent env's possible agents (for fault infos), else None
        self.fault_log = fault_log
        self.to_w = words(arrays["to_worker"])  # worker w's slot k: w * SLOTS + k
        self.from_w = words(arrays["from_worker"])
        self.main_ctl = words(arrays["main"])
        self.mailbox = arrays["mailbox"]
        self.rows = arrays  # for marking a faulted unit's rows (``mark_faulted``)
        self.cmd_w, self.data_r = pipes.cmd_w, pipes.data_r
        self.faults: Any = None  # the keeper of the processes: processes.Workers
        # the book, per unit
        self.expected = [BUILD] * units  # the command word each unit is on
        self.sent_at = [time.monotonic()] * units
        self.allowed = [self.startup_timeout] * units  # seconds the command may take
        self.running: dict[int, None] = {}  # workers on a command, in order of sending
        self.ready: deque[int] = deque()  # units finished, not yet handed out
        self.infos: list[list] = [[] for _ in range(units)]
        self.call_results: dict[int, Any] = {}
        #: faults of restarted units that come with their next results
        self.pending_faults: dict[int, Fault] = {}
        self.seq = 0
        self.uniform_word = BUILD  # the word every worker is on, when one command went to all (else -1)
        self.expected_wait = 0.0
        self.last_done_ns = 0  # the latest completion stamp read from a worker (DONE_NS)
        #: completions noticed only when ``timeout`` ran out (a lost wake-up); always 0
        self.lost_wakeups = 0
        self.fence = threading.Lock()
        self.sentinels: dict[int, int] = {}  # a worker process's sentinel fd → the worker
        self.poller = select.poll()
        self.done_r, self.done_w = os.pipe()  # the completion-hint pipe, shared by every worker
        pipes.shared.extend((self.done_r, self.done_w))  # closed with the vector env (replacements need both ends)
        os.set_blocking(self.done_r, False)
        os.set_blocking(self.done_w, False)  # hints only: a full pipe just drops them
        self.poller.register(self.done_r, select.POLLIN)

    # ---------------------------------------------------------------- the book
    def clean_slate(self, w: int) -> None:
        """Clear worker ``w``'s control block, before its process (a first one or a replacement) starts."""
        for slot in (CMD, RESET_FLAGS, ARG_LEN):  # a replacement must not replay its predecessor's command
            self.to_w[w * SLOTS + slot] = 0
        self.from_w[w * SLOTS + DONE] = 0
        self.from_w[w * SLOTS + PROGRESS] = -1  # no env yet (a worker that dies unpickling names none)

    def started(self, w: int, sentinel: int) -> None:
        """Worker ``w``'s process (its sentinel fd) has started: it owes the BUILD word."""
        self.sentinels[sentinel] = w
        self.poller.register(sentinel, select.POLLIN)
        self.stamp(w, BUILD, self.startup_timeout)
        self.running[w] = None

    def stopped(self, w: int, sentinel: int) -> None:
        """Worker ``w``'s process (its sentinel fd) is gone: nothing more to wait for from it."""
        self.poller.unregister(sentinel)
        self.sentinels.pop(sentinel, None)
        self.running.pop(w, None)

    def stamp(self, w: int, word: int, allowed: float | None = None) -> None:
        """Unit ``w`` is on ``word`` from now on (``allowed`` seconds; default ``timeout``)."""
        self.expected[w] = word
        self.sent_at[w] = time.monotonic()
        self.allowed[w] = self.timeout if allowed is None else allowed

    def clear(self) -> None:
        """Forget what finished units left (a reset drops the old episode's results)."""
        self.ready.clear()
        for infos in self.infos:
            infos.clear()

    def phase(self, w: int) -> str:
        """What worker ``w`` is doing: "construction", "step", "reset", "call" or "idle"."""
        if w not in self.running:
            return "idle"
        return PHASES.get(self.expected[w] & 0xFF, "")

    def where(self, w: int) -> int | None:
        """The env worker ``w`` is building or stepping, when it is on one."""
        env = self.from_w[w * SLOTS + PROGRESS]
        return self.envs_of[w].start + env if env >= 0 else None

    def mark_faulted(self, w: int, fault: Fault) -> None:
        """Unit ``w``'s rows: truncated, reward 0, each env's info carrying the fault."""
        rows = slice(*self.row_bounds[w])
        self.rows["truncations"][rows] = True
        self.rows["terminals"][rows] = False
        self.rows["rewards"][rows] = 0
        self.infos[w].extend((env, fault_info(fault, self.agents)) for env in self.envs_of[w])

    # ---------------------------------------------------------------- commands
    def send(self, workers: Any, op: int) -> int:
        """Send command ``op`` to ``workers`` (processes only); its word."""
        self.seq += 1
        word = (self.seq << 8) | op
        self.uniform_word = word if len(workers) == self.workers else -1
        stamp = time.monotonic_ns()
        now = stamp * 1e-9
        to_w, expected, sent_at, allowed, running = self.to_w, self.expected, self.sent_at, self.allowed, self.running
        timeout, fence = self.timeout, self.fence
        fence.acquire()  # fence: actions visible before the command words (weak CPUs)
        fence.release()
        for w in workers:
            expected[w] = word
            sent_at[w] = now
            allowed[w] = timeout
            running[w] = None
            to_w[w * SLOTS + SENT_NS] = stamp
            to_w[w * SLOTS + CMD] = word
        fence.acquire()  # fence: the words are visible before we look at the flags
        fence.release()
        from_w = self.from_w
        for w in workers:
            if from_w[w * SLOTS + SLEEPING]:
                self.wake(w)
        return word

    def wake(self, w: int) -> None:
        """Wake worker ``w``, which sleeps on its command pipe."""
        try:
            os.write(self.cmd_w[w], HINT)
        except BlockingIOError:  # full of hints: it will wake
            pass
        except BrokenPipeError:  # it died: its sentinel tells how (restart or raise there)
            sentinel = next(fd for fd, v in self.sentinels.items() if v == w)
            self.faults.died([(sentinel, select.POLLIN)])

    def put_argument(self, w: int, argument: Any) -> None:
        """Leave a pickled argument for worker ``w``'s next command in its mailbox (None: none)."""
        if argument is None:
            self.to_w[w * SLOTS + ARG_LEN] = 0
            return
        try:
            import cloudpickle  # gymnasium's dependency; pickles lambdas and local functions too

            data = cloudpickle.dumps(argument)
        except Exception as exc:
            raise APIUsageError(f"cannot send {argument!r} to the workers: it does not pickle ({exc})") from None
        mailbox = self.mailbox[w]
        if len(data) > len(mailbox):
            raise APIUsageError(
                f"an argument of {len(data):,} bytes does not fit the workers' {len(mailbox):,}-byte mailbox; "
                "raise vector_kwargs={'info_buffer_bytes': …}"
            )
        mailbox[: len(data)] = np.frombuffer(data, np.uint8)
        self.to_w[w * SLOTS + ARG_LEN] = len(data)

    def put_reset_flags(self, flags: int) -> None:
        """What the next reset's plan holds in the mapping (``HAS_SEEDS``, ``HAS_MASK``), for every worker."""
        for w in range(self.workers):
            self.to_w[w * SLOTS + RESET_FLAGS] = flags

    # ---------------------------------------------------------------- completions
    def scan(self) -> None:
        """Move every running worker whose done word matches its command to ``ready``."""
        from_w, expected, finished = self.from_w, self.expected, None
        for w in self.running:  # a loop, not a comprehension: this runs between the main share's envs
            if from_w[w * SLOTS + DONE] == expected[w]:
                finished = [w] if finished is None else [*finished, w]
        if finished is None:
            return
        self.fence.acquire()  # fence: read results only after the done words (weak CPUs)
        self.fence.release()
        for w in finished:
            del self.running[w]
            self._complete(w)

    def _complete(self, w: int) -> None:
        """Collect worker ``w``'s finished command: its infos or call results, or its fault."""
        base = w * SLOTS
        status = self.from_w[base + STATUS]
        self.last_done_ns = max(self.last_done_ns, self.from_w[base + DONE_NS])
        try:
            if status == ERROR:
                self.faults.reported(w, pickle.loads(self.read_payload(w)))
                return  # a restart made w ready again (or raised)
            if status in (INFO_MAILBOX, INFO_PIPE):
                if status == INFO_MAILBOX:
                    result = pickle.loads(self.mailbox[w, : self.from_w[base + INFO_LEN]])
                else:
                    result = pickle.loads(self.read_payload(w))
                if self.expected[w] & 0xFF == CALL:
                    self.call_results[w] = result
                else:
                    self.infos[w].extend(result)
        except WorkerGone as gone:
            self.faults.gone(w, gone)
            return
        self.finished(w)

    def finished(self, w: int) -> None:
        """Unit ``w`` finished its command: count its steps, attach a fault it still owes, queue it."""
        if self.expected[w] & 0xFF == STEP:
            self.fault_log.stepped(self.envs_of[w])
        if self.pending_faults:
            pending = self.pending_faults.pop(w, None)
            if pending is not None:
                self.mark_faulted(w, pending)
        self.ready.append(w)

    def read_payload(self, w: int) -> bytes:
        """The next ``LEN``-prefixed message on worker ``w``'s data pipe."""
        fd = self.data_r[w]
        header = self._read_exact(fd, LEN.size)
        return self._read_exact(fd, LEN.unpack(header)[0])

    def _read_exact(self, fd: int, n: int) -> bytes:
        chunks, got = [], 0
        deadline = time.monotonic() + self.timeout
        while got < n:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise WorkerGone(f"stopped mid-message (no data for {self.timeout:g} s)", "timeout")
            chunk = os.read(fd, n - got)
            if not chunk:
                raise WorkerGone("died while sending its results", "died")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    # ---------------------------------------------------------------- waiting
    def wait(self, needed: int, doing: str = "stepping") -> None:
        """Until ``needed`` units are ready: spin politely, then sleep (:mod:`.protocol`)."""
        self.scan()
        if len(self.ready) >= needed:
            return
        now = time.monotonic
        start = now()
        # Adaptive: spin about as long as workers usually take; not at all when they take
        # much longer than ``spin_us`` (heavy envs leave the cores to the workers).
        expected = self.expected_wait
        end = start + spin_budget(self.spin, self.spin_floor, expected)
        scan, ready, yield_ = self.scan, self.ready, os.sched_yield
        while now() < end:
            yield_()
            scan()
            if len(ready) >= needed:
                self.expected_wait = usual_wait(expected, now() - start)
                return
        self._block(needed, doing)
        # The wait lasted until the last worker's stamp, not until we woke: counting our own
        # wake-up latency would make one slow wake-up a habit of sleeping (see the worker).
        waited = min(now(), self.last_done_ns * 1e-9) - start
        self.expected_wait = usual_wait(expected, max(0.0, waited))

    def _block(self, needed: int, doing: str) -> None:
        main_ctl, acquire, release = self.main_ctl, self.fence.acquire, self.fence.release
        while len(self.ready) < needed:
            if not self.running:  # pragma: no cover - guarded by the state checks
                raise APIUsageError("recv() with no batch in flight; call send() first")
            running = self.running
            left = min(self.sent_at[w] + self.allowed[w] for w in running) - time.monotonic()
            if left <= 0:
                self.faults.late(doing)
                continue
            # Waiting for every worker on one command word: only the last to finish wakes us
            # (workers store their done word, fence, then check all of them: at least one
            # of two simultaneous finishers sees the other's word). Otherwise anyone does.
            every = needed - len(self.ready) == len(running) == self.workers and self.uniform_word >= 0
            main_ctl[0] = self.uniform_word if every else WAKE_ANY
            acquire()  # fence: the flag is visible before we re-check the done words
            release()
            self.scan()
            if len(self.ready) >= needed:
                main_ctl[0] = 0
                return
            events = self.poller.poll(max(1, int(left * 1000) + 1))
            main_ctl[0] = 0
            self.drain_hints()
            before = len(self.ready)
            self.scan()
            if not events and len(self.ready) > before:
                self.lost_wakeups += 1  # finished without waking us: a protocol bug, counted
            if any(fd != self.done_r for fd, _ in events):
                self.faults.died(events)

    def drain_hints(self) -> None:
        try:
            while len(os.read(self.done_r, 4096)) == 4096:
                pass
        except BlockingIOError:
            pass

    def look_at_late(self) -> None:
        """Healthy units may keep every async batch full, so a worker that died or hangs may
        never be waited on: look at the others' sentinels and deadlines once they run late."""
        now, sent_at, running = time.monotonic(), self.sent_at, self.running
        if now - min(sent_at[w] for w in running) <= min(LATE, self.timeout):
            return  # nobody late yet (a deadline is never sooner than ``timeout``)
        self.faults.died([event for event in self.poller.poll(0) if event[0] != self.done_r])
        if any(now >= sent_at[w] + self.allowed[w] for w in running):
            self.scan()  # it may just be unread
            self.faults.late("stepping")

    def release(self) -> None:
        """Drop the views of the shared mapping (the vector env closes)."""
        for view in (self.to_w, self.from_w, self.main_ctl):
            view.release()
        self.mailbox = self.rows = None
