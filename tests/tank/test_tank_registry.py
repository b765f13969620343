"""Images from a registry, the parts that need no engine: the repository's name (`--registry`),
the tags, the registry probe (against servers on 127.0.0.1), a layer's input fingerprint, and
the commands' one-line errors before any engine is asked. The pushes and pulls themselves:
tests/tank/test_tank_registry_docker.py."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import sys
import threading
import time

import pytest

from puffer_core.tank.errors import TankError
from puffer_core.tank.image.build_context import build_context, layer_context
from puffer_core.tank.image.inputs import NOT_CONTENT_ARGS, layer_inputs
from puffer_core.tank.registry.refs import (
    lock_tag,
    parse_digest,
    parse_local_tag,
    parse_registry,
    probe_registry,
)
from puffer_core.tank.registry.transfer import _follow

ROOT = pathlib.Path(__file__).resolve().parents[2]
DIGEST = "ab" * 32


@pytest.mark.parametrize(
    ("given", "host", "port", "path", "repository"),
    [
        ("127.0.0.1:5000/puffertank", "127.0.0.1", 5000, "puffertank", "127.0.0.1:5000/puffertank"),
        ("docker.io/someone/puffertank", "docker.io", None, "someone/puffertank", "docker.io/someone/puffertank"),
        ("localhost/a/b-c/d_e.f", "localhost", None, "a/b-c/d_e.f", "localhost/a/b-c/d_e.f"),
        ("reg.example.org:443/team/pt", "reg.example.org", 443, "team/pt", "reg.example.org:443/team/pt"),
        ("[::1]:5000/pt", "::1", 5000, "pt", "[::1]:5000/pt"),
        ("  10.0.0.7:65535/pt__x  ", "10.0.0.7", 65535, "pt__x", "10.0.0.7:65535/pt__x"),
    ],
)
def test_registry_references_are_parsed(given, host, port, path, repository):
    ref = parse_registry(given)
    assert (ref.host, ref.port, ref.path) == (host, port, path)
    assert ref.repository == str(ref) == repository
    assert ref.tag("latest") == f"{repository}:latest"


def test_loopback_registries_are_known():
    assert parse_registry("127.0.0.1:5000/x").is_loopback
    assert parse_registry("127.8.9.1:5000/x").is_loopback
    assert parse_registry("localhost:5000/x").is_loopback
    assert parse_registry("[::1]:5000/x").is_loopback
    assert not parse_registry("registry.example.org/x").is_loopback


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("http://127.0.0.1:5000/pt", "no scheme"),
        ("https://registry.example.org/pt", "no scheme"),
        ("127.0.0.1:5000/pt:v1", "names a tag ('v1')"),
        ("127.0.0.1:5000/pt@sha256:" + DIGEST, "names a digest"),
        ("127.0.0.1:5000/PufferTank", "'PufferTank' has upper case letters"),
        ("Registry.example.org/pt", "'Registry.example.org' has upper case letters"),
        ("127.0.0.1:5000//pt", "an empty part between slashes"),
        ("127.0.0.1:5000/pt/", "an empty part between slashes"),
        ("127.0.0.1:5000", "no repository name after the host"),
        ("127.0.0.1:5000/", "no repository name after the host"),
        (":5000/pt", "the host is empty"),
        ("127.0.0.1:99999/pt", "the port '99999' is not a number from 1 to 65535"),
        ("127.0.0.1:0/pt", "the port '0'"),
        ("127.0.0.1:http/pt", "the port 'http'"),
        ("127.0.0.1:/pt", "the port ''"),
        ("someone/puffertank", "'someone' is not a registry host"),
        ("a..b/pt", "'a..b' is not a host name"),
        ("-a.b/pt", "'-a.b' is not a host name"),
        ("127.0.0.1:5000/pt-", "'pt-' is not a repository name part"),
        ("127.0.0.1:5000/p t", "'p t' is not a repository name part"),
        ("[::g]:5000/pt", "not an IPv6 address"),
        ("[::1]x/pt", "is not [IPv6]"),
        ("", "it is empty"),
        ("127.0.0.1:5000/" + "a" * 250, "longer than 255"),
    ],
)
def test_malformed_registries_are_one_line_naming_the_fault(given, says):
    with pytest.raises(TankError) as caught:
        parse_registry(given)
    message = str(caught.value)
    assert says in message and "give --registry HOST[:PORT]/NAME" in message, message
    assert "\n" not in message


def test_tags_name_what_is_inside():
    assert lock_tag(DIGEST) == f"lock-{DIGEST}"
    assert lock_tag(DIGEST, "envs") == f"lock-{DIGEST}-envs"
    assert lock_tag(DIGEST, "base") == f"lock-{DIGEST}-base"
    assert len(lock_tag(DIGEST, "envs")) <= 128  # a tag's limit
    assert parse_digest(DIGEST) == parse_digest(f"sha256:{DIGEST}") == DIGEST
    for bad in ("abc", DIGEST.upper(), DIGEST + "0", "lock-" + DIGEST):
        with pytest.raises(TankError, match="is not a lock digest"):
            parse_digest(bad)


def test_local_tags():
    assert parse_local_tag("puffertank:latest") == ("puffertank", "latest")
    assert parse_local_tag("puffertank") == ("puffertank", "latest")
    assert parse_local_tag("localhost:5000/pt") == ("localhost:5000/pt", "latest")
    assert parse_local_tag("localhost:5000/pt:v1") == ("localhost:5000/pt", "v1")
    for bad in ("PufferTank", "pt:", "pt:a b", "", "a//b", "--help", "a b:x"):
        with pytest.raises(TankError, match=r"^--tag .* (is not an image reference|is empty|starts with '-')"):
            parse_local_tag(bad)
    with pytest.raises(TankError, match="names a digest: a local name is NAME"):
        parse_local_tag(f"pt@sha256:{DIGEST}")


# -- is the registry there ------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_probe_nothing_listening_is_one_line_at_once():
    port = _free_port()
    started = time.monotonic()
    with pytest.raises(TankError) as caught:
        probe_registry(parse_registry(f"127.0.0.1:{port}/pt"))
    assert time.monotonic() - started < 5
    assert f"registry 127.0.0.1:{port} is not there: nothing listens at 127.0.0.1:{port} (connection refused)" in str(
        caught.value
    )


def test_probe_a_silent_server_is_bounded():
    """A server that accepts and never answers (the engine itself would wait 25 s on it)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        port = server.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(TankError, match=f"127.0.0.1:{port} did not answer within 1 s"):
            probe_registry(parse_registry(f"127.0.0.1:{port}/pt"), seconds=1.0)
        assert time.monotonic() - started < 4


