"""Multiprocessing: envs in worker processes writing straight into shared memory.

``puffer_core.vector.make(..., backend="multiprocessing")`` makes a :class:`Multiprocessing`.
Its envs are split into units: one per worker process, plus, with ``main_share``, one the
main process steps itself. The modules, from the bottom:

:mod:`.shared_memory`
    One memfd mapping holds every row's observations, rewards, terminals, truncations,
    masks and actions (the envs write into theirs in place: zero-copy), each env's reset
    plan, a control block per worker and side, and a mailbox per worker.
:mod:`.protocol`
    How the main process and a worker talk: a command word and a done word in the control
    blocks, fences between a word and what it publishes, a short polite spin, then sleeping
    on a pipe that the other side writes to only when the sleeper's flag is up. Infos and
    errors travel pickled in the mailbox, or on a data pipe when larger.
:mod:`.start`
    Start methods (fork, forkserver, spawn: which is safe when) and the owner's lifeline,
    by which workers die with the process that owns them.
:mod:`.worker`
    A worker process: its ``EnvGroup`` over its rows, serving one command at a time.
:mod:`.commands`
    The main process's side of the protocol: sending command words, noticing completions,
    waiting, and the book of which unit is on which command since when.
:mod:`.processes`
    Starting, diagnosing and replacing worker processes (``on_fault="restart"``), and
    releasing them with everything else outside Python when the vector env closes.
:mod:`.main_share`
    The main process's own unit: stepped in ``send`` for full batches, or one env at a time
    while ``recv`` waits for async ones, looking at the workers between envs.
:mod:`.backend`
    ``Multiprocessing`` itself: the vector env API, driving the parts above; every fault
    ends in its ``_fault`` (raise ``WorkerError``, or restart).

A step, for a batch of one worker and the main share: ``send`` writes the actions into the
batch's rows and asks :mod:`.commands` to publish the worker's STEP word (waking the worker
only if it sleeps); the main share steps its envs in ``send`` (full batches) or ``recv``
(async ones); ``recv`` waits until the worker's done word matches, collects its infos, and
hands out the batch's rows of the mapping as they are.
"""

from puffer_core.vector.mp.backend import Multiprocessing
from puffer_core.vector.mp.protocol import DEFAULT_SPIN_US

__all__ = ["DEFAULT_SPIN_US", "Multiprocessing"]
