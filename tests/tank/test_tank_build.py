"""The parts of `puffer tank build` that need no Docker engine: contexts, tags, build
arguments from this machine, base images turned into immutable references, the
hand-written layers' pins, and the CA bundle's round trip through tank/puffertank-ca.sh
(served by the build's loopback server, fetched by bash, deleted when the step ends)."""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import tarfile
import urllib.request

import pytest

from puffer_core.tank.build import (
    build_context,
    image_tags,
    machine_build_args,
    pinned_reference,
    serve_ca_bundle,
    serve_files,
)
from puffer_core.tank.errors import TankError

ROOT = pathlib.Path(__file__).resolve().parents[2]
CA_HELPER = ROOT / "tank" / "puffertank-ca.sh"
PEM = b"-----BEGIN CERTIFICATE-----\nMIIBfixture\n-----END CERTIFICATE-----\n"


def _members(buffer):
    with tarfile.open(fileobj=buffer) as tar:
        return {m.name: (m.mtime, m.uid, m.gid, m.mode, m.type) for m in tar.getmembers()}


def test_build_context_is_reproducible_and_lean(tmp_path):
    src = tmp_path / "repo"
    (src / "pkg" / "__pycache__").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("x = 1\n")
    (src / "pkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    (src / "pkg" / "thing.egg-info").mkdir()
    (src / "pkg" / "thing.egg-info" / "PKG-INFO").write_text("x")
    (src / "pkg" / "build").mkdir()
    (src / "pkg" / "build" / "junk").write_text("x")
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o755)
    first = build_context(src, ["pkg", "run.sh"], {"extra/gen.txt": b"generated\n"}).getvalue()
    os.utime(src / "pkg" / "mod.py", (1, 1))  # times do not matter
    second = build_context(src, ["run.sh", "pkg"], {"extra/gen.txt": b"generated\n"})
    assert second.getvalue() == first
    members = _members(second)
    assert sorted(members) == ["extra", "extra/gen.txt", "pkg", "pkg/mod.py", "run.sh"]
    assert all(m[0] == 0 and m[1] == 0 and m[2] == 0 for m in members.values())
    assert members["run.sh"][3] == 0o755 and members["pkg/mod.py"][3] == 0o644
    with pytest.raises(TankError, match="missing"):
        build_context(src, ["nope"])


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("puffertank", ("puffertank:base", "puffertank:envs", "puffertank:latest")),
        ("puffertank:dev", ("puffertank:dev-base", "puffertank:dev-envs", "puffertank:dev")),
        (
            "localhost:5000/me/tank",
            ("localhost:5000/me/tank:base", "localhost:5000/me/tank:envs", "localhost:5000/me/tank:latest"),
        ),
    ],
)
def test_image_tags(tag, expected):
    tags = image_tags(tag)
    assert (tags["base"], tags["envs"], tags["final"]) == expected


def test_image_tags_refuse_nonsense():
    with pytest.raises(TankError, match="not an image name"):
        image_tags("Bad Name")


DIGEST = "sha256:" + "d" * 64
IMAGE_ID = "sha256:" + "1" * 64


