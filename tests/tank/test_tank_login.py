"""puffer tank login without an engine: the shell-style arguments, the box's image and the
docker command lines (tests/tank/test_tank_login_docker.py logs real users in)."""

from __future__ import annotations

import re

import pytest

from puffer_core.tank import login
from puffer_core.tank.errors import NoEngineError, TankError


def request(**changes) -> login.LoginRequest:
    base = dict(user="alice", uid=1001, gid=1002, group="alice", home="/home/alice", image="puffertank:latest")
    return login.LoginRequest(**{**base, "cwd": "/home/alice", **changes})


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
    ],
)
def test_arguments_are_read_as_a_shell_reads_them(argv, expected):
    assert login.parse_args(argv) == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-x"], "'-x' is not an option of puffertank-login"),
        (["-c"], "-c needs a command"),
        (["--image"], "--image needs a tag"),
        (["--image", " "], "--image needs a tag"),
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


def test_container_names_are_the_users():
    assert login.container_name("alice") == "puffertank-alice"
    assert request(user="bob.s").name == "puffertank-bob.s"
    with pytest.raises(TankError, match="cannot name a container"):
        login.container_name("al ice")


def test_the_container_is_made_as_tank_shell_makes_one_and_outlives_sessions():
    argv = login.create_argv(request())
    joined = " ".join(argv)
    assert argv[:5] == ["run", "--detach", "--init", "--name", "puffertank-alice"]
    assert "--security-opt no-new-privileges --cap-drop ALL" in joined
    assert "--user 1001:1002" in joined and "--cap-add" not in joined
    assert '--mount type=bind,"source=/home/alice","target=/home/alice" --workdir /home/alice' in joined
    assert f"--label {login.LOGIN_LABEL}=1001" in joined
    assert "--restart unless-stopped" in joined  # a hard-reset box gives it back
    assert argv[-4:] == ["--", "puffertank:latest", "sleep", "infinity"]  # "--": the image is never an option
    assert "--gpus" not in argv and login.create_argv(request(), gpus=True)[-6:-4] == ["--gpus", "all"]


def test_sessions_pass_the_terminal_and_locale_only():
    environ = {"TERM": "xterm", "LC_ALL": "C.UTF-8", "AWS_SECRET": "x", "PATH": "/usr/bin", "SSH_CONNECTION": "a b"}
    argv = login.session_argv(request(tty=True), environ)
    assert argv[:3] == ["exec", "--interactive", "--tty"]
    assert argv[-4:] == ["--", "puffertank-alice", "bash", "-l"]
    assert ["--env", "TERM=xterm"] == argv[argv.index("TERM=xterm") - 1 : argv.index("TERM=xterm") + 1]
    assert "LC_ALL=C.UTF-8" in argv and "SSH_CONNECTION=a b" in argv
    assert not any("SECRET" in word or word.startswith("PATH=") for word in argv)


def test_commands_run_without_a_terminal_so_byte_streams_stay_untouched():
    argv = login.session_argv(request(command="scp -t ~/x", command_args=("a0",), cwd="/home/alice/src"), {})
    assert argv == ["exec", "--interactive", "--workdir", "/home/alice/src", "--", "puffertank-alice", "bash", "-c",
                    "scp -t ~/x", "a0"]  # fmt: skip


def test_another_users_container_of_that_name_is_refused():
    ours = {"Config": {"Labels": {login.LOGIN_LABEL: "1001"}, "User": "1001:1002"}}
    login.check_owner(ours, request())
    for found in (
        {"Config": {"Labels": {}, "User": ""}},
        {"Config": {"Labels": {login.LOGIN_LABEL: "1003"}, "User": "1001:1002"}},
        {"Config": {"Labels": {login.LOGIN_LABEL: "1001"}, "User": "0:0"}},
    ):
        with pytest.raises(TankError, match="a container named puffertank-alice exists on this box but is not alice's"):
            login.check_owner(found, request())


def test_engine_failures_become_one_line_naming_the_fix(tmp_path):
    docker = login.DockerCli("alice", path="/usr/bin/true")
    no_engine = docker.error("Cannot connect to the Docker daemon at unix:///var/run/docker.sock.\n", "inspect")
    assert isinstance(no_engine, NoEngineError) and "systemctl start docker" in str(no_engine)
    denied = docker.error(
        "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock", "run"
    )
    assert isinstance(denied, NoEngineError) and "tank/setup-host.sh --user alice" in str(denied)
    other = docker.error("Error response from daemon: boom\nsecond line", "run")
    assert str(other) == "docker run failed: Error response from daemon: boom second line"
