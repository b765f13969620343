"""`puffer_core.train.run_lock`: the lock file is never followed through a symlink, and a file
under its name that is not a lock of this user's is refused and left as it was.

No torch here: the lock is plain files (these run wherever tests/train runs)."""

from __future__ import annotations

import os

import pytest

from puffer_core.errors import APIUsageError
from puffer_core.train.run_lock import LOCK_NAME, RunLock

AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="os.chown to another uid needs root")
OTHER_UID = 12345


def refused(directory) -> str:
    with pytest.raises(APIUsageError) as caught:
        RunLock(directory).acquire()
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and str(directory / LOCK_NAME) in message
    return message


def test_a_symlinked_lock_is_refused_and_its_target_left_alone(tmp_path):
    victim = tmp_path / "bashrc"
    victim.write_text("export PATH=...\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_NAME).symlink_to(victim)
    assert "is a symbolic link, not a lock file of yours" in refused(out)
    assert victim.read_text() == "export PATH=...\n"
    (out / LOCK_NAME).unlink()
    (out / LOCK_NAME).symlink_to(tmp_path / "missing")  # a dangling one creates nothing either
    refused(out)
    assert not (tmp_path / "missing").exists()


def test_a_hard_link_to_a_users_file_is_refused_untruncated(tmp_path):
    victim = tmp_path / "bashrc"
    victim.write_text("keep\n")
    out = tmp_path / "out"
    out.mkdir()
    os.link(victim, out / LOCK_NAME)
    assert "a file with 2 links" in refused(out)
    assert victim.read_text() == "keep\n"


@AS_ROOT
def test_a_lock_file_of_another_user_is_refused_untruncated(tmp_path):
    planted = tmp_path / LOCK_NAME
    planted.write_text("theirs\n")
    os.chown(planted, OTHER_UID, OTHER_UID)
    assert f"owned by uid {OTHER_UID}" in refused(tmp_path)
    assert planted.read_text() == "theirs\n"


def test_a_fifo_under_the_lock_name_is_refused_without_hanging(tmp_path):
    os.mkfifo(tmp_path / LOCK_NAME)
    assert "not a regular file" in refused(tmp_path)


def test_the_users_own_lock_file_is_reused_and_removed(tmp_path):
    (tmp_path / LOCK_NAME).write_text("4242\n")  # left by a run that crashed
    with RunLock(tmp_path) as lock:
        assert lock.path.read_text() == f"{os.getpid()}\n"
    assert not (tmp_path / LOCK_NAME).exists()
