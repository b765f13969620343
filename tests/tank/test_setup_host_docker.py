"""tank/setup-host.sh for real, in throw-away Debian 12 containers (the debootstrapped base
``tank/ci-setup.sh`` makes): the full non-GPU install once (apt from the Debian mirror,
puffer-core's dependencies from the package index), then a second run that changes nothing,
a failed install that puts the previous venv back, and the cheap paths on fresh containers:
--dry-run, a faked NVIDIA GPU, not root, not Debian 12, bad --user names.

Each container carries the label ``org.puffer.test=setup-host`` and is removed after its
tests. The checkout is mounted read-only at /src, keeping the host's owners (in CI, the runner's
user): the script refuses a source any user but root could change, so each container first
copies what it needs to the root-owned /usr/src/puffer-core (``SRC``) and runs the script from
there, as an admin would. PID 1 is docker-init, not systemd: package scripts start no service
there, and the engine step says it did not start the engine.

The full install runs in a hostile root environment (``HOSTILE``): a pyenv python3 under
the 0700 /root first on PATH, a user's folder on PYTHONPATH and as TMPDIR, umask 077. Each
would have made the venv no user can run, or run a user's code as root; the tests show it
could, then that the box is fine. A --source (or the default one) a user could change is
refused in one line that names the path, its owner and mode, and the fix.

Environment: PUFFERTANK_DEBIAN_IMAGE (base image), PUFFERTANK_CA_CERT (CA bundle pip in the
container trusts, default the system bundle when present).
"""

from __future__ import annotations

import contextlib
import pathlib
import re
import shlex
import shutil
import socket
import subprocess
import time
import uuid

import pytest
from docker_tank import BASE_IMAGE, ROOT

from puffer_core.bench.box import CONTAINER_CA, COPY_SOURCE, SOURCE_COPY, machine_ca, machine_pip_env
from puffer_core.bench.scratch_docker import free_port

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SRC = SOURCE_COPY  # a root-owned copy of what the script needs, in every container (COPY_SOURCE)
SCRIPT = f"{SRC}/tank/setup-host.sh"
LABEL = "org.puffer.test"
USER = "puffer-setup-alice"
MALLORY = "puffer-setup-mallory"  # a user of the box who is not root
LOGIN = "/usr/local/bin/puffertank-login"
PACKAGES = ["docker.io", "git", "vim", "tmux", "curl", "ca-certificates", "python3", "python3-venv", "sudo"]
BROKER = "/usr/local/sbin/puffertank-broker"
INSTALL_TIMEOUT = 1200
# What a run must leave alone: every package, account, file (size, mode, mtime) and apt list.
SNAPSHOT = r"""
dpkg-query -W -f='${Package} ${Version} ${Status}\n'
cat /etc/shells /etc/passwd /etc/group /etc/shadow /etc/gshadow
find /etc /opt /home /usr/local /var/lib/apt /var/lib/dpkg /var/log -xdev \
    \( -type d -printf '%p/ %m\n' \) -o -printf '%p %s %m %T@ %l\n' | LC_ALL=C sort
"""


# Root's environment on a real box may carry a pyenv python3 under 0700 /root first on PATH,
# a user's folder on PYTHONPATH or as TMPDIR (`sudo -E`, `su` without `-`), a strict umask.
# pyenv's layout: its own interpreter (a copy of Debian's, finding its standard library through
# a link) under the 0700 /root, and a shim on PATH; MALLORY's folder holds a sitecustomize.py
# that any python run with that folder on PYTHONPATH imports.
PYENV = "/root/.pyenv/versions/3.11.2"
HOSTILE = f"""
set -e
export DEBIAN_FRONTEND=noninteractive
apt-get -q update >/dev/null && apt-get -q install -y --no-install-recommends python3 >/dev/null
mkdir -p {PYENV}/bin {PYENV}/lib /root/.pyenv/shims
cp /usr/bin/python3.11 {PYENV}/bin/python3.11 && ln -s python3.11 {PYENV}/bin/python3
ln -s /usr/lib/python3.11 {PYENV}/lib/python3.11
printf '#!/bin/sh\\nexec {PYENV}/bin/python3 "$@"\\n' >/root/.pyenv/shims/python3
chmod 755 /root/.pyenv/shims/python3 && chmod 700 /root /root/.pyenv
useradd -m {MALLORY}
install -d -o {MALLORY} -g {MALLORY} -m 755 /tmp/{MALLORY}
cd /tmp/{MALLORY}
printf '%s\\n' 'import os' 'open("/tmp/{MALLORY}/ran-as-%d" % os.getuid(), "a").close()' >sitecustomize.py
chown {MALLORY}: sitecustomize.py
"""
HOSTILE_ENV = f"umask 077; PATH=/root/.pyenv/shims:$PATH PYTHONPATH=/tmp/{MALLORY} TMPDIR=/tmp/{MALLORY}"


def start(client, role: str, **options):
    """A Debian 12 container with the checkout at /src (read-only), on the host's network, idle."""
    volumes = {str(ROOT): {"bind": "/src", "mode": "ro"}}
    ca = machine_ca()
    if ca:
        volumes[ca] = {"bind": CONTAINER_CA, "mode": "ro"}
    container = client.containers.run(
        BASE_IMAGE,
        ["sleep", "infinity"],
        name=f"puffer-setup-test-{role}-{uuid.uuid4().hex[:8]}",
        labels={LABEL: "setup-host"},
        network_mode="host",
        init=True,
        volumes=volumes,
        environment=machine_pip_env(),
        detach=True,
        **options,
    )
    try:
        sh(container, COPY_SOURCE)
    except BaseException:
        container.remove(force=True)
        raise
    return container


