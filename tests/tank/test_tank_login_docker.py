"""puffer tank login for real: test users whose login shell is puffertank-login, `su -` into
their own PufferTank (the one the docker fixtures build) on the real engine.

puffer-core is installed for them as a box has it (a venv of the system Python, built from
this checkout: the test's own interpreter may sit where other users cannot read), and each
user's shell is a two-line wrapper adding ``--image puffertank-ci:latest``, so the box's
/etc/puffertank/image is never touched. Users and containers are removed after.
"""

from __future__ import annotations

import os
import pathlib
import secrets
import shutil
import subprocess
import tempfile
import time

import pytest
from docker_tank import IMAGES

from puffer_core.bench.box import install_login
from puffer_core.tank.login import LOGIN_LABEL

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def box_puffer(built):
    """The login shell as a box has it (puffer-core in a venv of the system Python, from this checkout)."""
    folder = pathlib.Path(tempfile.mkdtemp(prefix="puffertank-login-test-", dir="/tmp"))
    yield install_login(folder, options=f"--image {IMAGES['final']} ")
    shutil.rmtree(folder, ignore_errors=True)


def _remove_containers(uid: int) -> None:
    ids = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={LOGIN_LABEL}={uid}"], capture_output=True, text=True
    ).stdout.split()
    if ids:
        subprocess.run(["docker", "rm", "--force", *ids], capture_output=True)


@pytest.fixture
def make_user(box_puffer):
    """``make_user(docker=True)``: a new user whose login shell is the box's login; removed after."""
    made: list[tuple[str, int]] = []

    def make(docker: bool = True, shell: pathlib.Path = box_puffer) -> str:
        name = f"ptlogin{secrets.token_hex(3)}"
        groups = ["--groups", "docker"] if docker else []
        subprocess.run(["useradd", "--create-home", "--shell", str(shell), *groups, name], check=True)
        made.append((name, int(subprocess.run(["id", "-u", name], capture_output=True, text=True).stdout)))
        return name

    yield make
    for name, uid in made:
        _remove_containers(uid)
        subprocess.run(["docker", "rm", "--force", f"puffertank-{name}"], capture_output=True)
        subprocess.run(["userdel", "--remove", name], capture_output=True)


