"""The command protocol between the main process and its workers: words in shared memory,
fences, polite spinning, sleeping on a pipe.

Words
    Commands and completions are int64 words in each worker's control block of the shared
    mapping (:mod:`.shared_memory`): the main process writes ``seq << 8 | op`` into a
    worker's command word (``CMD``), the worker copies it into its done word (``DONE``)
    when finished, with a status beside it (``STATUS``: done, infos in the mailbox, infos
    or an error on the data pipe). The words are the truth; pipe bytes are only hints.

Fences
    A waiting side raises its "sleeping" flag, re-checks the word and sleeps in ``read`` /
    ``poll`` on a pipe; the other side writes one byte to that pipe only when the flag is
    up. So a wake-up system call (about 15 µs of the waker's CPU in this VM, where it costs
    an inter-processor interrupt) is paid only when someone really sleeps. A lock
    acquire/release between the flag and the re-check (and between the word and the flag
    check) is the memory fence that makes this free of lost wake-ups (``lost_wakeups``
    counts any completion noticed only by the timeout: the tests require 0). Results are
    fenced the same way before the word that publishes them.

    * When the main process waits for every worker on one command, only the last worker to
      finish wakes it (each checks all done words after its fence), not each of them.
    * The main process sleeps in ``poll`` on its wake-up pipe together with every worker's
      process sentinel, with a deadline: a dead worker or one silent past ``timeout``
      seconds is noticed at once, never waited on forever.

Polite spinning (``spin_us``, default ``DEFAULT_SPIN_US``)
    Before sleeping, a side polls its word, calling ``sched_yield()`` between looks; not
    at all when its waits usually run longer than twice ``spin_us`` (``spin_budget``).
    When every process has a core of its own (workers + the main process ≤ cpus) it spins
    the whole ``spin_us``: a sleep costs a wake-up (a round trip through a pipe takes about
    100 µs in this VM), a spin costs nobody. When they share cores, it spins for about 1.5×
    its usual wait. Workers spin only when ``num_workers <= cpus``; the main process
    always may, since at each look it hands its core to whichever worker shares it. The
    yield matters: a spin without it that shares a core with the process it waits for holds
    that core for its whole budget. Spinning workers on a core with another of ours slow
    synchronous batches, so with more workers than cores they sleep at once; ``spin_us=0``
    turns all spinning off.

    A usual wait is timed by the other side's clock: the main process stamps each command
    with when it sent it (``SENT_NS``), a worker stamps each completion with when it
    finished (``DONE_NS``). Timed by when the waiter got to run, one slow wake-up would
    count as a slow partner: the waiter would stop spinning, and every wake-up after it be
    slow.

Infos, errors and arguments
    Only non-empty info lists travel: pickled into the worker's mailbox in shared memory
    (or, when larger than the mailbox, over the worker's data pipe after the done word, as
    ``LEN``-prefixed bytes). Env errors travel the same way, with the traceback text. A
    command's argument (reset options, a call) goes the other way through the mailbox
    (``ARG_LEN`` bytes).
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

__all__ = ["DEFAULT_SPIN_US", "Spin", "spin_budget", "spin_of", "usual_wait", "write_all"]

#: The longest a waiting side polls (yielding its core) before it sleeps, in µs.
DEFAULT_SPIN_US = 100.0
#: The shortest spin, in seconds, when processes share cores.
MIN_SPIN = 20e-6

# Operations in a command word (main → worker): word = seq << 8 | op.
BUILD, STEP, RESET, CALL, QUIT = 1, 2, 3, 4, 5
#: what each operation is doing, for fault reports
PHASES = {BUILD: "construction", STEP: "step", RESET: "reset", CALL: "call"}
# Status (worker → main), valid once the done word matches the command word.
OK, INFO_MAILBOX, INFO_PIPE, ERROR = 0, 1, 2, 3
# Slots of the per-worker control blocks (shared_memory.SLOTS int64 words per worker and side).
CMD, RESET_FLAGS, ARG_LEN, SENT_NS = 0, 1, 2, 3  # written by the main process
HAS_SEEDS, HAS_MASK = 1, 2  # bits of RESET_FLAGS: reset_seeds / reset_mask hold this reset's plan
DONE, STATUS, INFO_LEN, SLEEPING, PROGRESS, DONE_NS = 0, 1, 2, 3, 4, 5  # written by the worker
#: the main process's flag (its control block's word 0): 0 awake; WAKE_ANY sleeping, wake it
#: on any completion; a command word: sleeping until every worker has finished that word
WAKE_ANY = -1
#: the length prefix of a payload on a data pipe
LEN = struct.Struct("=Q")
#: a wake-up byte
HINT = b"\0"


class Spin(NamedTuple):
    """Seconds each side may spin before it sleeps (see ``spin_budget``)."""

    main: float  #: the main process's longest spin
    floor: float  #: the shortest spin, for both sides
    worker: float  #: a worker's longest spin (0: workers sleep at once)


def spin_of(spin_us: float | None, workers: int, cpus: int) -> Spin:
    """The spins of ``workers`` worker processes on ``cpus`` cores, ``spin_us`` at most (None:
    ``DEFAULT_SPIN_US``)."""
    spin = (DEFAULT_SPIN_US if spin_us is None else spin_us) / 1e6
    # Workers spin only when each can have a core; the main process's spin yields at every
    # look, so it costs a worker sharing its core no more than a context switch. When every
    # process has a core of its own, a spin costs nobody anything and sleeping costs both
    # sides a wake-up, so each spins its whole budget; when they share, a spin lasts about
    # as long as waits usually do.
    floor = spin if workers + 1 <= cpus else min(spin, MIN_SPIN)
    return Spin(spin, floor, spin if workers <= cpus else 0.0)


def spin_budget(spin: float, floor: float, usual: float) -> float:
    """Seconds a side spins before it sleeps: about 1.5× its ``usual`` wait, at least
    ``floor`` and at most ``spin``; none when its waits usually last over twice ``spin``
    (heavy envs, a trainer's forward pass: the cores go to the others)."""
    if not spin or usual > 2 * spin:
        return 0.0
    return min(spin, max(floor, 1.5 * usual))


def usual_wait(usual: float, waited: float) -> float:
    """The running estimate of a side's wait, after one that lasted ``waited`` seconds."""
    return 0.7 * usual + 0.3 * waited


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
