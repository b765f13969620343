"""tank/setup-host.sh for real, in throw-away Debian 12 containers (the debootstrapped base
``tank/ci-setup.sh`` makes): the full non-GPU install once (apt from the Debian mirror,
puffer-core's dependencies from the package index), then a second run that changes nothing,
a failed install that puts the previous venv back, and the cheap paths on fresh containers:
--dry-run, a faked NVIDIA GPU, not root, not Debian 12, bad --user names.

Each container carries the label ``org.puffer.test=setup-host`` and is removed after its
tests. The checkout is mounted read-only at /src. PID 1 is docker-init, not systemd: package
scripts start no service there, and the engine step says it did not start the engine.

Environment: PUFFERTANK_DEBIAN_IMAGE (base image), PUFFERTANK_CA_CERT (CA bundle pip in the
container trusts, default the system bundle when present).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time
import uuid

import pytest
from docker_tank import BASE_IMAGE, ROOT

from puffer_core.bench.box import CONTAINER_CA, machine_ca, machine_pip_env

pytestmark = [pytest.mark.docker, pytest.mark.slow]

SCRIPT = "/src/tank/setup-host.sh"
LABEL = "org.puffer.test"
USER = "puffer-setup-alice"
LOGIN = "/usr/local/bin/puffertank-login"
PACKAGES = ["docker.io", "git", "vim", "tmux", "curl", "ca-certificates", "python3", "python3-venv"]
INSTALL_TIMEOUT = 1200
# What a run must leave alone: every package, account, file (size, mode, mtime) and apt list.
SNAPSHOT = r"""
dpkg-query -W -f='${Package} ${Version} ${Status}\n'
cat /etc/shells /etc/passwd /etc/group /etc/shadow /etc/gshadow
find /etc /opt /home /usr/local /var/lib/apt /var/lib/dpkg /var/log -xdev \
    \( -type d -printf '%p/ %m\n' \) -o -printf '%p %s %m %T@ %l\n' | LC_ALL=C sort
