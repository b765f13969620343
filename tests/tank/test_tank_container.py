"""`puffer tank shell` / `run` / `lock` without a Docker engine: the `docker run` command
line, the GPU decision, the uid:gid, the lock's parsing and digest, and the one-line errors
(no engine, no client, bad arguments). The real runs are in tests/tank/test_tank_docker.py."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from puffer_core.tank.container import (
    WORKSPACE,
    RunRequest,
    check_env,
    check_mount,
    check_shm_size,
    docker_argv,
    parse_user,
    use_gpus,
    workdir_for,
)
from puffer_core.tank.errors import TankError
from puffer_core.tank.lock import build_constraints, local_projects, lock_digest, parse_lock

ROOT = pathlib.Path(__file__).resolve().parents[2]

LOCK = """# PufferTank lock: the Python packages of this image, as pip list --format=freeze reports them.
# python 3.11.2
Gymnasium==1.2.0
numpy==2.4.6
puffer-core==0.1.0
puffer_plugin_nethack==0.1.0
torch==2.5.1+cu124
"""


def test_docker_argv_mounts_runs_as_the_user_and_keeps_the_command_verbatim(tmp_path):
    request = RunRequest(
        image="puffertank:dev",
        mount=tmp_path,
        command=("python", "-c", "print(1)", "--flag"),
        user=(1234, 99),
        workdir=f"{WORKSPACE}/sub",
        env=("A=1",),
        quiet=True,
        network="none",
    )
    argv = docker_argv(request)
    assert argv[:5] == ["docker", "run", "--rm", "--init", "--interactive"]
    assert "--tty" not in argv and "--gpus" not in argv
    assert argv[argv.index("--user") + 1] == "1234:99"
    assert argv[argv.index("--mount") + 1] == f'type=bind,"source={tmp_path}",target={WORKSPACE}'
    assert argv[argv.index("--workdir") + 1] == f"{WORKSPACE}/sub"
    assert argv[argv.index("--network") + 1] == "none"
    assert argv[argv.index("--shm-size") + 1] == "1g"
    assert ["--env", "PUFFERTANK_QUIET=1"] == argv[
        argv.index("PUFFERTANK_QUIET=1") - 1 : argv.index("PUFFERTANK_QUIET=1") + 1
    ]
    assert ["--env", "A=1"] == argv[argv.index("A=1") - 1 : argv.index("A=1") + 1]
    # The image, then the command exactly as given (docker run stops parsing at the image).
    assert argv[-5:] == ["puffertank:dev", "python", "-c", "print(1)", "--flag"]


def test_docker_argv_tty_gpus_and_a_mount_path_with_commas_and_quotes():
    odd = pathlib.Path('/data/a,b:c/"q"')
    argv = docker_argv(RunRequest(image="puffertank:latest", mount=odd, tty=True, gpus=True))
    assert "--tty" in argv and argv[argv.index("--gpus") + 1] == "all"
    # A CSV field: the comma and colon stay in the path, the quotes are doubled.
    assert argv[argv.index("--mount") + 1] == f'type=bind,"source=/data/a,b:c/""q""",target={WORKSPACE}'
    assert argv[-1] == "puffertank:latest"  # no command: the image's CMD (bash)


@pytest.mark.parametrize(
    ("mode", "runtimes", "expected"),
    [
        ("auto", {"runc": {}, "nvidia": {"path": "nvidia-container-runtime"}}, True),
        ("auto", {"runc": {}, "io.containerd.runc.v2": {}}, False),
        ("auto", None, False),
        ("all", {"runc": {}}, True),  # asked for: docker says so itself if it cannot
        ("none", {"nvidia": {}}, False),
    ],
)
def test_gpus_pass_through_only_with_the_nvidia_runtime_unless_asked(mode, runtimes, expected):
    assert use_gpus(mode, runtimes) is expected


def test_gpus_mode_is_checked():
    with pytest.raises(TankError, match="give one of auto, all, none"):
        use_gpus("some", {})


def test_user_defaults_to_the_caller_and_parses_uid_gid():
    assert parse_user(None) == (os.getuid(), os.getgid())
    assert parse_user("1234:99") == (1234, 99)
    assert parse_user("1234") == (1234, 1234)
    for bad in ("abc", "1:2:3", "-1:0", "1000:", "99999999999:1", "root:root"):
        with pytest.raises(TankError, match=r"is not UID:GID: give numbers, e\.g\. --user 1000:1000"):
            parse_user(bad)