def test_probe_an_answering_server_passes():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        port = server.getsockname()[1]

        def answer():
            conn, _ = server.accept()
            with conn:
                conn.recv(1024)
                conn.sendall(b"HTTP/1.0 401 Unauthorized\r\n\r\n")

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        probe_registry(parse_registry(f"127.0.0.1:{port}/pt"), seconds=5.0)
        thread.join(5)


def test_a_silent_engine_stream_is_bounded():
    """The transfer's watchdog: a stream that stops reporting ends in a one-line error."""
    release = threading.Event()

    def stalled():
        yield {"status": "Pushing", "id": "abc"}
        release.wait(30)

    seen = []
    started = time.monotonic()
    with pytest.raises(TankError, match="pushing x: the engine reported nothing for 1 s"):
        for message in _follow(stalled, 1.0, "pushing x"):
            seen.append(message)
    release.set()
    assert seen == [{"status": "Pushing", "id": "abc"}] and time.monotonic() - started < 5


# -- what a layer is built from -------------------------------------------------------------

ARGS = {"BASE": "sha256:" + "1" * 64, "TORCH": "", "BASE_IMAGE": "sha256:" + "2" * 64}
LOCK = {"PUFFER_LOCK_URL": b"numpy==2.0.0\n"}


def _inputs(stage="envs", context=b"tar", args=None, served=None, platform="linux/amd64"):
    return layer_inputs(stage, context, ARGS if args is None else args, LOCK if served is None else served, platform)


def test_fingerprint_changes_with_what_makes_the_layer():
    first = _inputs()
    assert len(first) == 64 and first == _inputs()
    changed = [
        _inputs(context=b"tar2"),  # the Dockerfile or a file it copies
        _inputs(args={**ARGS, "BASE": "sha256:" + "3" * 64}),  # the layer below
        _inputs(args={**ARGS, "TORCH": "torch==2.5.1"}),
        _inputs(args={**ARGS, "EXTRA": "1"}),  # a --build-arg
        _inputs(served={"PUFFER_LOCK_URL": b"numpy==2.1.0\n"}),  # another lock
        _inputs(served={}),
        _inputs(stage="final"),
        _inputs(platform="linux/arm64"),
    ]
    assert len({first, *changed}) == len(changed) + 1