@pytest.mark.parametrize(
    ("reference", "attrs", "expected"),
    [
        # Already pinned: as given, whatever the engine says.
        (f"debian:bookworm@{DIGEST}", {"Id": IMAGE_ID}, (f"debian:bookworm@{DIGEST}", "pinned as given")),
        (IMAGE_ID, {"Id": IMAGE_ID}, (IMAGE_ID, "pinned as given")),
        # A pulled tag: its registry digest, for the repository the tag names (Docker Hub spellings too).
        ("debian:bookworm", {"Id": IMAGE_ID, "RepoDigests": [f"debian@{DIGEST}"]}, (f"debian:bookworm@{DIGEST}",)),
        ("docker.io/library/debian:12", {"Id": IMAGE_ID, "RepoDigests": [f"debian@{DIGEST}"]},
         (f"docker.io/library/debian:12@{DIGEST}",)),
        ("localhost:5000/me/base:v1", {"Id": IMAGE_ID, "RepoDigests": [f"localhost:5000/me/base@{DIGEST}"]},
         (f"localhost:5000/me/base:v1@{DIGEST}",)),
        # A local image (docker import, or built here): no registry digest, so its image id.
        ("puffertank-debian:bookworm", {"Id": IMAGE_ID, "RepoDigests": []}, (IMAGE_ID,)),
        # Another repository's digest says nothing about this name.
        ("mybase:1", {"Id": IMAGE_ID, "RepoDigests": [f"debian@{DIGEST}"]}, (IMAGE_ID,)),
    ],
)  # fmt: skip
def test_base_image_becomes_an_immutable_reference(reference, attrs, expected):
    pinned, what = pinned_reference(reference, attrs)
    assert pinned == expected[0]
    if len(expected) > 1:
        assert what == expected[1]
    elif pinned == IMAGE_ID:
        assert what == "its image id: a local image has no registry digest"


def test_hand_written_layers_start_from_digests_and_install_torch_from_one_index():
    base = (ROOT / "tank" / "Dockerfile.base").read_text()
    default = next(line for line in base.splitlines() if line.startswith("ARG BASE_IMAGE="))
    assert default.startswith("ARG BASE_IMAGE=nvidia/cuda:") and "@sha256:" in default
    assert len(default.split("@sha256:")[1]) == 64
    assert "--extra-index-url" not in base and '--index-url "${TORCH_INDEX_URL}"' in base
    assert "PIP_EXTRA_INDEX_URL='' pip install" in base
    # pip itself: one file, one hash, installed with --require-hashes before anything else uses it.
    assert "'pip==26.3 --hash=sha256:f3b60b20ffaadd4415ed7957212a38ac63fa4c5fa375bd0f4a797777940fad13'" in base
    assert "--require-hashes --no-deps -r /opt/puffertank/requirements-base.txt" in base
    final = (ROOT / "tank" / "Dockerfile").read_text()
    assert "\nARG BASE\nFROM ${BASE}\n" in final and "ARG BASE=" not in final
    assert "pip install --no-cache-dir --no-index -r /opt/puffertank/requirements-layer3.txt" in final
    assert "RUN python -m puffer_core.tank.lock /opt/puffertank/lock.txt" in final


def test_machine_build_args_keep_reachable_indexes_only():
    environ = {
        "PIP_EXTRA_INDEX_URL": "file:///opt/pypi/simple https://mirror.example.invalid/simple",
        "HTTPS_PROXY": "http://proxy.example.invalid:3128",
        "no_proxy": "localhost",
    }
    config = {
        "global.index-url": "https://user:token@private.example.invalid/simple",
        ":env:.default-timeout": "180",
        "global.trusted-host": "mirror.example.invalid",
    }
    args, notes = machine_build_args(environ, config)
    assert args == {
        "PIP_EXTRA_INDEX_URL": "https://mirror.example.invalid/simple",
        "PIP_TRUSTED_HOST": "mirror.example.invalid",
        "PIP_DEFAULT_TIMEOUT": "180",
        "HTTPS_PROXY": "http://proxy.example.invalid:3128",
        "no_proxy": "localhost",
    }
    assert any("file:///opt/pypi/simple" in note for note in notes)
    assert any("credentials" in note and "token" not in note for note in notes)


def test_ca_server_serves_the_bundle_under_its_digest(tmp_path):
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(PEM)
    digest = hashlib.sha256(PEM).hexdigest()
    with serve_ca_bundle(bundle) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith(f"/{digest}.pem")
        with urllib.request.urlopen(url) as response:
            assert response.read() == PEM
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url.replace(digest, "0" * 64))
        with serve_ca_bundle(bundle) as second:  # the same bundle twice: the next port
            assert second != url
    not_pem = tmp_path / "x.txt"
    not_pem.write_text("hello")
    with pytest.raises(TankError, match="no PEM certificate"):
        with serve_ca_bundle(not_pem):
            pass


