"""The broker without an engine: its grammar (a property test over generated argument lists and
environments), who it serves, the box's images, root's record of ownership and the docker command
lines it builds. tests/tank/test_tank_broker_docker.py runs it for real, through sudo and sshd."""

from __future__ import annotations

import json
import os
import pathlib
import stat

import pytest
from hypothesis import given, settings, strategies as st

from puffer_core.tank.box import broker
from puffer_core.tank.box.broker import (
    BrokerConfig,
    BrokerError,
    Caller,
    Request,
    caller_of,
    choose_image,
    container_name,
    create_argv,
    parse_request,
    session_argv,
)
from puffer_core.tank.box.limits import GIB, TankLimits

ALICE = Caller(uid=1001, gid=1002, user="alice", group="alice", home="/home/alice")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["session"], Request("session")),
        (["session", "--tty", "--fresh"], Request("session", tty=True, fresh=True)),
        (["session", "--container", "exp1"], Request("session", container="exp1")),
        (["session", "--cwd", "/home/alice/src/../x"], Request("session", cwd="/home/alice/x")),
        (["session", "--env", "TERM=xterm", "--env", "LC_ALL=C.UTF-8"],
         Request("session", env=(("TERM", "xterm"), ("LC_ALL", "C.UTF-8")))),
        (["session", "--image", "puffertank:v2"], Request("session", image="puffertank:v2")),
        # As a shell takes it: what follows -c is the command and its $0 $1 ..., options included.
        (["session", "-c", "echo $1", "zero", "--fresh"], Request("session", command=("echo $1", "zero", "--fresh"))),
        (["list"], Request("list")),
        (["list", "--json"], Request("list", json=True)),
        (["stop", "default"], Request("stop")),
        (["rm", "exp1"], Request("rm", container="exp1")),
    ],
)  # fmt: skip
def test_the_grammar(argv, expected):
    assert parse_request(argv) == expected


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "no request"),
        (["exec"], "'exec' is not session, list, stop NAME or rm NAME"),
        (["session", "--user", "0"], "'--user' is not an option of session"),
        (["session", "--privileged"], "'--privileged' is not an option of session"),
        (["session", "--container", "../bob"], "container name '../bob'"),
        (["session", "--container", "x.y"], "container name 'x.y'"),
        (["session", "--cwd", "relative"], "--cwd takes an absolute path"),
        (["session", "--env", "LD_PRELOAD=/tmp/x.so"], "only the terminal's, the locale's and ssh's"),
        (["session", "--env", "PYTHONPATH=/tmp"], "only the terminal's"),
        (["session", "--env", "TERM=a\nb"], "only the terminal's"),
        (["session", "--image", "--help"], "starts with '-'"),
        (["session", "-c"], "-c needs a command"),
        (["session", "--container"], "'--container' is not an option"),
        (["list", "--all"], "is not session, list"),
        (["stop"], "is not session, list"),
        (["rm", "a", "b"], "is not session, list"),
        (["rm", "bob/../x"], "container name"),
        (["session", "-c", "x\x00y"], "NUL byte"),
        (["session"] + ["--tty"] * 5000, "too many arguments"),
    ],
)
def test_anything_else_is_refused_in_one_line(argv, says):
    with pytest.raises(BrokerError) as caught:
        parse_request(argv)
    assert says in str(caught.value) and "\n" not in str(caught.value)


