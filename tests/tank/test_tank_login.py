"""puffertank-login without an engine: the shell-style arguments, the box's image and the
requests it sends the broker (tests/tank/test_tank_broker_docker.py logs real users in)."""

from __future__ import annotations

import re

import pytest

from puffer_core.tank.box import login
from puffer_core.tank.errors import TankError


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], login.LoginArgs()),
        (["-l"], login.LoginArgs()),
        (["--fresh"], login.LoginArgs(fresh=True)),
        (["--image", "reg/pt:v1"], login.LoginArgs(image="reg/pt:v1")),
        (["--image=reg/pt:v1", "--fresh"], login.LoginArgs(image="reg/pt:v1", fresh=True)),
        (["-c", "echo hi"], login.LoginArgs(command="echo hi")),
        # As a shell takes it: what follows the command is $0 $1 ..., options included.
        (["--fresh", "-c", "echo $1", "zero", "--fresh"], login.LoginArgs(True, None, "echo $1", ("zero", "--fresh"))),
        (["--help", "--bogus"], login.LoginArgs(help=True)),
        (["--new", "exp1", "--fresh"], login.LoginArgs(fresh=True, container="exp1")),
        (["--list", "--json"], login.LoginArgs(action="list", json=True)),
        (["--stop=exp1"], login.LoginArgs(action="stop", container="exp1")),
    ],
)
def test_arguments_are_read_as_a_shell_reads_them(argv, expected):
    assert login.parse_args(argv) == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-x"], "'-x' is not an option of puffertank-login"),
        (["-c"], "-c needs a command"),
        (["--image"], "--image needs a value"),
        (["--image", " "], "--image needs a value"),
        (["--image=--help"], "--image '--help' starts with '-'"),
        (["--new", "../bob"], "--new '../bob' is not a container name"),
        (["--rm", "a.b"], "--rm 'a.b' is not a container name"),
        (["--json"], "--json goes with --list"),
    ],
)
def test_bad_arguments_are_one_line(argv, message):
    with pytest.raises(TankError, match=message) as caught:
        login.parse_args(argv)
    assert "\n" not in str(caught.value)


def test_the_login_command_sent_over_ssh_is_the_logins_own():
    assert login.self_command("puffer tank login --fresh") == login.LoginArgs(fresh=True)
    assert login.self_command("puffer tank login --fresh -c 'cat ~/x'") == login.LoginArgs(True, None, "cat ~/x")
    assert login.self_command("puffer tank run -- ls") is None
    assert login.self_command("echo 'unbalanced") is None
    assert login.self_command(None) is None


def test_the_boxs_image_is_read_from_its_file(tmp_path):
    path = tmp_path / "image"
    assert login.box_image(str(path)) == "puffertank:latest"  # no file
    path.write_text("127.0.0.1:5000/puffertank:lock-abc  # pulled\n")
    assert login.box_image(str(path)) == "127.0.0.1:5000/puffertank:lock-abc"
    path.write_text("\n")
    assert login.box_image(str(path)) == "puffertank:latest"
    pinned = "127.0.0.1:5000/puffertank@sha256:" + "ab" * 32
    path.write_text(pinned + "\n")
    assert login.box_image(str(path)) == pinned  # a digest: what a verified pull brought
    for bad in ("--privileged", "a;b", "UPPER:x"):
        path.write_text(bad + "\n")
        with pytest.raises(TankError, match=f"the box's image in {path}, '{re.escape(bad)}', .*setup-host.sh --image"):
            login.box_image(str(path))


def test_the_login_asks_the_broker_for_a_session_with_the_terminal_and_locale_only():
    environ = {"TERM": "xterm", "LC_ALL": "C.UTF-8", "AWS_SECRET": "x", "PATH": "/usr/bin", "PYTHONPATH": "/tmp"}
    argv = login.broker_argv(login.LoginArgs(), environ, tty=True, cwd="/home/alice/src")
    assert argv == ["session", "--tty", "--cwd", "/home/alice/src", "--env", "LC_ALL=C.UTF-8", "--env", "TERM=xterm"]
    fresh = login.broker_argv(login.LoginArgs(fresh=True, container="exp1", image="pt:v2"), {}, tty=False, cwd=None)
    assert fresh == ["session", "--container", "exp1", "--fresh", "--image", "pt:v2"]


def test_commands_reach_the_broker_as_a_shell_gives_them():
    argv = login.broker_argv(login.LoginArgs(command="scp -t ~/x", command_args=("a0",)), {}, tty=False, cwd=None)
    assert argv == ["session", "-c", "scp -t ~/x", "a0"]
    # sshd's ForceCommand: the client's command arrives in SSH_ORIGINAL_COMMAND.
    argv = login.broker_argv(login.LoginArgs(), {"SSH_ORIGINAL_COMMAND": "rsync --server ."}, tty=False, cwd=None)
    assert argv == ["session", "-c", "rsync --server ."]


def test_under_sshds_force_command_the_clients_command_is_the_session():
    """setup-host's sshd drop-in: ForceCommand LOGIN, so sshd runs ``LOGIN -c LOGIN`` with the client's
    command (or none) in SSH_ORIGINAL_COMMAND, and an in-process sftp server as ``internal-sftp``."""
    path = "/usr/local/bin/puffertank-login"
    args = login.forced(login.parse_args(["-c", path]), path)
    assert args == login.LoginArgs()
    assert login.broker_argv(args, {}, tty=True, cwd=None) == ["session", "--tty"]  # an interactive login
    argv = login.broker_argv(args, {"SSH_ORIGINAL_COMMAND": "nvidia-smi -L"}, tty=False, cwd=None)
    assert argv == ["session", "-c", "nvidia-smi -L"]
    sftp = login.broker_argv(args, {"SSH_ORIGINAL_COMMAND": "internal-sftp -l INFO"}, tty=False, cwd=None)
    assert sftp == ["session", "-c", "/usr/lib/openssh/sftp-server -l INFO"]  # served in the tank, not by sshd
    # Only the login's own path, alone, is the ForceCommand's: another -c is the user's command.
    assert login.forced(login.parse_args(["-c", "ls"]), path).command == "ls"
    assert login.forced(login.parse_args(["-c", path, "x"]), path).command == path


def test_managing_ones_containers():
    assert login.broker_argv(login.parse_args(["--list", "--json"]), {}, False, None) == ["list", "--json"]
    assert login.broker_argv(login.parse_args(["--stop", "exp1"]), {}, False, None) == ["stop", "exp1"]
    assert login.broker_argv(login.parse_args(["--rm=default"]), {}, False, None) == ["rm", "default"]
    assert login.self_command("puffer tank login --new exp1 -c 'nvidia-smi'") == login.LoginArgs(
        command="nvidia-smi", container="exp1"
    )


def test_a_user_outside_group_puffertank_is_told_to_enrol(monkeypatch):
    monkeypatch.setattr(login, "_enrolled", lambda group: False)
    monkeypatch.delenv("PUFFERTANK", raising=False)
    with pytest.raises(TankError, match=r"is not enrolled on this box \(group puffertank\): .*setup-host.sh --user"):
        login.login(login.LoginArgs(), environ={})
