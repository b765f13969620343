"""How Multiprocessing starts its workers, and how a worker dies with the process that owns it.

Start methods
    ``fork`` copies the calling process: quick (no import, no pickling), but a thread of the
    caller may hold a lock at the instant of the copy (the allocator's, a logging handler's,
    one inside torch's or Ray's native threads), and the child, which has only the copying
    thread, then waits for it forever. Python 3.12+ warns about every fork of a process with
    other threads. ``forkserver`` asks a small server process (started once per interpreter,
    with ``spawn``) to fork the worker: its only threads are the BLAS pool of the numpy it
    preloads (below), which OpenBLAS stops around each fork itself; ``spawn`` starts a fresh
    interpreter. Both hand the worker the env creator pickled (cloudpickle: lambdas and local
    functions travel too) and make it import the main module (the fork server does too, once),
    so a script must keep its own code under ``if __name__ == "__main__":``. A vector env made
    while such a process imports the main module would run the script's work there, once per
    worker, and start workers of its own: ``check_not_bootstrapping`` refuses it, naming the fix.

    ``default_start_method``: ``spawn`` off Linux (as CPython does on macOS); on Linux
    ``forkserver`` when the process has more than one thread, or on Python 3.14+ (CPython's own
    default there), else ``fork``. Threads are counted by the OS (``/proc/self/task``), not by
    :mod:`threading`: torch's and Ray's threads are native ones. This counts the pool numpy's
    OpenBLAS keeps on a machine with several cores too (OpenBLAS stops it around a fork itself,
    so Python does not warn about it, but it cannot be told apart from other native threads),
    so on such machines the default is ``forkserver`` in practice (in the fork server that pool
    is known to be the only one; in the caller nothing says so); ``fork`` remains one
    ``vector_kwargs={"start_method": "fork"}`` away where the process is known to be safe to copy.

    A restart (``on_fault="restart"``) uses the vector env's own method, except that a worker
    of a ``fork`` vector env is restarted with ``forkserver`` once the process has other
    threads (a restart comes at any time of a run, typically when torch's threads are up),
    unless the env creator does not pickle: then it is forked still (``restart_start_method``).

    The fork server outlives vector envs: it is multiprocessing's, one per interpreter, and
    exits with it. The vector env that starts it first adds the worker module (numpy,
    gymnasium, Puffer Core) to what it imports before it forks anything (``worker_context``),
    so each worker starts with them imported, about as fast as a forked one, instead of
    importing them itself; ``spawn`` workers always do.

The owner's lifeline
    Workers die with the process that owns their vector env, whatever their OS parent is (the
    fork server's children are not the owner's). Where the owner is the OS parent and made the
    worker from its main thread, the kernel sees to it (``PR_SET_PDEATHSIG``: SIGKILL when the
    owner dies). Elsewhere (``forkserver``; a vector env made in another thread, whose exit
    would fire PDEATHSIG early) the worker watches its owner's lifeline from a thread that
    sleeps in ``poll`` and ends the worker when it turns readable: a pidfd of the owner (Linux
    5.3+; no pid-reuse race, since the owner opens it on itself), or else the read end of a
    pipe only the owner holds the write end of (EOF when it dies; closing the vector env
    closes it only once its workers are gone). The watcher never wakes while the owner lives:
    the command loop's hot path does not know it exists. A worker stuck in C code that holds
    the GIL is beyond a Python thread's reach: there only PDEATHSIG (or the main process's
    ``timeout``, while it lives) ends it.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import select
import signal
import sys
import threading
from typing import Any

from puffer_core.errors import APIUsageError

__all__ = [
    "Lifeline",
    "check_not_bootstrapping",
    "check_start_method",
    "default_start_method",
    "die_with_owner",
    "process_threads",
    "resolve_start_method",
    "restart_start_method",
    "worker_context",
]

#: The first Python whose own default start method on Linux is ``forkserver``.
FORKSERVER_DEFAULT_PYTHON = (3, 14)
_PR_SET_PDEATHSIG = 1
#: What the fork server imports before it forks workers (everything a worker needs to start).
WORKER_MODULE = "puffer_core.vector.mp.worker"


def process_threads() -> int:
    """The threads of this process as the OS counts them (native ones included); where
    ``/proc`` is missing, those :mod:`threading` knows of."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def default_start_method(
    threads: int | None = None, platform: str | None = None, version: tuple[int, int] | None = None
) -> str:
    """The start method of a vector env made now without one (the module docstring says why).
    The arguments stand in for this process's thread count, ``sys.platform`` and Python version."""
    platform = sys.platform if platform is None else platform
    version = sys.version_info[:2] if version is None else version
    if not platform.startswith("linux"):
        return "spawn"
    if version >= FORKSERVER_DEFAULT_PYTHON:
        return "forkserver"
    threads = process_threads() if threads is None else threads
    return "forkserver" if threads > 1 else "fork"


def restart_start_method(method: str, creator_pickles: bool, threads: int | None = None) -> str:
    """How to start a replacement worker of a vector env started with ``method``: the same,
    except that a ``fork`` env's replacement comes from the fork server once the process has
    other threads (if its creator pickles)."""
    if method != "fork" or not creator_pickles:
        return method
    threads = process_threads() if threads is None else threads
    if threads > 1 and "forkserver" in multiprocessing.get_all_start_methods():
        return "forkserver"
    return method