WORDS = st.one_of(
    st.sampled_from(["session", "list", "stop", "rm", "--container", "--fresh", "--tty", "--cwd", "--env",
                     "--image", "-c", "--json", "default", "--user", "--volume", "/", "-v", "--privileged"]),
    st.text(max_size=40),
)  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(st.lists(WORDS, max_size=12))
def test_whatever_is_sent_the_request_stays_inside_the_grammar(argv):
    """A property: any argument list is refused in one line, or becomes a request whose every
    field is one the broker allows; the docker command it leads to has no option of the caller's."""
    try:
        request = parse_request(argv)
    except BrokerError as exc:
        assert "\n" not in str(exc)
        return
    assert request.verb in ("session", "list", "stop", "rm")
    assert request.container == "default" or broker.NAME_RE.match(request.container)
    assert all(broker.ENV_KEY_RE.match(key) and broker.ENV_VALUE_RE.match(value) for key, value in request.env)
    assert request.cwd is None or request.cwd.startswith("/")
    if request.verb != "session":
        return
    argv = session_argv(ALICE, request)
    split = argv.index("--")
    options = argv[:split]
    assert argv[split + 1] == container_name(ALICE, request.container)  # never another's, never an option
    assert "--user" not in options and "--privileged" not in options and "-v" not in options
    workdir = options[options.index("--workdir") + 1]
    assert workdir == "/home/alice" or workdir.startswith("/home/alice/")


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=12), st.text(max_size=20), max_size=8), st.integers(0, 70000))
def test_the_caller_comes_from_sudo_uid_alone(environ, uid):
    """Whatever else the environment holds, the caller is SUDO_UID's account, or the call is refused."""
    environ = {**environ, "SUDO_UID": str(uid), "SUDO_USER": "root", "USER": "root"}
    config = BrokerConfig(group="root")  # the test runs as root: a group every account may be checked against
    try:
        caller = caller_of(environ, config)
    except BrokerError as exc:
        assert "\n" not in str(exc)
        return
    assert caller.uid == uid != 0


def test_root_and_strangers_are_not_served(monkeypatch):
    with pytest.raises(BrokerError, match="no SUDO_UID"):
        caller_of({}, BrokerConfig())
    with pytest.raises(BrokerError, match="root runs docker itself"):
        caller_of({"SUDO_UID": "0"}, BrokerConfig())
    with pytest.raises(BrokerError, match="is not enrolled here \\(group no-such-group-here\\)"):
        caller_of({"SUDO_UID": str(os.getuid() or 65534)}, BrokerConfig(group="no-such-group-here"))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(BrokerError, match="runs as root through sudo"):
        caller_of({"SUDO_UID": "1000"}, BrokerConfig())


def test_images_come_from_the_box_and_the_admins_list(tmp_path):
    config = BrokerConfig(image_file=str(tmp_path / "image"), allowed_file=str(tmp_path / "images"))
    assert choose_image(Request("session"), config) == "puffertank:latest"  # no file
    (tmp_path / "image").write_text("127.0.0.1:5000/pt@sha256:" + "ab" * 32 + "\n")
    assert choose_image(Request("session"), config).endswith("ab" * 32)
    with pytest.raises(BrokerError, match="--image busybox is not one of this box's images"):
        choose_image(Request("session", image="busybox"), config)
    pinned = "127.0.0.1:5000/pt:v2@sha256:" + "cd" * 32
    (tmp_path / "images").write_text(f"# others the admin allows\nbusybox\n{pinned}  # the next one\n")
    # Asked for by its tag or by the whole line, made from the digest: the tag never chooses the bytes.
    for asked in ("127.0.0.1:5000/pt:v2", pinned, "127.0.0.1:5000/pt@sha256:" + "cd" * 32):
        assert choose_image(Request("session", image=asked), config) == "127.0.0.1:5000/pt@sha256:" + "cd" * 32
    with pytest.raises(BrokerError, match=r"lists busybox by tag alone.*pins it by digest \(busybox@sha256:…"):
        choose_image(Request("session", image="busybox"), config)
    with pytest.raises(BrokerError, match=r"127\.0\.0\.1:5000/pt:v3 is not one of this box's images"):
        choose_image(Request("session", image="127.0.0.1:5000/pt:v3"), config)
    (tmp_path / "images").write_text("--privileged\n")
    with pytest.raises(BrokerError, match=r"holds '--privileged', starts with '-'.*the admin fixes it"):
        choose_image(Request("session", image="busybox"), config)


LIMITS = TankLimits(memory=8 * GIB, swap=GIB, pids=4096, cpu_shares=512, tanks=2)


def test_the_container_is_made_with_the_brokers_options_only():
    argv = create_argv(ALICE, "default", "puffertank:latest", gpus=False, limits=LIMITS)
    joined = " ".join(argv)
    assert argv[:5] == ["run", "--detach", "--init", "--name", "puffertank-alice"]
    assert f"--memory {8 * GIB} --memory-swap {9 * GIB} --pids-limit 4096 --cpu-shares 512" in joined
    assert "--cap-drop ALL" in joined and "--security-opt no-new-privileges" in joined
    assert "--user 1001:1002" in joined and '"source=/home/alice","target=/home/alice"' in joined
    assert "--restart unless-stopped" in joined and "--network host" in joined
    assert argv[-4:] == ["--", "puffertank:latest", "sleep", "infinity"]
    assert create_argv(ALICE, "exp1", "x", gpus=True, limits=LIMITS)[4] == "puffertank-alice.exp1"
    assert "--gpus all" in " ".join(create_argv(ALICE, "exp1", "x", gpus=True, limits=LIMITS))


