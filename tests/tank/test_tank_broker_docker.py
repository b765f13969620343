"""The shared box for real: users whose login shell is puffertank-login reach the engine only
through the broker, by sudo, on the real engine; `su -` and a real sshd (Debian's
openssh-server on 127.0.0.1, a spare port) log them in. Each attack on the earlier design
(users in group docker) is tried: socket forwarding, a planted docker CLI plugin, a
~/.pam_environment, a container named and labelled as another user's, readable homes.

The login and broker are installed as a box has them but beside the box's own
(:func:`puffer_core.bench.broker_install.install_broker`: a venv of the system Python, a
group and a sudo rule of their own, the CI image as the box's image): /etc/puffertank and
group puffertank are never touched. Users, containers, the rule and sshd are removed after.
"""

from __future__ import annotations

import json
import os
import pathlib
import secrets
import shutil
import socket
import subprocess
import tempfile
import time

import pytest
from docker_tank import IMAGES

from puffer_core.bench.broker_install import install_broker
from puffer_core.bench.scratch_docker import free_port

pytestmark = [pytest.mark.docker, pytest.mark.slow]

LOGIN_LABEL = "org.puffer.tank.login"
SSHD = "/usr/sbin/sshd"


@pytest.fixture(scope="module")
def box(built):
    folder = pathlib.Path(tempfile.mkdtemp(prefix="ptbroker-test-", dir="/tmp"))
    installed = install_broker(folder, IMAGES["final"])
    yield installed
    installed.remove()


def _uid(user: str) -> int:
    return int(subprocess.run(["id", "-u", user], capture_output=True, text=True, check=True).stdout)


def _remove_containers(uid: int) -> None:
    ids = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={LOGIN_LABEL}={uid}"], capture_output=True, text=True
    ).stdout.split()
    if ids:
        subprocess.run(["docker", "rm", "--force", *ids], capture_output=True)


@pytest.fixture
def make_user(box):
    """``make_user(enrolled=True)``: a new user whose login shell is the box's login; removed after."""
    made: list[str] = []

    def make(enrolled: bool = True) -> str:
        name = f"ptb{secrets.token_hex(3)}"
        if enrolled:
            box.enrol(name)
        else:
            subprocess.run(["useradd", "--create-home", "--shell", str(box.login), name], check=True)
        made.append(name)
        return name

    yield make
    for name in made:
        _remove_containers(_uid(name))
        subprocess.run(["docker", "rm", "--force", f"puffertank-{name}"], capture_output=True)
        subprocess.run(["userdel", "--remove", name], capture_output=True)