BASH = shutil.which("bash")


def _step(script: str, url: str | None, **extra: str) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **extra}
    if url is not None:
        env["PUFFER_CA_URL"] = url
    return subprocess.run(
        [BASH, "-o", "pipefail", "-c", f". {CA_HELPER} && {script}"], env=env, capture_output=True, text=True
    )


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_ca_helper_fetches_checks_exports_and_deletes(tmp_path):
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(PEM)
    with serve_ca_bundle(bundle) as url:
        proc = _step('cat "$PIP_CERT"; cat "$APT_CONFIG"; echo "$SSL_CERT_FILE $REQUESTS_CA_BUNDLE $PIP_CERT"', url)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(PEM.decode())
        conf_line = proc.stdout.splitlines()[3]
        assert conf_line.startswith('Acquire::https::CAInfo "') and conf_line.endswith('ca.pem";')
        paths = set(proc.stdout.splitlines()[-1].split())
        assert len(paths) == 1
        path = pathlib.Path(paths.pop())
        assert path.parent.name.startswith("puffer-ca.")
        assert not path.exists() and not path.parent.exists(), "the bundle must be gone when the step ends"
        # A step that fails still cleans up.
        failing = _step('echo "$PIP_CERT"; false', url)
        assert failing.returncode == 1 and not pathlib.Path(failing.stdout.strip()).exists()
        # A bundle that does not match the digest in the URL is refused.
        tampered = url.rsplit("/", 1)[0] + "/" + "0" * 64 + ".pem"
        bad = _step("echo never", tampered)
        assert bad.returncode == 1 and "never" not in bad.stdout
        assert "cannot fetch the CA bundle" in bad.stderr
    # Nobody listening (a build without --network host): a clear message, exit 1.
    gone = _step("echo never", url)
    assert gone.returncode == 1 and "--network host" in gone.stderr


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_ca_helper_does_nothing_without_a_url():
    proc = _step('echo "[${PIP_CERT:-unset}] [${APT_CONFIG:-unset}]"', None)
    assert proc.returncode == 0 and proc.stdout.strip() == "[unset] [unset]"


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_ca_helper_adds_a_served_lock_to_pip_constraint(tmp_path):
    """`puffer tank build --lock`: each pip step sees the lock in PIP_CONSTRAINT, after the
    layer's own constraints; the file is checked against its digest and gone after the step."""
    lock = b"# constraints\nnumpy==2.4.6\n"
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(PEM)
    with serve_files({".txt": lock}) as urls, serve_ca_bundle(bundle) as ca_url:
        url = urls[".txt"]
        assert url.endswith(f"/{hashlib.sha256(lock).hexdigest()}.txt")
        proc = _step('echo "$PIP_CONSTRAINT"; cat "${PIP_CONSTRAINT##* }"; echo "$PIP_CERT"', ca_url,
                     PUFFER_LOCK_URL=url, PIP_CONSTRAINT="/opt/puffertank/constraints-common.txt")  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        first, *content, cert = proc.stdout.splitlines()
        common, locked = first.split()
        assert common == "/opt/puffertank/constraints-common.txt" and locked.endswith("/lock.txt")
        assert "\n".join(content) + "\n" == lock.decode()
        assert pathlib.Path(cert).parent == pathlib.Path(locked).parent  # one folder, one clean-up
        assert not pathlib.Path(locked).parent.exists()
        alone = _step('echo "$PIP_CONSTRAINT"', None, PUFFER_LOCK_URL=url)
        assert alone.returncode == 0 and alone.stdout.strip().endswith("/lock.txt") and " " not in alone.stdout.strip()
        tampered = _step("echo never", None, PUFFER_LOCK_URL=url.rsplit("/", 1)[0] + "/" + "0" * 64 + ".txt")
        assert tampered.returncode == 1 and "cannot fetch the lock" in tampered.stderr
    gone = _step("echo never", None, PUFFER_LOCK_URL=url)
    assert gone.returncode == 1 and "builds with --lock need host networking" in gone.stderr