def test_shm_size_and_env_are_checked():
    assert check_shm_size("2G") == "2g" and check_shm_size("512m") == "512m"
    with pytest.raises(TankError, match="is not a size"):
        check_shm_size("lots")
    assert check_env(["A=1", "B_2="]) == ("A=1", "B_2=")
    for bad in ("A", "=1", "1A=2", "A B=1"):
        with pytest.raises(TankError, match="is not KEY=VALUE"):
            check_env([bad])


def test_workdir_follows_the_working_folder_inside_the_mount(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert workdir_for(tmp_path, tmp_path) == WORKSPACE
    assert workdir_for(tmp_path, tmp_path / "a" / "b") == f"{WORKSPACE}/a/b"
    assert workdir_for(tmp_path / "a", tmp_path) == WORKSPACE  # outside the mount


def test_mount_must_be_an_existing_folder(tmp_path):
    (tmp_path / "file").write_text("x")
    assert check_mount(str(tmp_path), lambda: None) == tmp_path.resolve()
    assert check_mount(None, lambda: ROOT) == ROOT  # the checkout by default
    with pytest.raises(TankError, match="no such folder; give an existing folder"):
        check_mount(str(tmp_path / "absent"), lambda: ROOT)
    with pytest.raises(TankError, match="is a file, not a folder"):
        check_mount(str(tmp_path / "file"), lambda: ROOT)

    def outside():
        raise TankError("not inside a checkout")

    with pytest.raises(TankError, match="give the folder to mount with --mount DIR"):
        check_mount(None, outside)


def test_lock_parses_digests_and_turns_into_build_constraints():
    packages = parse_lock(LOCK)
    assert packages["gymnasium"] == "1.2.0" and packages["puffer-plugin-nethack"] == "0.1.0"
    assert packages["torch"] == "2.5.1+cu124"
    # The digest ignores comments, order and name spelling, and sees every version.
    reordered = "gymnasium==1.2.0\ntorch==2.5.1+cu124\nnumpy==2.4.6\npuffer-plugin-nethack==0.1.0\npuffer_core==0.1.0\n"
    assert lock_digest(parse_lock(reordered)) == lock_digest(packages)
    assert lock_digest(parse_lock(reordered.replace("2.4.6", "2.4.5"))) != lock_digest(packages)
    # The checkout's own projects are installed from source: not pinned by the rebuild.
    text = build_constraints(LOCK, local_projects(ROOT), "/tmp/lock.txt").decode()
    assert text.splitlines()[0].startswith("# PufferTank build constraints from lock.txt")
    assert text.splitlines()[1:] == ["gymnasium==1.2.0", "numpy==2.4.6", "torch==2.5.1+cu124"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("numpy>=2\n", "line 1: 'numpy>=2' is not NAME==VERSION"),
        ("# only comments\n", "names no package"),
        ("numpy==2 ; python_version<'4'\n", "is not NAME==VERSION"),
    ],
)
def test_a_bad_lock_names_the_line(text, message):
    with pytest.raises(TankError, match=message):
        parse_lock(text, "FILE")


def _cli(args: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "puffer_core.tank.cli", *args],
        cwd=ROOT,
        env={**os.environ, "PUFFER_DEBUG": "", **env},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("args", [["run", "--", "true"], ["lock", "puffertank:latest"]])
def test_no_engine_is_one_line_and_exit_2(tmp_path, args):
    url = f"unix://{tmp_path}/absent.sock"
    proc = _cli(args, DOCKER_HOST=url)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and f"no Docker engine answered at {url}: start one (dockerd)" in proc.stderr


def test_no_docker_client_is_one_line_and_exit_2(tmp_path):
    proc = _cli(["run", "--", "true"], PATH=str(tmp_path))  # a PATH without docker
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "the docker command-line client is not on PATH" in proc.stderr


def test_shell_without_a_terminal_points_at_run():
    proc = _cli(["shell"])
    assert proc.returncode == 1
    assert "puffer tank shell needs a terminal (stdin is not a TTY)" in proc.stderr
    assert "puffer tank run -- CMD" in proc.stderr


def test_build_lock_is_checked_before_the_engine(tmp_path):
    (tmp_path / "lock.txt").write_text("numpy>=2\n")
    proc = _cli(["build", "--stage", "final", "--lock", str(tmp_path / "lock.txt"), "--network", "host"])
    assert proc.returncode == 1 and "line 1: 'numpy>=2' is not NAME==VERSION" in proc.stderr
    proc = _cli(["build", "--stage", "final", "--lock", str(tmp_path / "lock.txt")])
    assert proc.returncode == 1 and "--lock needs --network host" in proc.stderr
    proc = _cli(["build", "--stage", "final", "--lock", str(tmp_path / "absent.txt"), "--network", "host"])
    assert proc.returncode == 1 and "no such file; write one with puffer tank lock IMAGE > FILE" in proc.stderr