def sh(container, script: str, user: str = "root", timeout: float = 120, check: bool = True):
    """Run a bash script in the container (bounded by timeout), its CompletedProcess."""
    proc = subprocess.run(
        ["docker", "exec", "--user", user, container.name, "bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check:
        assert proc.returncode == 0, f"{script!r} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


def setup_host(container, *args: str, env: str = "", user: str = "root", timeout: float = 120, script: str = SCRIPT):
    """tank/setup-host.sh with ARGS in the container, and the seconds it took."""
    started = time.monotonic()
    command = f"{env} bash {script} {shlex.join(args)}"
    proc = sh(container, command, user=user, timeout=timeout, check=False)
    return proc, time.monotonic() - started


def snapshot(container) -> str:
    return sh(container, SNAPSHOT).stdout


def lines_with(text: str, word: str) -> list[str]:
    return [line for line in text.splitlines() if word in line]


def refused_in_one_line(proc) -> str:
    """The run was refused (exit 2) with exactly one line on stderr and nothing on stdout; that line."""
    assert proc.returncode == 2, f"exit {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("setup-host: "), proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def box(client):
    """One container through the full install (the expensive part, done once), shared by the module,
    run in the hostile root environment (HOSTILE, then HOSTILE_ENV)."""
    container = start(client, "box")
    try:
        sh(container, HOSTILE, timeout=600)
        proc, seconds = setup_host(
            container,
            "--source", SRC, "--user", USER, "--image", "puffertank-ci:latest",
            env=HOSTILE_ENV, timeout=INSTALL_TIMEOUT,
        )  # fmt: skip
        print(f"setup-host.sh first run: {seconds:.1f} s\n{proc.stdout}{proc.stderr[-3000:]}")
        assert proc.returncode == 0, f"first run failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr[-6000:]}"
        yield {"container": container, "first": proc, "seconds": seconds}
    finally:
        container.remove(force=True)


@pytest.fixture
def fresh(client):
    """A fresh Debian 12 container for the cheap paths, removed after the test."""
    container = start(client, "fresh")
    yield container
    container.remove(force=True)


def test_first_run_installs_what_it_names(box):
    container, out = box["container"], box["first"].stdout
    assert all(line.startswith("setup-host: ") for line in out.splitlines()), out
    for package in PACKAGES:
        assert f" {package}" in lines_with(out, "setup-host: packages: installed")[0]
        sh(container, f"dpkg -s {package} | grep -qx 'Status: install ok installed'")
    sh(container, "for tool in docker dockerd git vim tmux curl python3; do command -v $tool; done")
    version = sh(container, "/usr/local/bin/puffer --version").stdout
    assert "puffer" in version and "0.1.0" in version, version
    sh(container, "/opt/puffertank/venv/bin/python -c 'import puffer_core, docker'")
    for script, module in ((LOGIN, "login"), (BROKER, "broker")):  # root's scripts, run as python -I
        text = sh(container, f"cat {script}").stdout
        assert (
            text.startswith("#!/opt/puffertank/venv/bin/python -I\n")
            and f"puffer_core.tank.box.{module} import main" in text
        )
        assert sh(container, f"stat -c '%U %a' {script}").stdout.split() == ["root", "755"]
    assert sh(container, f"grep -cxF {LOGIN} /etc/shells").stdout.strip() == "1"
    assert sh(container, f"getent passwd {USER} | cut -d: -f6,7").stdout.strip() == f"/home/{USER}:{LOGIN}"
    groups = sh(container, f"id -nG {USER}").stdout.split()
    assert "puffertank" in groups and "docker" not in groups
    assert sh(container, f"stat -c %a /home/{USER}").stdout.strip() == "700"
    assert sh(container, "cat /etc/puffertank/image").stdout == "puffertank-ci:latest\n"
    assert "in group puffertank" in lines_with(out, f"setup-host: user {USER}: created")[0]
    # One sudo rule: group puffertank runs the broker as root, and nothing else.
    sh(container, "visudo -c")
    assert f"%puffertank ALL=(root) NOPASSWD: {BROKER}" in sh(container, "cat /etc/sudoers.d/puffertank").stdout
    rules = sh(container, f"sudo -l -U {USER}").stdout.split("may run the following commands")[1]
    assert rules.count("NOPASSWD") == 1 and BROKER in rules
    for folder in ("/var/lib/puffertank/containers", "/etc/puffertank/docker"):
        assert sh(container, f"stat -c '%U %a' {folder}").stdout.split() == ["root", "700"]
    assert lines_with(out, "setup-host: engine: not started: systemd is not PID 1")
    # What one user may take of the box: derived from its memory, written for the broker.
    limits = sh(container, "cat /etc/puffertank/limits").stdout
    assert limits.startswith("# The limits of each PufferTank on this box") and "\n# in effect: memory " in limits
    assert lines_with(out, "setup-host: limits: wrote /etc/puffertank/limits: memory ")
    assert sh(container, "stat -c '%U %a' /etc/puffertank/limits").stdout.split() == ["root", "644"]
    # The host as the docs say it is: the group's sshd drop-in, no systemd user manager for the user.
    dropin = sh(container, "cat /etc/ssh/sshd_config.d/puffertank.conf").stdout
    assert "Match Group puffertank\n    ForceCommand /usr/local/bin/puffertank-login\n" in dropin
    uid = sh(container, f"id -u {USER}").stdout.strip()
    assert sh(container, f"readlink /etc/systemd/system/user@{uid}.service").stdout == "/dev/null\n"
    assert len(lines_with(out, "NVIDIA")) == 1
    assert lines_with(out, "setup-host: nvidia: skipped: no NVIDIA GPU found on the PCI bus")
    done = out.splitlines()[-1]
    assert re.fullmatch(
        rf"setup-host: done in \d+\.\d s \(changed: packages, puffer, links, scripts, broker, limits, sshd, shells, "
        rf"image, user {USER}\)",
        done,
    ), done
    assert re.search(r"^setup-host: step times: packages \d+\.\d s, engine", out, re.M), out


def test_second_run_changes_nothing_and_says_so(box):
    container = box["container"]
    before = snapshot(container)
    proc, seconds = setup_host(container, "--source", SRC, "--user", USER, "--image", "puffertank-ci:latest")
    print(f"setup-host.sh second run: {seconds:.1f} s (first: {box['seconds']:.1f} s)\n{proc.stdout}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""
    assert snapshot(container) == before
    steps = ("packages", "puffer", "links", "scripts", "broker", "limits", "sshd", "pam", "shells", "image",
             "docker group", f"user {USER}")  # fmt: skip
    for step in steps:
        assert lines_with(proc.stdout, f"setup-host: {step}: already in place"), (step, proc.stdout)
    assert re.fullmatch(r"setup-host: done in \d+\.\d s \(nothing changed\)", proc.stdout.splitlines()[-1])


def test_a_box_set_up_before_the_broker_is_migrated(box):
    """The earlier setup enrolled users in group docker (root-equivalent), linked the login into
    the venv and left homes 0755: a rerun takes every enrolled user out of group docker, named
    or not (one line), writes the login over the link, warns of a readable home in one line,
    and --fix-homes makes it 0700."""
    container, old = box["container"], "puffer-setup-bob"
    sh(container, f"useradd -m -s {LOGIN} -G docker {old} && chmod 755 /home/{old} && "
                  f"ln -sfn /opt/puffertank/venv/bin/puffertank-login {LOGIN}")  # fmt: skip
    try:
        proc, _ = setup_host(container, "--source", SRC, "--user", USER)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert lines_with(proc.stdout, f"setup-host: docker group: took {old} out of group docker (root-equivalent")
        assert lines_with(proc.stdout, f"setup-host: scripts: wrote {LOGIN}")
        assert "docker" not in sh(container, f"id -nG {old}").stdout.split()
        proc, _ = setup_host(container, "--source", SRC, "--user", old)
        assert lines_with(proc.stdout, f"setup-host: user {old}: in group puffertank")
        warning = lines_with(proc.stdout, f"setup-host: user {old}: warning: /home/{old} is mode 755")
        assert len(warning) == 1 and "--fix-homes makes it 0700" in warning[0]
        assert sh(container, f"stat -c %a /home/{old}").stdout.strip() == "755"  # left as it was
        proc, _ = setup_host(container, "--source", SRC, "--user", old, "--fix-homes")
        assert lines_with(proc.stdout, f"setup-host: user {old}: made /home/{old} 0700 (was 755")
        assert sh(container, f"stat -c %a /home/{old}").stdout.strip() == "700"
    finally:
        sh(container, f"userdel -r {old}", check=False)


def test_exact_users_takes_everyone_else_off_the_box_and_keeps_their_home(box):
    """The fleet's way (--exact-users): the --user list is the box's whole list; an enrolled user
    not on it loses their login (nologin, out of group puffertank) in one line, and keeps their home."""
    container, other = box["container"], "puffer-setup-carol"
    proc, _ = setup_host(container, "--source", SRC, f"--user={other}", "--user", USER)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sh(container, f"echo mine > /home/{other}/notes && chown {other}: /home/{other}/notes")
    # What keeps code of theirs running on the host after they leave: a crontab, linger.
    sh(container, f"install -d /var/spool/cron/crontabs /var/lib/systemd/linger && echo '* * * * * true' > "
                  f"/var/spool/cron/crontabs/{other} && touch /var/lib/systemd/linger/{other}")  # fmt: skip
    kept, _ = setup_host(container, "--source", SRC, f"--user={other}", "--user", USER)  # enrolled, a crontab
    warning = lines_with(kept.stdout, f"setup-host: user {other}: warning: {other} has a crontab")
    assert len(warning) == 1 and f"crontab -r -u {other}" in warning[0], kept.stdout
    assert lines_with(kept.stdout, f"setup-host: user {other}: no linger on the host")  # linger: closed on enrolment
    sh(container, f"touch /var/lib/systemd/linger/{other}")  # made again before they leave
    try:
        dry, _ = setup_host(container, "--dry-run", "--source", SRC, "--user", USER, "--exact-users")
        assert lines_with(dry.stdout, f"setup-host: user {other}: would take {other} off this box")
        proc, _ = setup_host(container, "--source", SRC, "--user", USER, "--exact-users")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        line = lines_with(proc.stdout, f"setup-host: user {other}: taken off this box")
        assert len(line) == 1 and f"home /home/{other} kept" in line[0], proc.stdout
        assert "account expired" in line[0] and "crontab removed" in line[0]
        assert sh(container, f"getent passwd {other} | cut -d: -f7").stdout.strip() == "/usr/sbin/nologin"
        assert sh(container, f"getent shadow {other} | cut -d: -f8").stdout.strip() == "1"  # expired in 1970
        sh(container, f"test ! -e /var/spool/cron/crontabs/{other} && test ! -e /var/lib/systemd/linger/{other}")
        assert "puffertank" not in sh(container, f"id -nG {other}").stdout.split()
        assert sh(container, f"cat /home/{other}/notes").stdout == "mine\n"
        assert lines_with(proc.stdout, f"setup-host: user {USER}: already in place")  # the one named stays
        again, _ = setup_host(container, "--source", SRC, "--user", USER, "--exact-users")
        assert f"user {other}" not in again.stdout  # no longer enrolled: nothing to take off
    finally:
        sh(container, f"userdel -r {other}", check=False)


def test_a_hostile_root_environment_still_makes_a_venv_every_user_can_run(box):
    """The attack first: in the environment the box was installed in (HOSTILE_ENV), python3 is
    pyenv's, and a venv made with it has its home under the 0700 /root, so a user cannot run it
    (the issue's `su: failed to execute /usr/local/bin/puffertank-login: Permission denied`);
    umask 077 makes a venv no other user can enter; a python run as root imports the user's
    sitecustomize.py and puts its temporary files in the user's folder. Then the box: its venv
    is Debian's /usr/bin/python3's, every user runs it and the login, and root ran nothing of
    the user's and wrote nothing in the user's folder."""
    container = box["container"]
    rooted = sh(container, f"find /tmp/{MALLORY} -mindepth 1 ! -user {MALLORY}").stdout  # before the attack below
    sh(container, "PATH=/root/.pyenv/shims:$PATH python3 -m venv --without-pip /tmp/pyenv-venv")
    assert f"home = {PYENV}/bin" in sh(container, "cat /tmp/pyenv-venv/pyvenv.cfg").stdout.splitlines()
    denied = sh(container, "/tmp/pyenv-venv/bin/python -c pass", user=USER, check=False)
    assert denied.returncode != 0 and "permission denied" in (denied.stdout + denied.stderr).lower(), denied
    sh(container, "umask 077; /usr/bin/python3 -m venv --without-pip /tmp/umask-venv")
    denied = sh(container, "/tmp/umask-venv/bin/python -c pass", user=USER, check=False)
    assert denied.returncode != 0 and "permission denied" in (denied.stdout + denied.stderr).lower(), denied
    sh(container, f"PYTHONPATH=/tmp/{MALLORY} /usr/bin/python3 -c pass && test -e /tmp/{MALLORY}/ran-as-0")
    tmp = sh(container, f"TMPDIR=/tmp/{MALLORY} /usr/bin/python3 -c 'import tempfile; print(tempfile.gettempdir())'")
    assert tmp.stdout.strip() == f"/tmp/{MALLORY}"
    sh(container, f"rm -rf /tmp/pyenv-venv /tmp/umask-venv /tmp/{MALLORY}/ran-as-0")

    assert "home = /usr/bin" in sh(container, "cat /opt/puffertank/venv/pyvenv.cfg").stdout.splitlines()
    assert sh(container, "readlink -f /opt/puffertank/venv/bin/python").stdout.strip().startswith("/usr/bin/python3")
    assert sh(container, "stat -c %a /opt/puffertank /opt/puffertank/venv").stdout.split() == ["755", "755"]
    for user in (USER, MALLORY):  # enrolled by the install's useradd, and made by the test's
        sh(container, "/opt/puffertank/venv/bin/python -c 'import puffer_core, docker'", user=user)
        assert "puffertank-login" in sh(container, f"{LOGIN} --help", user=user).stdout
    assert rooted == "", f"root wrote in /tmp/{MALLORY} (TMPDIR) or ran its sitecustomize.py:\n{rooted}"


@pytest.mark.parametrize(
    ("spoil", "says"),
    [
        (f"sed -i 's|^home = .*|home = {PYENV}/bin|' /opt/puffertank/venv/pyvenv.cfg",
         f"/opt/puffertank/venv was made by the python in {PYENV}/bin, not /usr/bin/python3"),
        ("chmod 700 /opt/puffertank/venv/lib", "/opt/puffertank/venv holds what other users cannot read "
         "(/opt/puffertank/venv/lib; a umask like 077"),
    ],
    ids=["made-by-pyenv", "umask-077"],
)  # fmt: skip
def test_a_venv_users_cannot_run_is_made_again(box, spoil, says):
    """A box installed before the fix (its venv pyenv's, or closed by umask 077) gets a new venv
    even though its source did not change: the dry run says why."""
    container = box["container"]
    cfg = "/opt/puffertank/venv/pyvenv.cfg"
    sh(container, f"cp -a {cfg} /tmp/pyvenv.cfg.saved && {spoil}")
    try:
        proc, _ = setup_host(container, "--dry-run", "--source", SRC)
    finally:
        sh(container, f"cp -a /tmp/pyvenv.cfg.saved {cfg} && chmod 755 /opt/puffertank/venv/lib")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = lines_with(proc.stdout, "setup-host: puffer: would install")[0]
    assert f"into a new venv /opt/puffertank/venv ({says}" in line, line


def test_a_failed_install_puts_the_previous_venv_back(box):
    container = box["container"]
    # A copy of the checkout whose pyproject.toml pip cannot read: the puffer step fails after
    # moving the venv aside and making a new one.
    sh(container, f"rm -rf /tmp/broken && mkdir /tmp/broken && cp -r {SRC}/pyproject.toml {SRC}/README.md "
       f"{SRC}/puffer_core /tmp/broken/ && echo 'this is [not toml' >> /tmp/broken/pyproject.toml")  # fmt: skip
    before = snapshot(container)
    proc, _ = setup_host(container, "--source", "/tmp/broken")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    print(proc.stderr)
    assert lines_with(proc.stderr, "setup-host: puffer: FAILED: ")
    assert lines_with(proc.stderr, "setup-host: stopped at step puffer")
    assert "setup-host: links:" not in proc.stdout  # the steps after it did not run
    without_log = [line for line in snapshot(container).splitlines() if "puffertank-setup.log" not in line]
    assert without_log == [line for line in before.splitlines() if "puffertank-setup.log" not in line]
    sh(container, "/usr/local/bin/puffer --version && test ! -e /opt/puffertank/venv.previous")


#: A library whose constructor leaves a mark: what a user's ~/.pam_environment (LD_PRELOAD) would run.
PRELOAD_C = r"""
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void ran(void) {
    FILE *mark = fopen("/tmp/preload-ran", "a");
    if (mark) { fprintf(mark, "%d\n", (int)getuid()); fclose(mark); }
}
"""
ERIN = "puffer-setup-erin"


def _preload_library(tmp_path: pathlib.Path) -> pathlib.Path:
    if shutil.which("gcc") is None:
        pytest.fail("gcc is missing: apt-get install build-essential (.ci/run installs it)")
    (tmp_path / "mark.c").write_text(PRELOAD_C)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "mark.so"), str(tmp_path / "mark.c")], check=True)
    return tmp_path / "mark.so"