def su(user: str, command: str, stdin: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """A login of ``user`` running ``command`` (what `ssh box CMD` does through the login shell)."""
    return subprocess.run(
        ["su", "-", user, "-c", command],
        input=stdin if stdin is not None else b"",
        capture_output=True,
        timeout=timeout,
    )


def _text(proc: subprocess.CompletedProcess) -> str:
    return proc.stdout.decode() + proc.stderr.decode()


def _container_id(user: str) -> str:
    return subprocess.run(
        ["docker", "inspect", "--format", "{{.Id}}", f"puffertank-{user}"], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_a_login_lands_in_the_users_own_container_as_the_user(make_user):
    user = make_user()
    started = time.monotonic()
    first = su(user, "test -f /.dockerenv && id -u && id -un && pwd && echo $HOME")
    first_seconds = time.monotonic() - started
    uid = subprocess.run(["id", "-u", user], capture_output=True, text=True).stdout.strip()
    assert first.returncode == 0, _text(first)
    assert first.stdout.decode().split() == [uid, user, f"/home/{user}", f"/home/{user}"]
    started = time.monotonic()
    again = su(user, "true")
    print(f"first login {first_seconds:.2f} s, a later one {time.monotonic() - started:.2f} s")
    assert again.returncode == 0, _text(again)
    shape = "{{.Config.Image}} {{.HostConfig.CapDrop}} {{.HostConfig.RestartPolicy.Name}}"
    inspected = subprocess.run(
        ["docker", "inspect", "--format", shape, f"puffertank-{user}"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert inspected == [IMAGES["final"], "[ALL]", "unless-stopped"]


def test_every_session_joins_the_same_container_and_a_stopped_one_comes_back(make_user):
    user = make_user()
    assert su(user, "echo from-the-first > /tmp/marker && echo kept > ~/in-home").returncode == 0
    container = _container_id(user)
    second = su(user, "cat /tmp/marker")
    assert second.stdout == b"from-the-first\n", _text(second)
    # A crash or a hard reset stops the container: the next login starts the same one again.
    subprocess.run(["docker", "kill", f"puffertank-{user}"], capture_output=True, check=True)
    back = su(user, "cat /tmp/marker ~/in-home")
    assert back.stdout == b"from-the-first\nkept\n", _text(back)
    assert _container_id(user) == container


def test_fresh_replaces_the_container_and_keeps_the_home(make_user):
    user = make_user()
    assert su(user, "touch /tmp/old-state && echo kept > ~/notes").returncode == 0
    before = _container_id(user)
    # What `ssh box puffer tank login --fresh -c CMD` sends: the login's own options, on the host.
    fresh = su(user, "puffer tank login --fresh -c 'cat ~/notes; test ! -e /tmp/old-state && echo state-reset'")
    assert fresh.returncode == 0, _text(fresh)
    assert fresh.stdout == b"kept\nstate-reset\n"
    assert f"replaced puffertank-{user}: a new container from {IMAGES['final']}" in fresh.stderr.decode()
    assert _container_id(user) != before


def test_commands_pass_bytes_both_ways_as_scp_and_rsync_need(make_user):
    user = make_user()
    payload = secrets.token_bytes(200_000) + b"\r\n\x00\x1b[0m"  # no terminal may touch these bytes
    up = su(user, "cat > ~/uploaded", stdin=payload)
    assert up.returncode == 0, _text(up)
    on_host = pathlib.Path(f"/home/{user}/uploaded")
    assert on_host.read_bytes() == payload
    assert on_host.stat().st_uid == int(subprocess.run(["id", "-u", user], capture_output=True, text=True).stdout)
    down = su(user, "cat ~/uploaded")
    assert down.returncode == 0 and down.stdout == payload
    tools = su(user, "rsync --version | head -n 1 && test -x /usr/lib/openssh/sftp-server && echo sftp-server")
    assert tools.returncode == 0 and tools.stdout.decode().splitlines()[-1] == "sftp-server", _text(tools)
    assert su(user, "exit 7").returncode == 7  # the command's exit code is the session's


def _one_line_error(proc: subprocess.CompletedProcess, text: str) -> None:
    assert proc.returncode == 1, _text(proc)
    assert proc.stdout == b""
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("puffertank-login: ") and text in lines[0], lines


def test_a_missing_image_is_one_line_and_fresh_keeps_the_old_container(make_user, box_puffer):
    user = make_user()
    assert su(user, "true").returncode == 0
    container = _container_id(user)
    missing = box_puffer.with_name("login-shell-missing-image")
    missing.write_text(box_puffer.read_text().replace(IMAGES["final"], "puffertank-absent:latest"))
    missing.chmod(0o755)
    subprocess.run(["usermod", "--shell", str(missing), user], check=True)
    _one_line_error(su(user, "puffer tank login --fresh"), "no image puffertank-absent:latest on this box")
    assert _container_id(user) == container  # the failed --fresh removed nothing
    other = make_user(shell=missing)
    _one_line_error(su(other, "true"), "puffer tank pull --registry HOST/NAME")


def test_a_container_of_another_owner_under_the_name_is_refused(make_user):
    user = make_user()
    squatter = f"puffertank-{user}"
    subprocess.run(
        ["docker", "run", "--detach", "--name", squatter, "--network", "none", IMAGES["final"], "sleep", "infinity"],
        capture_output=True,
        check=True,
    )
    _one_line_error(su(user, "true"), f"a container named {squatter} exists on this box but is not {user}'s")
    state = subprocess.run(["docker", "inspect", "--format", "{{.State.Running}}", squatter], capture_output=True)
    assert state.stdout == b"true\n"  # left as it was


def test_a_user_outside_the_docker_group_is_told_who_can_fix_it(make_user):
    user = make_user(docker=False)
    _one_line_error(su(user, "true"), f"the admin enrols users with tank/setup-host.sh --user {user}")


def test_no_engine_is_one_line(box_puffer):
    proc = subprocess.run(
        [box_puffer, "-c", "true"],
        capture_output=True,
        timeout=60,
        env={**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"},
    )
    _one_line_error(proc, "no Docker engine answers on this box")