def test_fingerprint_ignores_how_files_are_fetched():
    first = _inputs(args={**ARGS, "PUFFER_LOCK_URL": "http://127.0.0.1:40001/aa.txt"})
    same = [
        _inputs(args={**ARGS, "PUFFER_LOCK_URL": "http://127.0.0.1:40002/aa.txt"}),  # a served file's URL
        _inputs(args={**ARGS, "PUFFER_CA_URL": "http://127.0.0.1:40003/cc.pem"}),  # the CA bundle
        _inputs(args={**ARGS, "PIP_INDEX_URL": "https://mirror.invalid/simple"}),  # the machine's index
        _inputs(args={**ARGS, "PIP_DEFAULT_TIMEOUT": "60", "HTTPS_PROXY": "http://p:3128", "no_proxy": "x"}),
    ]
    assert set(same) == {first}
    assert {"PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "HTTP_PROXY", "http_proxy", "PUFFER_CA_URL"} <= NOT_CONTENT_ARGS


def test_layer_contexts_are_the_same_bytes_every_time():
    """What the fingerprint hashes: each layer's context of this checkout, packed twice."""
    for stage in ("base", "final"):
        first = layer_context(ROOT, stage, ["nethack"], "").getvalue()
        assert layer_context(ROOT, stage, ["nethack"], "").getvalue() == first, stage
    envs = layer_context(ROOT, "envs", [], "FROM x\n").getvalue()
    assert layer_context(ROOT, "envs", [], "FROM x\n").getvalue() == envs
    assert layer_context(ROOT, "envs", [], "FROM y\n").getvalue() != envs


def test_context_mode_is_the_owners_execute_bit(tmp_path):
    """As git records it, whoever packs it: root may execute a file with any x bit, a user may not."""
    for name, mode in (("owner.sh", 0o744), ("group.sh", 0o654), ("plain.txt", 0o644)):
        (tmp_path / name).write_text("x\n")
        (tmp_path / name).chmod(mode)
    import tarfile

    with tarfile.open(fileobj=build_context(tmp_path, ["owner.sh", "group.sh", "plain.txt"])) as tar:
        modes = {member.name: member.mode for member in tar.getmembers()}
    assert modes == {"owner.sh": 0o755, "group.sh": 0o644, "plain.txt": 0o644}


# -- the commands' one-line errors, before any engine --------------------------------------


def _puffer(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "puffer_core.cli.main", "tank", *args],
        cwd=ROOT,
        env={**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock", "PUFFER_DEBUG": "", **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["push", "--registry", "http://127.0.0.1:5000/pt"], "no scheme"),
        (["push", "--registry", "127.0.0.1:5000/pt:v2"], "names a tag ('v2')"),
        (["pull", "--registry", "127.0.0.1:5000/PT"], "'PT' has upper case letters"),
        (["pull", "--registry", "127.0.0.1:5000//pt"], "an empty part between slashes"),
        (["pull", "--registry", "127.0.0.1:70000/pt"], "the port '70000'"),
        (["pull", "--registry", "127.0.0.1:5000/pt", "--lock", "abc"], "--lock 'abc' is not a lock digest"),
        (["pull", f"127.0.0.1:5000/pt@sha256:{DIGEST}", "--tag", "Mine"], "--tag 'Mine' is not an image reference"),
        (["pull", f"127.0.0.1:5000/pt@sha256:{DIGEST}", "--tag", "a b:x"], "--tag 'a b:x' is not an image reference"),
        (["pull", "--registry", "127.0.0.1:5000/pt", "--tag", "mine"], "a pull by tag is unverified and gets no"),
        (["pull", "127.0.0.1:5000/pt:v1"], "names no digest, and a tag names whatever was pushed to it last"),
        (["pull", "puffertank@sha256:" + DIGEST], "names no registry: give HOST[:PORT]/NAME@sha256:DIGEST"),
        (["pull", "--", "--help"], "IMAGE '--help' starts with '-'"),
        (["pull", f"127.0.0.1:5000/pt@sha256:{DIGEST}", "--lock", DIGEST], "--lock goes with --registry"),
        (["pull", f"127.0.0.1:5000/pt@sha256:{DIGEST}", "--registry", "127.0.0.1:5000/pt"], "give one of"),
        (["push", "--registry", "127.0.0.1:5000/pt", "--", "-x"], "IMAGE '-x' starts with '-'"),
        (["build", "--no-constraints", "--from-registry", "127.0.0.1:5000/pt"], "--from-registry REG and --pins"),
        (["build", "--no-constraints", "--tag", "--help"], "--tag '--help' starts with '-'"),
        (["build", "--no-constraints", "--base-image", "a b"], "--base-image 'a b' is not an image reference"),
        (["run", "--image=--help", "--", "true"], "--image '--help' starts with '-'"),
        (["login", "--image=--help"], "--image '--help' starts with '-'"),
        (
            ["build", "--no-constraints", "--from-registry", "https://127.0.0.1:5000/pt"],
            "--registry 'https://127.0.0.1:5000/pt': no scheme",
        ),
    ],
)
def test_bad_input_is_one_line_before_the_engine(args, says):
    proc = _puffer(*args)
    assert proc.returncode == 1, proc.stderr  # 1, not 2: the engine (absent here) was never asked
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], proc.stderr


def test_push_needs_a_registry_and_pull_a_digest():
    proc = _puffer("push")
    assert proc.returncode == 2 and "Missing option '--registry'" in proc.stderr, proc.stderr
    proc = _puffer("pull")
    assert proc.returncode == 1 and "give one of REPO@sha256:DIGEST, --pins FILE or --registry REG" in proc.stderr


def test_a_pull_by_tag_never_touches_the_boxs_image():
    """Refused before the engine is asked (None stands for it): a tag pull of the image
    /etc/puffertank/image names would change the box's image unverified."""
    from puffer_core.tank.registry.pull import pull_unverified

    ref = parse_registry("127.0.0.1:5000/pt")
    with pytest.raises(TankError, match=r"127\.0\.0\.1:5000/pt:latest is this box's image .*pull it by digest"):
        pull_unverified(None, ref, None, lambda kind, line: None, box_image="127.0.0.1:5000/pt:latest")
