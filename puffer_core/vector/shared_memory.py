"""The Multiprocessing backend's shared mapping: where every array sits in it (``Layout``),
file descriptors that survive pickling into spawned workers (``FdHandle``), and int64
word views for the control blocks (``words``). Kept apart from the processes that use it,
as Gymnasium keeps ``vector/utils/shared_memory.py`` apart from ``async_vector_env.py``."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["ALIGN", "ROW_FIELDS", "SLOTS", "FdHandle", "Layout", "fd_of", "words"]

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


def words(array: np.ndarray) -> memoryview:
    """A flat int64 memoryview: item access costs a third of numpy's on the hot path."""
    return memoryview(array).cast("B").cast("q")