"""


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


def setup_host(container, *args: str, env: str = "", user: str = "root", timeout: float = 120):
    """tank/setup-host.sh with ARGS in the container, and the seconds it took."""
    started = time.monotonic()
    command = f"{env} bash {SCRIPT} {shlex.join(args)}"
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
    """One container through the full install (the expensive part, done once), shared by the module."""
    container = start(client, "box")
    try:
        proc, seconds = setup_host(
            container, "--source", "/src", "--user", USER, "--image", "puffertank-ci:latest", timeout=INSTALL_TIMEOUT
        )
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
    assert sh(container, f"readlink {LOGIN}").stdout.strip() == "/opt/puffertank/venv/bin/puffertank-login"
    assert sh(container, f"grep -cxF {LOGIN} /etc/shells").stdout.strip() == "1"
    assert sh(container, f"getent passwd {USER} | cut -d: -f6,7").stdout.strip() == f"/home/{USER}:{LOGIN}"
    assert "docker" in sh(container, f"id -nG {USER}").stdout.split()
    assert sh(container, "cat /etc/puffertank/image").stdout == "puffertank-ci:latest\n"
    assert "root-equivalent" in lines_with(out, f"setup-host: user {USER}: created")[0]
    assert lines_with(out, "setup-host: engine: not started: systemd is not PID 1")
    assert len(lines_with(out, "NVIDIA")) == 1
    assert lines_with(out, "setup-host: nvidia: skipped: no NVIDIA GPU found on the PCI bus")
    done = out.splitlines()[-1]
    assert re.fullmatch(
        rf"setup-host: done in \d+\.\d s \(changed: packages, puffer, links, shells, image, user {USER}\)", done
    ), done
    assert re.search(r"^setup-host: step times: packages \d+\.\d s, engine", out, re.M), out


def test_second_run_changes_nothing_and_says_so(box):
    container = box["container"]
    before = snapshot(container)
    proc, seconds = setup_host(container, "--source", "/src", "--user", USER, "--image", "puffertank-ci:latest")
    print(f"setup-host.sh second run: {seconds:.1f} s (first: {box['seconds']:.1f} s)\n{proc.stdout}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""
    assert snapshot(container) == before
    for step in ("packages", "puffer", "links", "shells", "image", f"user {USER}"):
        assert lines_with(proc.stdout, f"setup-host: {step}: already in place"), (step, proc.stdout)
    assert re.fullmatch(r"setup-host: done in \d+\.\d s \(nothing changed\)", proc.stdout.splitlines()[-1])


def test_a_failed_install_puts_the_previous_venv_back(box):
    container = box["container"]
    # A copy of the checkout whose pyproject.toml pip cannot read: the puffer step fails after
    # moving the venv aside and making a new one.
    sh(container, "rm -rf /tmp/broken && mkdir /tmp/broken && cp -r /src/pyproject.toml /src/README.md "
       "/src/puffer_core /tmp/broken/ && echo 'this is [not toml' >> /tmp/broken/pyproject.toml")  # fmt: skip
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


def test_dry_run_lists_every_step_and_changes_nothing(fresh):
    before = snapshot(fresh)
    proc, seconds = setup_host(fresh, "--dry-run", "--source", "/src", "--user", USER, "--image", "x:1")
    print(f"setup-host.sh --dry-run on a fresh container: {seconds:.1f} s\n{proc.stdout}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert snapshot(fresh) == before
    out = proc.stdout
    assert lines_with(out, "setup-host: packages: would run apt-get update, then install docker.io git vim tmux")
    assert lines_with(out, "setup-host: engine: not started")
    assert lines_with(out, "setup-host: puffer: would install puffer-core[tank] from /src")
    assert lines_with(out, "setup-host: links: would link /usr/local/bin/puffer")
    assert lines_with(out, f"setup-host: shells: would add {LOGIN} to /etc/shells")
    assert lines_with(out, "setup-host: image: would write x:1 to /etc/puffertank/image")
    assert lines_with(out, f"setup-host: user {USER}: would create it")
    assert len(lines_with(out, "NVIDIA")) == 1 and lines_with(out, "setup-host: nvidia: skipped")
    assert out.splitlines()[-1].startswith("setup-host: dry run in ")
    assert "would change: packages, puffer, links, shells, image, user" in out.splitlines()[-1]


FAKE_PCI = """
mkdir -p /tmp/fakesys/bus/pci/devices/{0000:00:02.0,0000:01:00.0,0000:01:00.1}
cd /tmp/fakesys/bus/pci/devices
echo 0x8086 > 0000:00:02.0/vendor; echo 0x030000 > 0000:00:02.0/class   # an Intel display
echo 0x10de > 0000:01:00.1/vendor; echo 0x040300 > 0000:01:00.1/class   # NVIDIA audio: not a GPU
"""


def test_a_faked_nvidia_gpu_lists_the_nvidia_steps_in_a_dry_run(fresh):
    sh(fresh, FAKE_PCI)
    proc, _ = setup_host(fresh, "--dry-run", "--source", "/src", env="PUFFER_SETUP_SYSFS=/tmp/fakesys")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert lines_with(proc.stdout, "setup-host: nvidia: skipped: no NVIDIA GPU"), "an NVIDIA audio device is no GPU"

    gpu = "/tmp/fakesys/bus/pci/devices/0000:01:00.0"
    sh(fresh, f"echo 0x10de > {gpu}/vendor && echo 0x030200 > {gpu}/class")
    before = snapshot(fresh)
    proc, _ = setup_host(fresh, "--dry-run", "--source", "/src", env="PUFFER_SETUP_SYSFS=/tmp/fakesys")
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
    proc, _ = setup_host(fresh, "--source", "/src", user="65534:65534")
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
    proc, _ = setup_host(fresh, "--source", "/src", "--user", USER)
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
    ],
)
def test_bad_input_is_refused_in_one_line_and_changes_nothing(fresh, args, says):
    before = snapshot(fresh)
    proc, _ = setup_host(fresh, "--source", "/src", *args)
    assert says in refused_in_one_line(proc)
    assert snapshot(fresh) == before


def test_docker_repository_out_of_reach_fails_in_one_line_and_leaves_no_repository_file(client):
    """--docker-repo docker on a box that cannot reach Docker's repository (its name points at
    the loopback here): the step installs curl, fails on the key's download, says what it did
    not undo, and leaves no key or source file; the steps after it do not run."""
    container = start(client, "docker-repo", extra_hosts={"download.docker.com": "127.0.0.1"})
    try:
        proc, seconds = setup_host(container, "--docker-repo", "docker", "--source", "/src", timeout=600)
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
    proc, _ = setup_host(fresh, "--dry-run", "--docker-repo", "docker", "--source", "/src")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert lines_with(
        out, "setup-host: docker-repo: would add Docker's apt repository /etc/apt/sources.list.d/docker.sources"
    )
    assert lines_with(out, "(installing ca-certificates curl first)")
    assert lines_with(
        out, "setup-host: packages: would run apt-get update, then install docker-ce docker-ce-cli containerd.io"
    )
