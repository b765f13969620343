"""The Ray backend's own instance keeps its token and its files private: written before Ray starts,
0600 from creation, a token ever readable by others replaced, a 0700 temporary directory.

Every test runs with a temporary HOME: the real ~/.ray is never touched.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from puffer_core.errors import APIUsageError
from puffer_core.vector.ray import private
from puffer_core.vector.ray.private import private_temp_dir, private_token

OTHER_UID = 54321  # no account needed: a file of another user is made with os.chown (as root)
needs_root = pytest.mark.skipif(os.getuid() != 0, reason="a file of another user can be made only as root")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A HOME of the test's own, Ray's token variables unset, the umask most systems have."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_TMPDIR"):
        monkeypatch.delenv(name, raising=False)
    old = os.umask(0o022)
    yield home
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def token(home: Path) -> Path:
    return home / ".ray" / "auth_token"


@pytest.mark.ray  # needs Ray installed (not an instance)
def test_rays_own_token_is_world_readable_and_ours_replaces_it(home):
    from ray._private.authentication.authentication_token_setup import generate_and_save_token

    generate_and_save_token()  # what ray.init does when it finds no token: written with the umask
    old = token(home).read_text()
    assert mode(token(home)) == 0o644 and mode(home / ".ray") == 0o755  # the attack: any local user reads it
    with pytest.warns(RuntimeWarning, match=r"was readable by others \(mode 0644\): replaced by a new one"):
        private_token()
    assert token(home).read_text() != old and len(token(home).read_text()) == 64
    assert (mode(token(home)), mode(home / ".ray")) == (0o600, 0o700)


def test_the_token_is_private_from_its_creation(home, monkeypatch):
    # With no umask at all, a file written Ray's way is 0666; the token's mode is looked at the
    # moment its bytes are written, before anyone could have read them.
    os.umask(0)
    seen, write = [], os.write

    def watching_write(fd, data):
        seen.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return write(fd, data)

    monkeypatch.setattr(os, "write", watching_write)
    private_token()
    monkeypatch.undo()
    assert seen == [0o600]
    assert (mode(token(home)), mode(home / ".ray")) == (0o600, 0o700)
    assert token(home).stat().st_uid == os.getuid()


def test_a_private_token_is_kept_and_a_ray_dir_of_ours_is_tightened(home):
    (home / ".ray").mkdir(mode=0o755)
    token(home).write_text("a" * 64)
    token(home).chmod(0o600)
    private_token()
    assert token(home).read_text() == "a" * 64  # every instance of this user shares it, as Ray intends
    assert mode(home / ".ray") == 0o700


@pytest.mark.parametrize(("kind", "why"), [("readable", "readable by others"), ("empty", "empty"), ("fifo", "not a")])
def test_a_token_unfit_to_use_is_replaced_never_reused(home, kind, why):
    (home / ".ray").mkdir(mode=0o700)
    if kind == "fifo":
        os.mkfifo(token(home), 0o600)  # opening it to read must not hang
    else:
        token(home).write_text("" if kind == "empty" else "b" * 64)
        token(home).chmod(0o640 if kind == "readable" else 0o600)
    with pytest.warns(RuntimeWarning, match=why):
        private_token()
    assert stat.S_ISREG(os.lstat(token(home)).st_mode) and mode(token(home)) == 0o600
    assert token(home).read_text() not in ("", "b" * 64)


def test_a_symlinked_token_is_not_followed(home, tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("not a token")
    target.chmod(0o644)
    (home / ".ray").mkdir(mode=0o700)
    token(home).symlink_to(target)
    with pytest.warns(RuntimeWarning, match="a symlink"):
        private_token()
    assert not token(home).is_symlink() and mode(token(home)) == 0o600
    assert target.read_text() == "not a token" and mode(target) == 0o644  # the target untouched


@needs_root
def test_a_token_of_another_user_is_replaced(home):
    (home / ".ray").mkdir(mode=0o700)
    token(home).write_text("c" * 64)
    token(home).chmod(0o600)
    os.chown(token(home), OTHER_UID, OTHER_UID)  # private, but to someone else: they know it
    with pytest.warns(RuntimeWarning, match=f"owned by uid {OTHER_UID}"):
        private_token()
    assert token(home).stat().st_uid == os.getuid() and token(home).read_text() != "c" * 64


@needs_root
def test_a_ray_dir_of_another_user_is_refused(home):
    (home / ".ray").mkdir(mode=0o755)
    os.chown(home / ".ray", OTHER_UID, OTHER_UID)  # they could read or swap the token in it
    with pytest.raises(APIUsageError, match=f"belongs to uid {OTHER_UID}, not to you") as caught:
        private_token()
    assert "\n" not in str(caught.value) and str(home / ".ray") in str(caught.value)
    assert not token(home).exists()


def test_a_symlinked_ray_dir_is_refused(home, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    (home / ".ray").symlink_to(shared)
    with pytest.raises(APIUsageError, match="is not a directory of yours") as caught:
        private_token()
    assert "RAY_AUTH_TOKEN_PATH" in str(caught.value) and list(shared.iterdir()) == []


def test_a_token_you_give_is_used_as_it_is_if_only_you_can_read_it(home, tmp_path, monkeypatch):
    named = tmp_path / "my_token"
    named.write_text("d" * 64)
    named.chmod(0o644)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(named))
    with pytest.raises(APIUsageError, match=r"RAY_AUTH_TOKEN_PATH='.*my_token' is readable by others \(mode 0644\)"):
        private_token()
    assert named.read_text() == "d" * 64 and mode(named) == 0o644  # the caller's file is never changed
    named.chmod(0o600)
    private_token()
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "missing"))
    with pytest.raises(APIUsageError, match="cannot be read"):
        private_token()
    monkeypatch.setenv("RAY_AUTH_TOKEN", "e" * 64)  # in the environment: nothing to write or check
    private_token()
    assert not (home / ".ray").exists()


def test_rays_temporary_directory_is_private(home, tmp_path, monkeypatch):
    made = Path(private_temp_dir())
    try:
        assert mode(made) == 0o700 and made.stat().st_uid == os.getuid() and made.name.startswith("ray-")
    finally:
        made.rmdir()
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))  # where Ray would put its own: respected
    made = Path(private_temp_dir())
    assert made.parent == tmp_path and mode(made) == 0o700
    made.rmdir()


def test_write_token_never_follows_or_reuses_a_name(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "target")
    for name in ("link", "existing"):
        (tmp_path / "existing").write_text("x")
        with pytest.raises(FileExistsError):
            private.write_token(tmp_path / name)
    assert not (tmp_path / "target").exists()
