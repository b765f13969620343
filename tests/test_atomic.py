"""`puffer_core.atomic`: a reader sees the old file or the new one, never half of one, two
writers of one target never share a temporary file, a finished file never replaces one that
appeared meanwhile, and a directory others can write into is refused."""

from __future__ import annotations

import errno
import multiprocessing
import os
import stat
import subprocess
import sys
import textwrap

import pytest

from puffer_core import atomic
from puffer_core.atomic import (
    is_temporary_of,
    make_temporary,
    private_directory,
    publish_new,
    remove_stale_temporaries,
    temporary_beside,
    write_atomically,
)
from puffer_core.errors import APIUsageError

#: Only root can give a file to another user (os.chown): the multi-user cases need it.
AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="os.chown to another uid needs root")
OTHER_UID = 12345  # no user of this machine: a directory it owns is no one's we trust


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


# -- publishing without replacing ------------------------------------------------------------


def test_a_file_that_appears_before_publishing_is_never_replaced(tmp_path):
    target = tmp_path / "run.gif"
    first = make_temporary(target)
    first.write_bytes(b"first")
    assert publish_new(first, target) == target and target.read_bytes() == b"first"
    late = make_temporary(target)
    late.write_bytes(b"mine")
    # Another file takes a name between the check and the end: the run's file goes beside it.
    (tmp_path / "run-2.gif").symlink_to(tmp_path / "victim")  # a dangling symlink is not followed either
    assert publish_new(late, target) == tmp_path / "run-3.gif"
    assert target.read_bytes() == b"first" and (tmp_path / "run-3.gif").read_bytes() == b"mine"
    assert not (tmp_path / "victim").exists() and not late.exists()


def test_without_hard_links_the_name_is_claimed_exclusively(tmp_path, monkeypatch):
    def no_links(*args, **kwargs):  # vfat and some FUSE file systems: link(2) is refused
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(atomic.os, "link", no_links)
    target = tmp_path / "run.cast"
    target.write_bytes(b"theirs")
    mine = make_temporary(target)
    mine.write_bytes(b"mine")
    assert publish_new(mine, target) == tmp_path / "run-2.cast"
    assert target.read_bytes() == b"theirs" and (tmp_path / "run-2.cast").read_bytes() == b"mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run-2.cast", "run.cast"]


# -- private directories ---------------------------------------------------------------------


def test_a_new_directory_is_private_to_its_user(tmp_path):
    made = private_directory(tmp_path / "a" / "run")
    assert made.is_dir() and stat.S_IMODE(made.stat().st_mode) == 0o700
    assert private_directory(made) == made  # an existing one of ours, writable by us only, passes
    os.chmod(made, 0o755)  # readable by others is fine (a checkout's compat_matrix/, bench-results/)
    assert private_directory(made, create=False) == made


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o757])
def test_a_directory_others_can_write_is_refused(tmp_path, mode):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, mode)  # sticky or not: others could still plant a symlink under a new name
    with pytest.raises(
        APIUsageError, match=rf"^{shared} is writable by others \(mode {mode:04o}\): .*`chmod go-w {shared}`"
    ):
        private_directory(shared)
    assert list(shared.iterdir()) == []


@AS_ROOT
def test_a_directory_its_group_can_write_is_refused_unless_the_group_is_the_users_own(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o775)
    os.chown(shared, 0, OTHER_UID)
    with pytest.raises(APIUsageError, match=rf"{shared} is writable by group {OTHER_UID} \(mode 0775\)"):
        private_directory(shared)
    os.chown(shared, 0, 0)  # root's own group, no other member (Debian, Ubuntu): no one else writes
    assert private_directory(shared) == shared


@AS_ROOT
def test_a_directory_of_another_user_is_refused(tmp_path):
    theirs = tmp_path / "myrun"  # made earlier by another user, as /tmp/myrun could be
    theirs.mkdir(mode=0o755)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    with pytest.raises(APIUsageError, match=rf"^{theirs} belongs to uid {OTHER_UID}, not to you: .*of your own$"):
        private_directory(theirs)
    assert list(theirs.iterdir()) == []


def test_a_file_is_no_directory(tmp_path):
    (tmp_path / "out").write_text("x")
    with pytest.raises(APIUsageError, match="out is not a directory"):
        private_directory(tmp_path / "out")


# -- files someone else may have placed ---------------------------------------------------------


def test_a_regular_file_is_read_and_anything_else_is_named_not_read(tmp_path):
    (tmp_path / "record").write_bytes(b"x" * 10)
    assert atomic.read_regular(tmp_path / "record", 10) == b"x" * 10
    with pytest.raises(atomic.NotRegularFile, match="10 bytes, more than 9"):
        atomic.read_regular(tmp_path / "record", 9)
    (tmp_path / "link").symlink_to(tmp_path / "record")
    os.mkfifo(tmp_path / "fifo")  # open() without O_NONBLOCK waits for a writer forever
    for name, what in (("link", "a symbolic link, not followed"), ("fifo", "a FIFO"), (".", "a folder")):
        with pytest.raises(atomic.NotRegularFile, match=what):
            atomic.read_regular(tmp_path / name, 100)
    with pytest.raises(atomic.NotRegularFile, match="a device"):
        atomic.read_regular("/dev/zero", 100)  # would never end


@AS_ROOT
def test_a_file_read_for_its_owner_is_refused_when_someone_else_owns_it(tmp_path):
    (tmp_path / "record").write_text("{}")
    os.chown(tmp_path / "record", OTHER_UID, OTHER_UID)
    assert atomic.read_regular(tmp_path / "record", 100, owner=OTHER_UID) == b"{}"
    with pytest.raises(atomic.NotRegularFile, match=f"owned by uid {OTHER_UID}, not by"):
        atomic.read_regular(tmp_path / "record", 100, owner=os.geteuid())


def test_a_log_is_appended_to_only_when_it_is_a_regular_file_of_ones_own(tmp_path):
    log = tmp_path / "train.log"
    with os.fdopen(atomic.open_own_log(log), "ab") as file:  # made when missing
        file.write(b"one\n")
    with os.fdopen(atomic.open_own_log(log), "ab") as file:
        file.write(b"two\n")
    assert log.read_bytes() == b"one\ntwo\n"
    victim = tmp_path / "bashrc"
    victim.write_text("# mine\n")
    planted = tmp_path / "copied-run.log"
    planted.symlink_to(victim)  # a copied run folder's train.log, pointing at the victim's file
    with pytest.raises(atomic.NotRegularFile, match="a symbolic link, not followed"):
        atomic.open_own_log(planted)
    assert victim.read_text() == "# mine\n"
    os.mkfifo(tmp_path / "fifo.log")
    with pytest.raises(atomic.NotRegularFile, match="a FIFO"):
        atomic.open_own_log(tmp_path / "fifo.log")
    if os.geteuid() == 0:
        os.chown(log, OTHER_UID, OTHER_UID)
        with pytest.raises(atomic.NotRegularFile, match=f"owned by uid {OTHER_UID}"):
            atomic.open_own_log(log)


def test_a_folder_that_cannot_be_made_says_where(tmp_path):
    with pytest.raises(APIUsageError, match=r"^cannot make the folder /proc/puffer-run/x: /proc takes no new folder"):
        private_directory("/proc/puffer-run/x")
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(APIUsageError, match=rf"^cannot make the folder {tmp_path}/a-file/run: .*a-file takes no new"):
        private_directory(tmp_path / "a-file" / "run")