def test_sessions_stay_in_the_home_and_pass_bytes_untouched():
    argv = session_argv(ALICE, Request("session", cwd="/etc", env=(("TERM", "xterm"),)))
    assert argv == ["exec", "--interactive", "--workdir", "/home/alice", "--env", "TERM=xterm", "--",
                    "puffertank-alice", "bash", "-l"]  # fmt: skip
    argv = session_argv(ALICE, Request("session", tty=True, cwd="/home/alice/src", command=("scp -t x", "a0")))
    assert argv == ["exec", "--interactive", "--tty", "--workdir", "/home/alice/src", "--", "puffertank-alice",
                    "bash", "-c", "scp -t x", "a0"]  # fmt: skip
    assert session_argv(ALICE, Request("session", cwd="/home/alicex"))[3] == "/home/alice"


def test_ownership_is_roots_record(tmp_path):
    state = tmp_path / "state"
    ownership = broker.Ownership(BrokerConfig(state_dir=str(state)))
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    cid = "c" * 64
    assert ownership.owner(cid) is None
    ownership.record(cid, ALICE, "default")
    assert ownership.owner(cid)["uid"] == 1001 and ownership.of(1001) == {cid: ownership.owner(cid)}
    assert ownership.of(1002) == {}
    with pytest.raises(BrokerError, match="the engine gave the container id"):
        ownership.owner("../../etc/passwd")
    ownership.forget(cid)
    assert ownership.owner(cid) is None
    state.chmod(0o777)
    with pytest.raises(BrokerError, match="is not a root-owned folder only root writes"):
        broker.Ownership(BrokerConfig(state_dir=str(state)))


class FakeEngine:
    """Answers inspect as the engine would, for the ownership checks (no engine here)."""

    def __init__(self, containers: dict[str, dict]):
        self.containers = containers

    def inspect(self, kind, name):
        return self.containers.get(name)


def test_a_container_the_broker_did_not_make_for_the_caller_is_refused(tmp_path):
    ownership = broker.Ownership(BrokerConfig(state_dir=str(tmp_path / "state")))
    mine, forged = "a" * 64, "b" * 64
    engine = FakeEngine({"puffertank-alice": {"Id": mine}, "puffertank-alice.exp1": {"Id": forged}})
    ownership.record(mine, ALICE, "default")
    assert broker.owned(engine, ownership, ALICE, "default") == {"Id": mine}
    assert broker.owned(engine, ownership, ALICE, "other") is None
    # One labelled and named as alice's by someone else: no record, so never alice's.
    with pytest.raises(BrokerError, match=r"puffertank-alice\.exp1 is on this box but the broker did not make it"):
        broker.owned(engine, ownership, ALICE, "exp1")
    # Recorded for bob (or for another of alice's names): not this one.
    ownership.record(forged, Caller(1003, 1003, "bob", "bob", "/home/bob"), "default")
    with pytest.raises(BrokerError, match="did not make it for alice"):
        broker.owned(engine, ownership, ALICE, "exp1")


def test_a_home_is_mounted_only_when_it_is_the_callers_below_roots_folders(tmp_path):
    assert broker.home_problem(Caller(0, 0, "root", "root", "/root")) is None  # a root-owned chain up to /
    home = tmp_path / "alice"
    home.mkdir()
    os.chown(home, 1001, 1002)
    caller = Caller(1001, 1002, "alice", "alice", str(home))
    assert "/tmp, above" in broker.home_problem(caller)  # /tmp: anyone may write there
    os.chown(home, 1003, 1003)
    assert "is not a directory owned by alice" in broker.home_problem(caller)
    link = tmp_path / "link"
    link.symlink_to(home)
    os.chown(home, 1001, 1002)
    assert "link is not a directory owned by alice" in broker.home_problem(Caller(1001, 1002, "alice", "a", str(link)))
    assert "cannot be read" in broker.home_problem(Caller(1001, 1002, "alice", "a", str(tmp_path / "absent")))