def su(user: str, command: str, stdin: bytes | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """A login of ``user`` running ``command`` (what `ssh box CMD` does through the login shell)."""
    return subprocess.run(["su", "-", user, "-c", command], input=stdin if stdin is not None else b"",
                          capture_output=True, timeout=timeout)  # fmt: skip


def as_user(user: str, *argv: str) -> subprocess.CompletedProcess:
    """``argv`` run on the host as ``user`` (not through the login shell): what a user could do there."""
    return subprocess.run(["runuser", "-u", user, "--", *argv], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, cwd="/")  # fmt: skip


def _text(proc: subprocess.CompletedProcess) -> str:
    out, err = proc.stdout, proc.stderr
    return (out.decode() if isinstance(out, bytes) else out) + (err.decode() if isinstance(err, bytes) else err)


def _container_id(name: str) -> str:
    return subprocess.run(["docker", "inspect", "--format", "{{.Id}}", name], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def _one_line_error(proc: subprocess.CompletedProcess, text: str) -> None:
    assert proc.returncode == 1, _text(proc)
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(("puffertank-login: ", "puffertank: ")) and text in lines[0], lines


# -- the login, as users know it -----------------------------------------------------------------


def test_a_login_lands_in_the_users_own_container_as_the_user(box, make_user):
    user = make_user()
    started = time.monotonic()
    first = su(user, "test -f /.dockerenv && id -u && id -un && pwd && echo $HOME")
    first_seconds = time.monotonic() - started
    assert first.returncode == 0, _text(first)
    assert first.stdout.decode().split() == [str(_uid(user)), user, f"/home/{user}", f"/home/{user}"]
    later = []
    for _ in range(3):
        started = time.monotonic()
        assert su(user, "true").returncode == 0
        later.append(time.monotonic() - started)
    print(f"first login {first_seconds:.2f} s, later ones {', '.join(f'{s:.2f}' for s in later)} s")
    shape = "{{.Config.Image}} {{.HostConfig.CapDrop}} {{.HostConfig.RestartPolicy.Name}} {{.Config.User}}"
    inspected = subprocess.run(["docker", "inspect", "--format", shape, f"puffertank-{user}"], capture_output=True,
                               text=True, check=True).stdout.split()  # fmt: skip
    assert inspected == [IMAGES["final"], "[ALL]", "unless-stopped", f"{_uid(user)}:{_uid(user)}"]
    # Root's record says whose it is: the broker wrote it, and no one else can.
    record = json.loads((box.state / f"{_container_id(f'puffertank-{user}')}.json").read_text())
    assert record["uid"] == _uid(user) and record["name"] == "default"
    assert (box.state.stat().st_uid, box.state.stat().st_mode & 0o777) == (0, 0o700)


def test_every_session_joins_the_same_container_and_a_stopped_one_comes_back(make_user):
    user = make_user()
    assert su(user, "echo from-the-first > /tmp/marker && echo kept > ~/in-home").returncode == 0
    container = _container_id(f"puffertank-{user}")
    second = su(user, "cat /tmp/marker")
    assert second.stdout == b"from-the-first\n", _text(second)
    # A crash or a hard reset stops the container: the next login starts the same one again.
    subprocess.run(["docker", "kill", f"puffertank-{user}"], capture_output=True, check=True)
    back = su(user, "cat /tmp/marker ~/in-home")
    assert back.stdout == b"from-the-first\nkept\n", _text(back)
    assert _container_id(f"puffertank-{user}") == container


def test_fresh_replaces_the_container_and_keeps_the_home(make_user):
    user = make_user()
    assert su(user, "touch /tmp/old-state && echo kept > ~/notes").returncode == 0
    before = _container_id(f"puffertank-{user}")
    # What `ssh box puffer tank login --fresh -c CMD` sends: the login's own options, on the host.
    fresh = su(user, "puffer tank login --fresh -c 'cat ~/notes; test ! -e /tmp/old-state && echo state-reset'")
    assert fresh.returncode == 0, _text(fresh)
    assert fresh.stdout == b"kept\nstate-reset\n"
    assert f"replaced puffertank-{user}: a new container from {IMAGES['final']}" in fresh.stderr.decode()
    assert _container_id(f"puffertank-{user}") != before


def test_commands_pass_bytes_both_ways_as_scp_and_rsync_need(make_user):
    user = make_user()
    payload = secrets.token_bytes(200_000) + b"\r\n\x00\x1b[0m"  # no terminal may touch these bytes
    up = su(user, "cat > ~/uploaded", stdin=payload)
    assert up.returncode == 0, _text(up)
    on_host = pathlib.Path(f"/home/{user}/uploaded")
    assert on_host.read_bytes() == payload and on_host.stat().st_uid == _uid(user)
    down = su(user, "cat ~/uploaded")
    assert down.returncode == 0 and down.stdout == payload
    assert su(user, "exit 7").returncode == 7  # the command's exit code is the session's


def test_a_second_container_of_ones_own(make_user):
    user = make_user()
    assert su(user, "true").returncode == 0
    second = su(user, "puffer tank login --new exp1 -c 'hostname; touch /tmp/in-exp1'")
    assert second.returncode == 0, _text(second)
    assert su(user, "test ! -e /tmp/in-exp1").returncode == 0  # the default container is another one
    assert su(user, "puffer tank login --new exp1 -c 'test -e /tmp/in-exp1'").returncode == 0  # joined again
    listed = json.loads(su(user, "puffer tank login --list --json").stdout)
    assert [(row["name"], row["container"], row["state"]) for row in listed] == [
        ("default", f"puffertank-{user}", "running"), ("exp1", f"puffertank-{user}.exp1", "running")
    ]  # fmt: skip
    stopped = su(user, "puffer tank login --stop exp1")
    assert stopped.returncode == 0 and f"stopped puffertank-{user}.exp1" in stopped.stderr.decode()
    removed = su(user, "puffer tank login --rm exp1")
    assert removed.returncode == 0 and f"removed puffertank-{user}.exp1" in removed.stderr.decode()
    assert [row["name"] for row in json.loads(su(user, "puffer tank login --list --json").stdout)] == ["default"]
    _one_line_error(su(user, "puffer tank login --rm exp1"), "you have no container exp1")


# -- nobody holds the engine ----------------------------------------------------------------------


def test_users_hold_no_engine_and_may_run_only_the_broker(box, make_user):
    user = make_user()
    groups = as_user(user, "id", "-nG").stdout.split()
    assert "docker" not in groups and box.group in groups
    denied = as_user(user, "/usr/bin/docker", "ps")
    assert denied.returncode != 0 and "permission denied" in denied.stderr
    rules = subprocess.run(["sudo", "-l", "-U", user], capture_output=True, text=True).stdout
    assert f"(root) NOPASSWD: {box.broker}" in rules
    assert rules.split("may run the following commands")[1].count("NOPASSWD") == 1  # the broker, nothing else
    # The broker's own grammar, asked directly through sudo: one line, nothing done.
    for argv, says in (
        (["session", "--privileged"], "'--privileged' is not an option of session"),
        (["session", "--env", "LD_PRELOAD=/tmp/x.so"], "only the terminal's, the locale's and ssh's"),
        (["session", "--image", "busybox:latest"], "--image busybox:latest is not one of this box's images"),
        (["rm", "../../x"], "container name '../../x'"),
    ):
        proc = as_user(user, "sudo", "-n", str(box.broker), *argv)
        assert proc.returncode == 1 and says in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert subprocess.run(["docker", "ps", "-aq", "--filter", f"label={LOGIN_LABEL}={_uid(user)}"],
                          capture_output=True, text=True).stdout == ""  # fmt: skip


def test_a_user_outside_the_group_is_told_who_can_fix_it(make_user):
    user = make_user(enrolled=False)
    _one_line_error(su(user, "true"), "is not enrolled on this box (group ptbroker")


def test_a_container_the_broker_did_not_make_is_never_joined(box, make_user):
    """The attack on the earlier design: A made `puffertank-B` with B's uid label and A's folder
    as B's home. Made here by root (A holds no engine now): B's login refuses it, and it is left."""
    a, b = make_user(), make_user()
    squatter = f"puffertank-{b}"
    forged = ["--label", f"{LOGIN_LABEL}={_uid(b)}", "--user", f"{_uid(b)}:{_uid(b)}"]
    forged += ["--mount", f"type=bind,source=/home/{a},target=/home/{b}", "--network", "none"]
    subprocess.run(["docker", "run", "--detach", "--name", squatter, *forged, IMAGES["final"], "sleep", "infinity"],
                   capture_output=True, check=True)  # fmt: skip
    try:
        proc = su(b, "echo secret > ~/b-file")
        _one_line_error(proc, f"a container named {squatter} is on this box but the broker did not make it for {b}")
        assert not pathlib.Path(f"/home/{a}/b-file").exists()
        state = subprocess.run(["docker", "inspect", "--format", "{{.State.Running}}", squatter], capture_output=True)
        assert state.stdout == b"true\n"  # left as it was, for an admin
        _one_line_error(su(b, "puffer tank login --rm default"), "the broker did not make it")
    finally:
        subprocess.run(["docker", "rm", "--force", squatter], capture_output=True)


def test_homes_are_private_on_the_host_and_in_the_tanks(make_user):
    a, b = make_user(), make_user()
    assert su(b, "echo b-secret > ~/secret && chmod 644 ~/secret").returncode == 0
    assert pathlib.Path(f"/home/{b}").stat().st_mode & 0o777 == 0o700
    assert as_user(a, "cat", f"/home/{b}/secret").returncode != 0
    inside = su(a, f"cat /home/{b}/secret; ls /home")
    assert b"b-secret" not in inside.stdout and inside.stdout.decode().split() == [a], _text(inside)


def test_a_missing_image_is_one_line_and_fresh_keeps_the_old_container(box, make_user):
    user = make_user()
    assert su(user, "true").returncode == 0
    container = _container_id(f"puffertank-{user}")
    box.image_file.write_text("puffertank-absent:latest\n")
    try:
        _one_line_error(su(user, "puffer tank login --fresh"), "no image puffertank-absent:latest on this box")
        assert _container_id(f"puffertank-{user}") == container  # the failed --fresh removed nothing
        other = make_user()
        _one_line_error(su(other, "true"), "puffer tank pull REPO@sha256:")
    finally:
        box.image_file.write_text(IMAGES["final"] + "\n")


# -- over ssh ----------------------------------------------------------------------------------


class Sshd:
    """Debian's sshd on 127.0.0.1:``port``, its host key and a client key in ``folder``, with the drop-in
    setup-host.sh writes for the box's group (``box``) included, as Debian's sshd_config includes it."""

    def __init__(self, users: list[str], box=None, subsystem: str = "/usr/lib/openssh/sftp-server") -> None:
        if not os.path.exists(SSHD):
            pytest.fail(f"{SSHD} is missing: apt-get install openssh-server (.ci/run installs it)")
        self.folder = pathlib.Path(tempfile.mkdtemp(prefix="ptsshd-"))
        self.port = free_port()
        self.key = self.folder / "client"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.folder / "host")], check=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key)], check=True)
        for user in users:
            ssh = pathlib.Path(f"/home/{user}/.ssh")
            ssh.mkdir(mode=0o700)
            (ssh / "authorized_keys").write_text((self.folder / "client.pub").read_text())
            subprocess.run(["chown", "-R", f"{user}:{user}", str(ssh)], check=True)
        config = self.folder / "sshd_config"
        include = ""
        if box is not None:
            (self.folder / "puffertank.conf").write_text(box.sshd_config())
            include = f"Include {self.folder / 'puffertank.conf'}\n"
        # Debian's own settings where they matter here: X11 and every forwarding on, unless a Match says otherwise.
        config.write_text(
            f"{include}Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.folder / 'host'}\n"
            f"PidFile {self.folder / 'sshd.pid'}\nUsePAM yes\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nAuthenticationMethods publickey\nX11Forwarding yes\n"
            f"AllowUsers {' '.join(users)}\nSubsystem sftp {subsystem}\nLogLevel ERROR\n"
        )
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        self.process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"sshd did not listen on 127.0.0.1:{self.port}")

    def options(self, port_flag: str = "-p") -> list[str]:
        """The client's options; sftp names the port -P."""
        quiet = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]
        return ["-F", "/dev/null", "-i", str(self.key), port_flag, str(self.port), "-o", "BatchMode=yes", *quiet]

    def ssh(self, user: str, *command: str, stdin: bytes = b"", timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(["ssh", *self.options(), f"{user}@127.0.0.1", *command], input=stdin,
                              capture_output=True, timeout=timeout)  # fmt: skip

    def background(self, user: str, *options: str) -> subprocess.Popen:
        return subprocess.Popen(["ssh", *self.options(), "-N", *options, f"{user}@127.0.0.1"],
                                stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def sshd(box, make_user):
    a, b = make_user(), make_user()
    server = Sshd([a, b], box)
    yield server, a, b
    server.stop()


def test_ssh_lands_inside_and_sftp_and_rsync_round_trip(sshd):
    server, a, _ = sshd
    proc = server.ssh(a, "test -f /.dockerenv && id -un")
    assert proc.returncode == 0 and proc.stdout == f"{a}\n".encode(), _text(proc)
    payload = secrets.token_bytes(100_000)
    local = pathlib.Path(server.folder / "payload")
    local.write_bytes(payload)
    batch = server.folder / "sftp-batch"
    batch.write_text(f"put {local} sftp-up\nget sftp-up {server.folder / 'sftp-down'}\n")
    sftp = subprocess.run(["sftp", "-b", str(batch), *server.options("-P"), f"{a}@127.0.0.1"], capture_output=True,
                          timeout=120)  # fmt: skip
    assert sftp.returncode == 0, _text(sftp)
    assert (server.folder / "sftp-down").read_bytes() == payload == pathlib.Path(f"/home/{a}/sftp-up").read_bytes()
    ssh_command = " ".join(["ssh", *server.options()])
    rsync = subprocess.run(["rsync", "-a", "-e", ssh_command, str(local), f"{a}@127.0.0.1:rsync-up"],
                           capture_output=True, timeout=120)  # fmt: skip
    assert rsync.returncode == 0, _text(rsync)
    assert pathlib.Path(f"/home/{a}/rsync-up").read_bytes() == payload


def test_forwarding_the_engines_socket_gets_nothing_and_tcp_forwarding_works(sshd):
    server, a, _ = sshd
    forwarded = server.folder / "fwd.sock"
    tunnel = server.background(a, "-L", f"{forwarded}:/var/run/docker.sock")
    try:
        deadline = time.monotonic() + 20
        while not forwarded.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        attempt = subprocess.run(["docker", "-H", f"unix://{forwarded}", "run", "--rm", "--user", "0",
                                  IMAGES["final"], "true"], capture_output=True, text=True, timeout=60)  # fmt: skip
        assert attempt.returncode != 0, attempt.stdout  # sshd connects as the user, who may not
    finally:
        tunnel.terminate()
        tunnel.wait(10)
    port = free_port()
    started = server.ssh(a, f"setsid nohup python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 "
                            "< /dev/null & sleep 1")  # fmt: skip
    assert started.returncode == 0, _text(started)
    local = free_port()
    tunnel = server.background(a, "-L", f"{local}:127.0.0.1:{port}")
    try:
        body = b""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not body:
            fetch = f"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{local}/', timeout=5).status)"
            curl = subprocess.run(["python3", "-c", fetch], capture_output=True)
            body = curl.stdout if curl.returncode == 0 else b""
            time.sleep(0.3)
        assert body.strip() == b"200"  # TensorBoard's way in: a port of the tank, forwarded
    finally:
        tunnel.terminate()
        tunnel.wait(10)
        server.ssh(a, f"pkill -f 'http.server {port}'")


def _planted(home: pathlib.Path, marker: pathlib.Path) -> None:
    """What a user (or code in their tank) can write in their home to be run on the host."""
    plugin = home / ".docker" / "cli-plugins" / "docker-x"
    plugin.parent.mkdir(parents=True)
    plugin.write_text(f"#!/bin/sh\nid > {marker}-cli-plugin\n")
    plugin.chmod(0o755)
    (home / ".docker" / "config.json").write_text(json.dumps({"cliPluginsExtraDirs": [str(plugin.parent)]}))
    site = home / "pyhack"
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"import os\nos.system('id > {marker}-sitecustomize')\n")
    (home / ".pam_environment").write_text(
        f"PYTHONPATH DEFAULT={site}\nPYTHONSTARTUP DEFAULT={site}/sitecustomize.py\n"
    )
    user_site = home / ".local" / "lib" / "python3.11" / "site-packages"
    user_site.mkdir(parents=True)
    (user_site / "usercustomize.py").write_text(f"import os\nos.system('id > {marker}-usercustomize')\n")
    (home / ".config" / "docker").mkdir(parents=True)


def test_files_planted_in_the_home_never_run_as_root(box, sshd):
    server, a, _ = sshd
    home = pathlib.Path(f"/home/{a}")
    marker = pathlib.Path(tempfile.mkdtemp(prefix="ptmarker-")) / "ran"
    marker.parent.chmod(0o1777)
    _planted(home, marker)
    subprocess.run(["chown", "-R", f"{a}:{a}", str(home)], check=True)
    assert server.ssh(a, "true").returncode == 0  # sshd reads ~/.pam_environment (user_readenv=1)
    assert server.ssh(a, "puffer tank login --fresh -c true").returncode == 0
    assert server.ssh(a, "puffer tank login --list").returncode == 0
    assert su(a, "puffer tank login --new other -c true").returncode == 0
    ran = sorted(marker.parent.iterdir())
    for path in ran:  # anything that did run, ran as the user alone
        assert path.stat().st_uid == _uid(a) and "docker" not in path.read_text() and "root" not in path.read_text()
    assert not [path for path in ran if path.name.endswith(("-cli-plugin", "-usercustomize"))], ran
    shutil.rmtree(marker.parent, ignore_errors=True)


# -- what one user may take of the box -----------------------------------------------------------


def _host_config(name: str) -> dict:
    shape = "{{json .HostConfig}}"
    return json.loads(subprocess.run(["docker", "inspect", "--format", shape, name], capture_output=True, text=True,
                                     check=True).stdout)  # fmt: skip


def test_each_tank_has_the_boxs_limits_and_a_user_has_at_most_its_tanks(box, make_user):
    box.limits.write_text("memory = 1G\npids = 512\ncpu_shares = 512\ntanks = 2\n")
    try:
        user = make_user()
        assert su(user, "true").returncode == 0
        limits = {key: _host_config(f"puffertank-{user}")[key] for key in ("Memory", "MemorySwap", "PidsLimit",
                                                                           "CpuShares")}  # fmt: skip
        assert limits == {"Memory": 2**30, "MemorySwap": 2**30, "PidsLimit": 512, "CpuShares": 512}
        listed = su(user, "puffer tank login --list")
        assert listed.returncode == 0, _text(listed)
        assert listed.stdout.decode().startswith(
            "each tank here: memory 1.0 GiB (no swap), 512 processes, CPU shares 512; 2 tanks per user (you have 1)"
        )
        rows = json.loads(su(user, "puffer tank login --list --json").stdout)
        assert rows[0]["limits"] == {"memory": 2**30, "swap": 0, "pids": 512, "cpu_shares": 512}
        assert su(user, "puffer tank login --new exp1 -c true").returncode == 0
        refused = "refused: you have 2 tanks (default, exp1), the most this box gives one user (tanks = 2"
        _one_line_error(su(user, "puffer tank login --new exp2 -c true"), refused)
        assert subprocess.run(["docker", "inspect", f"puffertank-{user}.exp2"], capture_output=True).returncode != 0
        # The admin raises a limit: the next session brings the tank to it (docker update), state kept.
        assert su(user, "touch /tmp/kept").returncode == 0
        box.limits.write_text("memory = 1G\npids = 1024\ncpu_shares = 512\ntanks = 2\n")
        assert su(user, "test -e /tmp/kept").returncode == 0
        assert _host_config(f"puffertank-{user}")["PidsLimit"] == 1024
    finally:
        box.limits.write_text("")


# -- the host, as docs/security.md says it is ------------------------------------------------------


def test_a_session_runs_no_rc_file_and_forwarding_goes_one_way(box, sshd):
    """setup-host's sshd drop-in for the group: ~/.ssh/rc (run through the user's shell, so in the tank,
    before every session) is not run at all, and a remote forward (a listener on the box's loopback,
    which every tank shares) is refused; a local one still works (test_forwarding_... above)."""
    server, a, _ = sshd
    home = pathlib.Path(f"/home/{a}")
    (home / ".ssh" / "rc").write_text("#!/bin/sh\nid > $HOME/rc-ran\n")
    subprocess.run(["chown", f"{a}:{a}", str(home / ".ssh" / "rc")], check=True)
    proc = server.ssh(a, "test -f /.dockerenv && id -un")
    assert proc.returncode == 0 and proc.stdout == f"{a}\n".encode(), _text(proc)
    assert not (home / "rc-ran").exists()  # PermitUserRC no
    port = free_port()
    remote = subprocess.run(["ssh", *server.options(), "-N", "-o", "ExitOnForwardFailure=yes", "-R",
                             f"127.0.0.1:{port}:127.0.0.1:{server.port}", f"{a}@127.0.0.1"],
                            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert remote.returncode == 255 and "remote port forwarding failed" in remote.stderr, remote.stderr
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # nothing of the user's listens on the box


def test_the_groups_sshd_settings_as_sshd_reads_them(box, make_user):
    """sshd's own reading (sshd -T) of Debian-like settings with setup-host's drop-in included: for the
    group, the login for every session and no agent, X11, tunnel or rc; for anyone else, sshd as it was."""
    member, other = make_user(), make_user(enrolled=False)
    server = Sshd([member, other], box)
    try:

        def settings(user: str) -> dict[str, str]:
            shown = subprocess.run([SSHD, "-T", "-f", str(server.folder / "sshd_config"), "-C",
                                    f"user={user},host=laptop,addr=127.0.0.1"], capture_output=True, text=True,
                                   check=True).stdout  # fmt: skip
            return dict(line.split(" ", 1) for line in shown.splitlines() if " " in line)

        group = settings(member)
        assert group["forcecommand"] == str(box.login)
        assert (group["allowtcpforwarding"], group["allowstreamlocalforwarding"]) == ("local", "local")
        for key in ("allowagentforwarding", "x11forwarding", "permittunnel", "permituserrc"):
            assert group[key] == "no", key
        outside = settings(other)
        assert outside["forcecommand"] == "none" and outside["x11forwarding"] == "yes"
    finally:
        server.stop()


def test_sftp_lands_in_the_tank_even_where_sshd_serves_it_itself(box, make_user):
    """With `Subsystem sftp internal-sftp`, sshd would serve sftp in its own process, on the host; the
    drop-in's ForceCommand sends it through the login, which runs OpenSSH's sftp server in the tank."""
    user = make_user()
    server = Sshd([user], box, subsystem="internal-sftp")
    try:
        mark = f"in-the-tank-{secrets.token_hex(4)}"
        assert server.ssh(user, f"touch /tmp/{mark}").returncode == 0  # the tank's /tmp, not the host's
        batch = server.folder / "sftp-batch"
        batch.write_text(f"ls /tmp/{mark}\n")
        sftp = subprocess.run(["sftp", "-b", str(batch), *server.options("-P"), f"{user}@127.0.0.1"],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert sftp.returncode == 0 and mark in sftp.stdout, sftp.stdout + sftp.stderr
        assert not pathlib.Path(f"/tmp/{mark}").exists()
    finally:
        server.stop()
