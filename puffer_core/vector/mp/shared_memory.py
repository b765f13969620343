"""The shared mapping: one memfd mapping (``map_shared``) holding every agent row's
observations, rewards, terminals, truncations, masks and actions, each env's reset plan, a
control block per worker and side, the main process's flag word and a mailbox per worker.

Nothing of it is in ``/dev/shm``, so nothing can leak there even if every process is
SIGKILLed; forked workers inherit the mapping, the others map the fd they are handed
(``FdHandle`` survives pickling into them). ``Layout`` says where every array sits, in the
main process and in each worker alike; ``words`` turns a control block into int64 words
for the protocol's hot path (:mod:`.protocol`). Kept apart from the processes that use it,
as Gymnasium keeps ``vector/utils/shared_memory.py`` apart from ``async_vector_env.py``."""

from __future__ import annotations

import mmap
import os
import sys
from typing import Any

import numpy as np

from puffer_core.errors import APIUsageError

__all__ = ["ALIGN", "ROW_FIELDS", "SLOTS", "FdHandle", "Layout", "fd_of", "map_shared", "words"]

ALIGN = 64  # every array starts on its own cache line
#: the per-row arrays of the mapping, in the order an EnvGroup takes them
ROW_FIELDS = ("observations", "rewards", "terminals", "truncations", "masks", "actions")
#: int64 slots of each per-worker control block (one cache line per worker and side)
SLOTS = 8


def align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


class Layout:
    """Offsets of every array in the shared mapping (picklable; rebuilt in spawned workers)."""

    def __init__(
        self,
        rows: int,
        num_envs: int,
        num_workers: int,
        obs_shape: tuple,
        obs_dtype: Any,
        act_shape: tuple,
        act_dtype: Any,
        mailbox_bytes: int,
    ):
        self.fields: dict[str, tuple[int, tuple, str]] = {}
        self.size = 0
        self._add("observations", (rows, *obs_shape), obs_dtype)
        self._add("rewards", (rows,), np.float32)
        self._add("terminals", (rows,), np.bool_)
        self._add("truncations", (rows,), np.bool_)
        self._add("masks", (rows,), np.bool_)
        self._add("actions", (rows, *act_shape), act_dtype)
        self._add("reset_seeds", (num_envs,), np.int64)  # a reset's plan, per env (autoreset.ResetPlan)
        self._add("reset_mask", (num_envs,), np.bool_)
        self._add("to_worker", (num_workers, SLOTS), np.int64)
        self._add("from_worker", (num_workers, SLOTS), np.int64)
        self._add("main", (SLOTS,), np.int64)  # [0]: the main process is sleeping
        self._add("mailbox", (num_workers, max(mailbox_bytes, 64)), np.uint8)
        self.size = max(self.size, 1)

    def _add(self, name: str, shape: tuple, dtype: Any) -> None:
        dtype = np.dtype(dtype)
        self.fields[name] = (self.size, tuple(shape), dtype.str if dtype.fields is None else dtype.descr)
        self.size = align(self.size + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)

    def arrays(self, buffer: Any) -> dict[str, np.ndarray]:
        out = {}
        for name, (offset, shape, dtype) in self.fields.items():
            dtype = np.dtype(dtype)
            count = int(np.prod(shape, dtype=np.int64))
            out[name] = np.frombuffer(buffer, dtype, count, offset).reshape(shape)
        return out


class FdHandle:
    """A file descriptor that survives pickling into a spawned / forkserver child."""

    def __init__(self, fd: int):
        self.fd = fd

    def __reduce__(self) -> Any:
        from multiprocessing import reduction

        return (rebuild_fd, (reduction.DupFd(self.fd),))


def rebuild_fd(dup: Any) -> int:
    return dup.detach()


def fd_of(handle: Any) -> int:
    return handle.fd if isinstance(handle, FdHandle) else handle


def map_shared(size: int, start_method: str) -> tuple[mmap.mmap, int | None]:
    """(mapping, its memfd): a memfd mapping, whatever the start method (a fork env's
    replacement worker may come from the fork server). Without memfd (not Linux) an
    anonymous mapping, which only forked workers see, and no fd."""
    if hasattr(os, "memfd_create"):
        memfd = os.memfd_create("puffer-vector", os.MFD_CLOEXEC)
        try:
            os.ftruncate(memfd, size)
            # Python 3.13+: no dup of the fd inside the mmap, which views left alive after close
            # (a traceback's) would keep open; before, it goes when they do.
            return mmap.mmap(memfd, size, **({"trackfd": False} if sys.version_info >= (3, 13) else {})), memfd
        except BaseException:
            os.close(memfd)
            raise
    if start_method == "fork":  # pragma: no cover - not Linux
        return mmap.mmap(-1, size, flags=mmap.MAP_SHARED), None
    raise APIUsageError(  # pragma: no cover - not Linux
        f"start_method {start_method!r} needs os.memfd_create (Linux); use 'fork'"
    )


def words(array: np.ndarray) -> memoryview:
    """A flat int64 memoryview: item access costs a third of numpy's on the hot path."""
    return memoryview(array).cast("B").cast("q")