#: The name of worker ``w``'s process is WORKER_NAME + str(w).
WORKER_NAME = "puffer-vector-worker-"
#: The exit code of a worker that found the script it imports making a vector env at import time.
IMPORT_TIME_EXIT = 86
#: ``WorkerError.cause`` of that fault.
IMPORT_TIME_CAUSE = "the script makes a vector env at import time"


def guard_hint(script: str) -> str:
    """The one line that says what to do when ``script`` makes a vector env at import time."""
    return (
        f"{script} makes a vector env at import time, and every worker process imports the script again: "
        "put the script's code under `if __name__ == '__main__':`"
    )


def check_not_bootstrapping() -> None:
    """Refuse to start workers while this process is a worker or fork server importing the main
    module (multiprocessing marks that phase ``_inheriting``, and refuses to start processes
    in it too, but only for its non-fork methods).

    In one of our workers that is the script's code running at import time: worker 0 says so
    in one line and every worker exits quietly with ``IMPORT_TIME_EXIT``, which the main
    process turns into one WorkerError line (a traceback per worker would bury the fix)."""
    process = multiprocessing.current_process()
    if not getattr(process, "_inheriting", False):
        return
    if process.name.startswith(WORKER_NAME):
        if process.name == f"{WORKER_NAME}0":
            script = getattr(sys.modules.get("__mp_main__"), "__file__", None) or "the script"
            sys.stderr.write(f"error: {guard_hint(os.path.basename(script))}\n")
            sys.stderr.flush()
        os._exit(IMPORT_TIME_EXIT)
    raise APIUsageError(
        "a vector env was made while a worker process was importing the main module: the script makes "
        "its vector env at import time; keep the script's code under `if __name__ == '__main__':`"
    )


def check_start_method(method: Any, name: str = "start_method") -> str | None:
    """``method`` if this platform has it, or None (the default, chosen as workers start)."""
    if method is None:
        return None
    available = multiprocessing.get_all_start_methods()
    known = ", ".join(repr(m) for m in available)
    if not isinstance(method, str):
        raise APIUsageError(f"{name} must be one of {known} or None (the default), got {method!r}")
    if method not in available:
        raise APIUsageError(f"{name}={method!r} is not available here; use one of {known} (or None: the default)")
    return method


def resolve_start_method(method: str | None) -> str:
    """``method`` if this platform has it (None: ``default_start_method()``)."""
    return default_start_method() if method is None else check_start_method(method)


def worker_context(method: str) -> Any:
    """The multiprocessing context that starts a worker with ``method``."""
    if method == "forkserver":
        _preload_in_fork_server(WORKER_MODULE)
    return multiprocessing.get_context(method)


def _preload_in_fork_server(module: str) -> None:
    """Add ``module`` to what the fork server imports when it starts, keeping what the user set
    (``multiprocessing.set_forkserver_preload``), if it has not started yet. Preloading only
    saves time (an import that fails there is skipped), so where multiprocessing's internals
    look different this does nothing."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    preload = getattr(server, "_preload_modules", None)
    if not isinstance(preload, list) or getattr(server, "_forkserver_pid", 0) is not None:
        return  # running already (its imports are done), or internals we do not know
    if module not in preload:
        forkserver.set_forkserver_preload([*preload, module])


class Lifeline:
    """The owner's side: an fd that turns readable when this process is gone (``watch_fd``,
    for the workers), and the pipe end that keeps it from doing so before (``keep_fd``;
    None for a pidfd). Forked workers must close ``keep_fd``."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.keep_fd: int | None = None
        try:
            self.watch_fd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # no pidfd (not Linux, a kernel before 5.3, a sandbox)
            self.watch_fd, self.keep_fd = os.pipe()

    def fds(self) -> list[int]:
        return [fd for fd in (self.watch_fd, self.keep_fd) if fd is not None and fd >= 0]

    def close(self) -> None:
        for fd in self.fds():
            try:
                os.close(fd)
            except OSError:
                pass
        self.watch_fd, self.keep_fd = -1, None


def die_with_owner(owner_pid: int, owner_fd: int | None, use_pdeathsig: bool) -> None:
    """In a worker, first thing: make sure it dies with the process that owns it."""
    if use_pdeathsig and sys.platform.startswith("linux") and os.getppid() == owner_pid:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
        except Exception:
            armed = False
        if armed:
            if os.getppid() != owner_pid:  # the owner died before the signal was armed
                os._exit(1)
            if owner_fd is not None:
                os.close(owner_fd)  # the kernel watches; nothing for us to hold
            return
    if owner_fd is None:
        return  # nothing to watch: the command pipe's EOF (seen while the worker sleeps) is the only sign
    threading.Thread(target=_watch_owner, args=(owner_fd,), name="puffer-owner-watch", daemon=True).start()


def _watch_owner(fd: int) -> None:
    """Sleep until the owner's lifeline turns readable (it died), then end this worker at once,
    as PDEATHSIG would: its envs are the main thread's to close, and nobody waits for them."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while not poller.poll():
        pass
    os._exit(1)