def test_list_prints_json_for_scripts_and_the_limits_for_people(capsys):
    found = {"HostConfig": {"Memory": 8 * GIB, "MemorySwap": 9 * GIB, "PidsLimit": 4096, "CpuShares": 512}}
    limits = broker._limits_of(found)
    assert limits == {"memory": 8 * GIB, "swap": GIB, "pids": 4096, "cpu_shares": 512}
    assert broker._limits_of({"HostConfig": {}}) == {"memory": None, "swap": None, "pids": None, "cpu_shares": None}
    rows = [{"name": "default", "container": "puffertank-alice", "state": "running", "since": "x", "image": "i",
             "limits": limits}]  # fmt: skip
    broker._print_listing(rows, as_json=True, limits=LIMITS)
    assert json.loads(capsys.readouterr().out) == rows
    broker._print_listing(rows, as_json=False, limits=LIMITS)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("each tank here: memory 8.0 GiB (+1.0 GiB swap), 4,096 processes, CPU shares 512; "
                      "2 tanks per user (you have 1); the GPU is shared")  # fmt: skip
    assert out[1].endswith("(memory 8.0 GiB)")


class LimitsEngine:
    """An engine that holds containers (by id) and records the updates it is asked for."""

    def __init__(self, config, containers: dict[str, dict], update_fails: bool = False):
        self.config, self.containers, self.update_fails, self.updates = config, containers, update_fails, []

    def inspect(self, kind, name):
        return self.containers.get(name)

    def run(self, args, check=True):
        self.updates.append(list(args))
        code = 1 if self.update_fails else 0
        return type("Proc", (), {"returncode": code, "stderr": "Minimum memoryswap limit should be larger"})()


def test_a_tank_made_under_other_limits_is_brought_to_the_boxs(tmp_path):
    (tmp_path / "limits").write_text("memory = 8G\nswap = 1G\npids = 4096\ncpu_shares = 512\n")
    config = BrokerConfig(limits_file=str(tmp_path / "limits"))
    said: list[str] = []
    same = {"Id": "a" * 64, "HostConfig": LIMITS.of_container()}
    engine = LimitsEngine(config, {})
    broker.apply_limits(engine, same, said.append)
    assert engine.updates == [] and said == []  # already the box's: nothing asked of the engine
    older = {"Id": "a" * 64, "HostConfig": {"Memory": 0, "PidsLimit": None, "CpuShares": 0}}
    broker.apply_limits(engine, older, said.append)
    assert engine.updates == [["update", *LIMITS.docker_args(), "--", "a" * 64]]
    refused = LimitsEngine(config, {}, update_fails=True)
    broker.apply_limits(refused, older, said.append)
    assert said and "keeps its earlier limits" in said[0] and "--fresh" in said[0]


def test_a_user_has_at_most_the_boxs_number_of_tanks(tmp_path):
    (tmp_path / "limits").write_text("tanks = 2\n")
    config = BrokerConfig(state_dir=str(tmp_path / "state"), limits_file=str(tmp_path / "limits"))
    ownership = broker.Ownership(config)
    mine, gone, bobs = "a" * 64, "b" * 64, "c" * 64
    ownership.record(mine, ALICE, "default")
    ownership.record(gone, ALICE, "exp1")  # its container was removed behind the broker's back
    ownership.record(bobs, Caller(1003, 1003, "bob", "bob", "/home/bob"), "default")
    engine = LimitsEngine(config, {mine: {"Id": mine}, bobs: {"Id": bobs}})
    assert broker.tanks_of(engine, ownership, ALICE) == ["default"]
    assert ownership.owner(gone) is None  # a record of a container gone is dropped
    limits = broker.tank_limits(config)
    error = broker._too_many(["default", "exp1"], limits, config)
    assert str(error).startswith("refused: you have 2 tanks (default, exp1), the most this box gives one user")
    assert "puffer tank login --rm NAME" in str(error)
    (tmp_path / "limits").write_text("memory = lots\n")
    with pytest.raises(BrokerError, match=r"line 1: memory = 'lots' is not a size.*the admin fixes it"):
        broker.tank_limits(config)


def test_the_login_wrapper_paths_are_absolute():
    assert broker.BROKER_PATH.startswith("/") and pathlib.Path(BrokerConfig().docker).is_absolute()
