"""The shared mapping (puffer_core/vector/mp/shared_memory.py): where every array sits, the same
in every process; a memfd that another process maps to see the same bytes."""

from __future__ import annotations

import itertools
import mmap
import os
import pickle

import numpy as np
import pytest

from puffer_core.vector.mp.shared_memory import ALIGN, SLOTS, FdHandle, Layout, fd_of, map_shared, words

STRUCTURED = np.dtype([("pos", np.float32, (2,)), ("hp", np.int16)])


@pytest.mark.parametrize("obs_dtype", [np.float32, np.uint8, STRUCTURED])
def test_every_array_has_its_own_cache_lines(obs_dtype):
    layout = Layout(6, 3, 2, (5,), obs_dtype, (2,), np.int64, mailbox_bytes=100)
    arrays = layout.arrays(bytearray(layout.size))
    spans = sorted((offset, offset + arrays[name].nbytes) for name, (offset, _, _) in layout.fields.items())
    assert all(start % ALIGN == 0 for start, _ in spans)
    assert all(end <= after for (_, end), (after, _) in itertools.pairwise(spans))  # no two overlap
    assert spans[-1][1] <= layout.size
    assert arrays["observations"].shape == (6, 5) and arrays["observations"].dtype == np.dtype(obs_dtype)
    assert arrays["actions"].shape == (6, 2) and arrays["reset_seeds"].shape == (3,)
    assert arrays["to_worker"].shape == arrays["from_worker"].shape == (2, SLOTS)
    assert arrays["mailbox"].shape == (2, 100)


def test_a_worker_rebuilds_the_same_layout_and_sees_the_same_words():
    layout = Layout(4, 4, 2, (3,), np.float32, (), np.int64, mailbox_bytes=64)
    buffer = bytearray(layout.size)
    mine, theirs = layout.arrays(buffer), pickle.loads(pickle.dumps(layout)).arrays(buffer)
    mine["observations"][2] = 7.5
    assert theirs["observations"][2].tolist() == [7.5, 7.5, 7.5]
    control = words(theirs["to_worker"])  # worker w's slot k: w * SLOTS + k
    control[1 * SLOTS + 3] = 42
    assert mine["to_worker"][1, 3] == 42


def test_the_mapping_is_a_memfd_another_mapping_of_it_shares():
    buffer, memfd = map_shared(2 * mmap.PAGESIZE, "spawn")
    try:
        assert os.readlink(f"/proc/self/fd/{memfd}").startswith("/memfd:puffer-vector")  # never in /dev/shm
        other = mmap.mmap(memfd, 2 * mmap.PAGESIZE)  # what a spawned worker does with the fd it is handed
        buffer[mmap.PAGESIZE : mmap.PAGESIZE + 5] = b"hello"
        assert other[mmap.PAGESIZE : mmap.PAGESIZE + 5] == b"hello"
        other.close()
        handle = pickle.loads(pickle.dumps(FdHandle(memfd)))  # unpickled: a dup of the fd
        try:
            assert os.fstat(fd_of(handle)).st_ino == os.fstat(memfd).st_ino
        finally:
            os.close(handle)
    finally:
        buffer.close()
        os.close(memfd)
