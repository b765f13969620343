"""`puffer_core.atomic`: a reader sees the old file or the new one, never half of one, and
two writers of one target never share a temporary file."""

from __future__ import annotations

import multiprocessing
import os
import stat
import subprocess
import sys
import textwrap

import pytest

from puffer_core.atomic import (
    is_temporary_of,
    make_temporary,
    remove_stale_temporaries,
    temporary_beside,
    write_atomically,
)


def test_temporaries_are_unique_hidden_and_beside_the_target(tmp_path):
    target = tmp_path / "policy.pt"
    first, second = make_temporary(target), make_temporary(target)
    assert first != second and first.parent == second.parent == tmp_path
    assert first.name.startswith(".policy.pt.") and first.name.endswith(".tmp.pt")
    assert is_temporary_of(first, target) == os.getpid()
    # Readable like any file (tempfile alone makes them 0600), less the umask.
    assert stat.S_IMODE(first.stat().st_mode) == 0o644 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize(
    "name",
    [
        ".policy.pt.12-abcdefgh.tmp",  # no suffix of the target
        ".policy.pt.x12-abcdefgh.tmp.pt",  # no pid
        ".policy.pt.12-abc.tmp.pt",  # not tempfile's 8 characters
        ".policy.pt.12-abcdefgh-x.tmp.pt",
        ".policy1.pt.12-abcdefgh.tmp.pt",
        "policy.pt",
    ],
)
def test_only_exact_names_count_as_a_targets_temporaries(name):
    assert is_temporary_of(name, "dir/policy.pt") is None


def test_stale_temporaries_of_dead_writers_go_and_live_ones_stay(tmp_path):
    target = tmp_path / "run[1].gif"  # glob characters: matched exactly, never as a pattern
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".run[1].gif.{int(dead.stdout)}-abcdefgh.tmp.gif"
    other = tmp_path / f".run1.gif.{int(dead.stdout)}-abcdefgh.tmp.gif"
    stale.write_bytes(b"x")
    other.write_bytes(b"x")
    with temporary_beside(target) as live:
        remove_stale_temporaries(target)
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name])
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name]  # the live one went with its context


def _write_many(path: str, marker: bytes, rounds: int) -> None:
    for _ in range(rounds):
        write_atomically(path, marker * 50_000)


def test_concurrent_writers_and_a_reader_never_see_half_a_file(tmp_path):
    target = tmp_path / "curve.csv"
    write_atomically(target, b"a" * 50_000)
    ctx = multiprocessing.get_context("spawn")
    writers = [ctx.Process(target=_write_many, args=(str(target), marker, 60)) for marker in (b"a", b"b")]
    for writer in writers:
        writer.start()
    seen = set()
    while any(writer.is_alive() for writer in writers):
        data = target.read_bytes()
        seen.add((len(data), data[:1], data[-1:]))
    for writer in writers:
        writer.join(60)
        assert writer.exitcode == 0
    assert all(size == 50_000 and first == last for size, first, last in seen), seen
    assert sorted(p.name for p in tmp_path.iterdir()) == ["curve.csv"]


def test_a_writer_killed_before_the_rename_leaves_the_old_file(tmp_path):
    target = tmp_path / "results.json"
    write_atomically(target, b"old")
    script = textwrap.dedent(
        f"""
        import os, signal
        from puffer_core import atomic
        atomic.replace_durably = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
        atomic.write_atomically({str(target)!r}, b"new")
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    assert target.read_bytes() == b"old"
    write_atomically(target, b"newer")  # and the next write sweeps the dead writer's file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"] and target.read_bytes() == b"newer"