class BoxSshd:
    """Debian's openssh-server in the box, as a box runs it (its sshd_config, PAM, and setup-host's drop-in),
    on 127.0.0.1:``port`` of the shared network; a client key of the test's in ``folder``."""

    def __init__(self, container, folder: pathlib.Path) -> None:
        self.container, self.port, self.key = container, free_port(), folder / "client"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key)], check=True)
        # policy-rc.d: the package's service is not started (the test starts its own sshd below).
        no_service = "printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d"
        install = "apt-get -q install -y --no-install-recommends openssh-server"
        sh(container, f"{no_service} && DEBIAN_FRONTEND=noninteractive {install} >/dev/null", timeout=600)
        # Docker gives a container no audit rights, so pam_loginuid would end every session: the container's
        # limit, not the box's (a box's sshd keeps Debian's line).
        sh(container, r"sed -i -E 's/^session\s+required\s+pam_loginuid.so/session optional pam_loginuid.so/' "
                      "/etc/pam.d/sshd")  # fmt: skip
        sh(container, f"mkdir -p /run/sshd && /usr/sbin/sshd -p {self.port} -o ListenAddress=127.0.0.1 "
                      "-o PidFile=/run/sshd-test.pid")  # fmt: skip
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"the box's sshd did not listen on 127.0.0.1:{self.port}")

    def authorize(self, user: str) -> None:
        key = (self.key.parent / "client.pub").read_text().strip()
        keys = f"/home/{user}/.ssh/authorized_keys"
        sh(self.container, f"install -d -o {user} -g {user} -m 700 /home/{user}/.ssh && echo {shlex.quote(key)} > "
                           f"{keys} && chown {user}: {keys}")  # fmt: skip

    def options(self) -> list[str]:
        # LogLevel INFO: the server's "account has expired" reaches stderr.
        quiet = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=INFO"]
        return ["-F", "/dev/null", "-i", str(self.key), "-p", str(self.port), "-o", "BatchMode=yes", *quiet]

    def ssh(self, user: str, command: str) -> subprocess.CompletedProcess:
        return subprocess.run(["ssh", *self.options(), f"{user}@127.0.0.1", command], capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip

    def forward(self, user: str, local: int) -> subprocess.Popen:
        """``ssh -N -L LOCAL:127.0.0.1:PORT``: a forward to the box's own sshd, no session."""
        return subprocess.Popen(["ssh", *self.options(), "-N", "-o", "ExitOnForwardFailure=yes", "-L",
                                 f"{local}:127.0.0.1:{self.port}", f"{user}@127.0.0.1"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip

    def stop(self) -> None:
        sh(self.container, "kill $(cat /run/sshd-test.pid)", check=False)


def _banner_through(port: int, timeout: float = 20) -> bytes:
    """The first bytes read through a local forward on ``port`` (b"" when it never connects)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                with contextlib.suppress(OSError):
                    data = sock.recv(64)
                    if data:
                        return data
        time.sleep(0.2)
    return b""


def test_an_enrolled_users_code_stays_off_the_host_and_a_removed_user_has_no_way_in(box, tmp_path):
    """On the box as setup-host leaves it, with Debian's sshd and PAM: the attack first (a user's
    ~/.pam_environment sets LD_PRELOAD, and their library runs on the host as the login starts), then
    setup-host's PAM step stops it; an enrolled user's key forwards (ssh -L); once taken off the box the
    same key opens no session and no forward and the open forward ends; enrolled again, it opens."""
    container = box["container"]
    server = BoxSshd(container, tmp_path)
    library = _preload_library(tmp_path)
    try:
        server.authorize(USER)
        subprocess.run(["docker", "cp", str(library), f"{container.name}:/home/{USER}/mark.so"], check=True)
        sh(container, f"chown {USER}: /home/{USER}/mark.so && echo 'LD_PRELOAD DEFAULT=/home/{USER}/mark.so' > "
                      f"/home/{USER}/.pam_environment && chown {USER}: /home/{USER}/.pam_environment")  # fmt: skip
        uid = sh(container, f"id -u {USER}").stdout.strip()
        server.ssh(USER, "true")  # Debian's sshd PAM: user_readenv=1
        assert sh(container, "cat /tmp/preload-ran", check=False).stdout.split() == [uid]  # ran on the host

        proc, _ = setup_host(container, "--source", SRC, "--user", USER, "--user", ERIN)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert lines_with(proc.stdout, "setup-host: pam: set user_readenv=0 in /etc/pam.d/sshd")
        assert "user_readenv=1" not in sh(container, "cat /etc/pam.d/sshd").stdout
        sh(container, "rm /tmp/preload-ran")
        session = server.ssh(USER, "true")
        assert "puffertank" in session.stderr, session.stderr  # the login ran (it asked the broker: no engine here)
        assert sh(container, "test -e /tmp/preload-ran", check=False).returncode != 0  # nothing of theirs ran

        server.authorize(ERIN)
        local = free_port()
        tunnel = server.forward(ERIN, local)
        assert _banner_through(local).startswith(b"SSH-2.0"), "an enrolled user's ssh -L works"
        proc, _ = setup_host(container, "--source", SRC, "--user", USER, "--exact-users")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        line = lines_with(proc.stdout, f"setup-host: user {ERIN}: taken off this box")
        assert "account expired, sessions ended" in line[0], proc.stdout
        assert tunnel.wait(timeout=30) is not None  # the open forward ended with their sessions
        refused = server.ssh(ERIN, "true")
        expired = "Your account has expired"  # PAM's account check, after sshd accepted the key
        assert refused.returncode == 255 and expired in refused.stderr, refused.stderr
        again = server.forward(ERIN, free_port())
        assert again.wait(timeout=60) == 255 and expired in again.stderr.read()

        proc, _ = setup_host(container, "--source", SRC, "--user", USER, "--user", ERIN)
        assert lines_with(proc.stdout, f"setup-host: user {ERIN}: login shell /usr/local/bin/puffertank-login")
        assert "account opened again (it had expired)" in lines_with(proc.stdout, f"setup-host: user {ERIN}:")[0]
        opened = server.ssh(ERIN, "true")
        assert expired not in opened.stderr and "puffertank" in opened.stderr, opened.stderr
    finally:
        server.stop()
        sh(container, f"userdel -r {ERIN}; rm -f /tmp/preload-ran /home/{USER}/.pam_environment", check=False)


def test_dry_run_lists_every_step_and_changes_nothing(fresh):
    before = snapshot(fresh)
    proc, seconds = setup_host(fresh, "--dry-run", "--source", SRC, "--user", USER, "--image", "x:1")
    print(f"setup-host.sh --dry-run on a fresh container: {seconds:.1f} s\n{proc.stdout}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert snapshot(fresh) == before
    out = proc.stdout
    assert lines_with(out, "setup-host: packages: would run apt-get update, then install docker.io git vim tmux")
    assert lines_with(out, "setup-host: engine: not started")
    assert lines_with(out, f"setup-host: puffer: would install puffer-core[tank] from {SRC}")
    assert lines_with(out, "setup-host: links: would link /usr/local/bin/puffer")
    assert lines_with(out, f"setup-host: scripts: would write {LOGIN}, {BROKER}")
    assert lines_with(out, "setup-host: broker: would make group puffertank, /var/lib/puffertank/containers")
    assert lines_with(out, "setup-host: limits: would write /etc/puffertank/limits (each tank's limits, derived")
    assert lines_with(out, "setup-host: sshd: would write /etc/ssh/sshd_config.d/puffertank.conf (group puffertank")
    assert lines_with(out, f"setup-host: shells: would add {LOGIN} to /etc/shells")
    assert lines_with(out, "setup-host: image: would write x:1 to /etc/puffertank/image")
    pinned = "127.0.0.1:5000/puffertank@sha256:" + "ab" * 32
    proc, _ = setup_host(fresh, "--dry-run", "--source", SRC, "--image", pinned)
    pulls = f"setup-host: image: would pull {pinned} (verified by its digest), then write {pinned} to"
    assert lines_with(proc.stdout, pulls)
    assert lines_with(out, f"setup-host: user {USER}: would create it")
    assert len(lines_with(out, "NVIDIA")) == 1 and lines_with(out, "setup-host: nvidia: skipped")
    assert out.splitlines()[-1].startswith("setup-host: dry run in ")
    assert (
        "would change: packages, puffer, links, scripts, broker, limits, sshd, shells, image, user"
        in out.splitlines()[-1]
    )


FAKE_PCI = """
mkdir -p /tmp/fakesys/bus/pci/devices/{0000:00:02.0,0000:01:00.0,0000:01:00.1}
cd /tmp/fakesys/bus/pci/devices
echo 0x8086 > 0000:00:02.0/vendor; echo 0x030000 > 0000:00:02.0/class   # an Intel display
echo 0x10de > 0000:01:00.1/vendor; echo 0x040300 > 0000:01:00.1/class   # NVIDIA audio: not a GPU
"""


def test_a_faked_nvidia_gpu_lists_the_nvidia_steps_in_a_dry_run(fresh):
    sh(fresh, FAKE_PCI)
    proc, _ = setup_host(fresh, "--dry-run", "--source", SRC, env="PUFFER_SETUP_SYSFS=/tmp/fakesys")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert lines_with(proc.stdout, "setup-host: nvidia: skipped: no NVIDIA GPU"), "an NVIDIA audio device is no GPU"

    gpu = "/tmp/fakesys/bus/pci/devices/0000:01:00.0"
    sh(fresh, f"echo 0x10de > {gpu}/vendor && echo 0x030200 > {gpu}/class")
    before = snapshot(fresh)
    proc, _ = setup_host(fresh, "--dry-run", "--source", SRC, env="PUFFER_SETUP_SYSFS=/tmp/fakesys")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert snapshot(fresh) == before
    out = proc.stdout
    assert lines_with(out, "setup-host: nvidia: NVIDIA GPU at 0000:01:00.0 (class 0x030200)")
    driver = lines_with(out, "setup-host: nvidia-driver: would install nvidia-driver ")[0]
    assert "contrib non-free non-free-firmware" in driver
    assert lines_with(out, "setup-host: nvidia-toolkit: would add NVIDIA's apt repository")
    assert lines_with(out, "setup-host: nvidia-runtime: would run nvidia-ctk runtime configure --runtime=docker")
    assert not lines_with(out, "skipped")


def test_not_root_is_refused_in_one_line(fresh):
    proc, _ = setup_host(fresh, "--source", SRC, user="65534:65534")
    assert "must run as root (running as uid 65534)" in refused_in_one_line(proc)


@pytest.mark.parametrize(
    ("os_release", "found"),
    [
        (
            'ID=ubuntu\nVERSION_ID="22.04"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n',
            "ID=ubuntu VERSION_ID=22.04 (Ubuntu 22.04.4 LTS)",
        ),
        ('ID=debian\nVERSION_ID="11"\nPRETTY_NAME="Debian GNU/Linux 11 (bullseye)"\n', "ID=debian VERSION_ID=11"),
    ],
)
def test_another_system_is_refused_in_one_line_naming_it(fresh, os_release, found):
    sh(fresh, f"rm /etc/os-release && printf %s {shlex.quote(os_release)} > /etc/os-release")
    before = snapshot(fresh)
    proc, _ = setup_host(fresh, "--source", SRC, "--user", USER)
    line = refused_in_one_line(proc)
    assert "not Debian 12 (bookworm)" in line and found in line, line
    assert snapshot(fresh) == before


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--user", "Bad Name"], "--user 'Bad Name' is not a valid user name"),
        (["--user", "ok-user", "--user", "x;rm"], "--user 'x;rm' is not a valid user name"),
        (["--user", "root"], "--user root refused"),
        (["--user", "daemon"], "--user daemon refused: it is a system account (uid 1"),
        (["--image", "Not A Tag"], "--image 'Not A Tag' is not an image reference"),
        (["--docker-repo", "ubuntu"], "--docker-repo 'ubuntu' is not debian or docker"),
        (["--source", "/etc"], "/etc is not a puffer-core checkout"),
        (["--frobnicate"], "unknown option '--frobnicate'; see --help"),
        (["--memory", "lots"], "--memory 'lots' is not a size (e.g. 48G) or auto"),
        (["--pids", "1e4"], "--pids '1e4' is not a whole number or auto"),
        (["--tanks"], "--tanks needs a value"),
    ],
)
def test_bad_input_is_refused_in_one_line_and_changes_nothing(fresh, args, says):
    before = snapshot(fresh)
    proc, _ = setup_host(fresh, "--source", SRC, *args)
    assert says in refused_in_one_line(proc)
    assert snapshot(fresh) == before


OWNED = f"owned by {MALLORY} (uid "
CHECKOUT = "/srv/checkout"  # a second copy, for the cases that spoil a whole tree


@pytest.mark.parametrize(
    ("plant", "attack", "args", "script", "says"),
    [
        pytest.param(
            f"cp -a {SRC} {CHECKOUT} && chown -R {MALLORY}: {CHECKOUT}",
            f"echo 'print(1)' >> {CHECKOUT}/puffer_core/__init__.py",
            ["--source", CHECKOUT], SCRIPT,
            [f"--source {CHECKOUT} refused: {CHECKOUT} is {OWNED}", "mode 755",
             f"chown -R root:root {CHECKOUT} && chmod -R go-w {CHECKOUT}, or copy it (cp -r {CHECKOUT} "],
            id="owned-by-a-user",
        ),
        pytest.param(
            f"chgrp {MALLORY} {SRC}/puffer_core/env && chmod g+w {SRC}/puffer_core/env",
            f"echo 'print(1)' > {SRC}/puffer_core/env/planted.py",
            ["--source", SRC], SCRIPT,
            [f"{SRC}/puffer_core/env is owned by root but writable by group (mode 775)", "chmod -R go-w"],
            id="a-group-writable-folder",
        ),
        pytest.param(
            f"chmod o+w {SRC}/puffer_core/__init__.py",
            f"echo 'print(1)' >> {SRC}/puffer_core/__init__.py",
            ["--source", SRC], SCRIPT,
            [f"{SRC}/puffer_core/__init__.py is owned by root but writable by others (mode 646)"],
            id="a-file-others-can-write",
        ),
        pytest.param(
            f"chmod o+w {SRC}/compat_matrix/constraints-common.txt",
            f"echo '--extra-index-url http://127.0.0.1:9/' >> {SRC}/compat_matrix/constraints-common.txt",
            ["--source", SRC], SCRIPT,
            [f"{SRC}/compat_matrix/constraints-common.txt is owned by root but writable by others (mode 646)"],
            id="the-constraints-others-can-write",
        ),
        pytest.param(
            f"cp -a {SRC} /home/{MALLORY}/puffer-core",
            f"mv /home/{MALLORY}/puffer-core /home/{MALLORY}/x && mv /home/{MALLORY}/x /home/{MALLORY}/puffer-core",
            ["--source", f"/home/{MALLORY}/puffer-core"], SCRIPT,
            [f"refused: /home/{MALLORY}, a folder above it, is {OWNED}",
             "fix: copy the checkout to a folder root's alone", f"(chown root:root /home/{MALLORY} && "],
            id="a-folder-above-owned-by-a-user",
        ),
        pytest.param(
            f"install -o {MALLORY} -m 644 {SRC}/pyproject.toml /tmp/{MALLORY}.toml "
            f"&& ln -sf /tmp/{MALLORY}.toml {SRC}/pyproject.toml",
            f"echo '# mine' >> /tmp/{MALLORY}.toml",
            ["--source", SRC], SCRIPT,
            [f"{SRC}/pyproject.toml is a link to /tmp/{MALLORY}.toml; /tmp/{MALLORY}.toml is {OWNED}",
             f"cp --remove-destination /tmp/{MALLORY}.toml {SRC}/pyproject.toml"],
            id="a-root-link-to-a-user-file",
        ),
        pytest.param(
            f"cp -a {SRC} {CHECKOUT} && chown -R {MALLORY}: {CHECKOUT}",
            f"echo 'print(1)' >> {CHECKOUT}/puffer_core/__init__.py",
            [], f"{CHECKOUT}/tank/setup-host.sh",
            [f"the checkout holding this script, {CHECKOUT} (the default --source), refused: {CHECKOUT} is {OWNED}"],
            id="the-default-source",
        ),
        pytest.param(
            f"cp -a {SRC} {CHECKOUT} && chown {MALLORY}: {CHECKOUT}/tank/setup-host.sh",
            f"echo '# mine' >> {CHECKOUT}/tank/setup-host.sh",
            ["--source", SRC], f"{CHECKOUT}/tank/setup-host.sh",
            [f"this script refused: {CHECKOUT}/tank/setup-host.sh is {OWNED}",
             "run it from a copy of the checkout root owns"],
            id="the-script-itself",
        ),
    ],
)  # fmt: skip
def test_a_source_a_user_could_change_is_refused_in_one_line(fresh, plant, attack, args, script, says):
    """The attack first: the user MALLORY changes what root would build from (or run) as root.
    Then the run and the dry run are refused in one line naming the path, its owner and mode,
    and the fix, and nothing changes."""
    sh(fresh, f"useradd -m {MALLORY} && {plant}")
    sh(fresh, attack, user=MALLORY)
    before = snapshot(fresh)
    for dry in ([], ["--dry-run"]):
        proc, _ = setup_host(fresh, *dry, *args, "--user", USER, script=script)
        line = refused_in_one_line(proc)
        for fragment in says:
            assert fragment in line, (fragment, line)
    assert snapshot(fresh) == before


def test_a_ca_bundle_a_user_could_change_is_refused_in_one_line(fresh):
    """PIP_CERT, kept for root's pip, must be root's alone too (the attack: the user adds a CA)."""
    sh(fresh, f"useradd -m {MALLORY} && install -o {MALLORY} -m 644 /dev/null /tmp/ca.pem")
    sh(fresh, "echo '-----BEGIN CERTIFICATE-----' >> /tmp/ca.pem", user=MALLORY)
    proc, _ = setup_host(fresh, "--dry-run", "--source", SRC, env="PIP_CERT=/tmp/ca.pem")
    line = refused_in_one_line(proc)
    assert f"PIP_CERT=/tmp/ca.pem refused: /tmp/ca.pem is {OWNED}" in line and "chown root:root /tmp/ca.pem" in line


def test_docker_repository_out_of_reach_fails_in_one_line_and_leaves_no_repository_file(client):
    """--docker-repo docker on a box that cannot reach Docker's repository (its name points at
    the loopback here): the step installs curl, fails on the key's download, says what it did
    not undo, and leaves no key or source file; the steps after it do not run."""
    container = start(client, "docker-repo", extra_hosts={"download.docker.com": "127.0.0.1"})
    try:
        proc, seconds = setup_host(container, "--docker-repo", "docker", "--source", SRC, timeout=600)
        print(f"--docker-repo docker out of reach: {seconds:.1f} s\n{proc.stdout}{proc.stderr}")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        failed = lines_with(proc.stderr, "setup-host: docker-repo: FAILED: ")[0]
        assert "/linux/debian/gpg' exited" in failed and "not undone: installed ca-certificates curl" in failed
        assert lines_with(proc.stderr, "setup-host: stopped at step docker-repo")
        assert "setup-host: packages:" not in proc.stdout
        sh(container, "test ! -e /etc/apt/keyrings/docker.asc && test ! -e /etc/apt/sources.list.d/docker.sources")
        assert sh(container, "ls -A /etc/apt/keyrings /etc/apt/sources.list.d").stdout.split() == [
            "/etc/apt/keyrings:",
            "/etc/apt/sources.list.d:",
        ]
    finally:
        container.remove(force=True)


def test_docker_repository_dry_run_names_its_files(fresh):
    proc, _ = setup_host(fresh, "--dry-run", "--docker-repo", "docker", "--source", SRC)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert lines_with(
        out, "setup-host: docker-repo: would add Docker's apt repository /etc/apt/sources.list.d/docker.sources"
    )
    assert lines_with(out, "(installing ca-certificates curl first)")
    assert lines_with(
        out, "setup-host: packages: would run apt-get update, then install docker-ce docker-ce-cli containerd.io"
    )
