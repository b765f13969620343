"""`puffer tank build` without an engine: tags, the hand-written layers' pins, arguments checked first."""

from __future__ import annotations

import pathlib

import pytest

from puffer_core.tank.errors import TankError
from puffer_core.tank.image.build import BuildPlan, build, image_tags
from puffer_core.tank.image.render import Constraints

ROOT = pathlib.Path(__file__).resolve().parents[2]


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
    for bad in ("Bad Name", "--help", "a b:x"):
        with pytest.raises(TankError, match=r"^--tag .*(not an image reference|starts with '-')"):
            image_tags(bad)
    with pytest.raises(TankError, match="not an image name to build"):
        image_tags("puffertank@sha256:" + "a" * 64)


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
    assert "RUN python -m puffer_core.tank.image.lock /opt/puffertank/lock.txt" in final


def test_ca_cert_needs_host_network(tmp_path):
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    plan = BuildPlan(ROOT, ("base",), {}, {}, Constraints.none(), ca_cert=bundle, network=None)
    with pytest.raises(TankError, match="--ca-cert needs --network host"):
        build(plan, client=None, out=lambda kind, line: None)


def test_layer_1_installs_pytorch_under_the_locks_hashes_when_given():
    base = (ROOT / "tank" / "Dockerfile.base").read_text()
    torch_step = base[base.index('RUN if [ -n "${TORCH}" ]') :]
    assert '${PUFFER_LOCK_HASHES:+--require-hashes --constraint "${PUFFER_LOCK_HASHES}"}' in torch_step
    assert "ARG PUFFER_LOCK_HASHES_URL" in base
    for later in ("Dockerfile.envs", "Dockerfile"):  # layers 2 and 3 are hash-locked by their own files
        assert "PUFFER_LOCK_HASHES" not in (ROOT / "tank" / later).read_text()


#: six 1.16.0's one wheel on the package index, and its sha256 (a public file: its digest is fixed).
SIX = "six==1.16.0"
SIX_SHA256 = "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254"


@pytest.fixture(scope="module")
def pip_venv(tmp_path_factory):
    """A venv with the pip PufferTank's layer 1 pins (older pips ignore hashes in constraint files)."""
    import subprocess
    import sys

    path = tmp_path_factory.mktemp("pip-venv")
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    subprocess.run([path / "bin" / "python", "-m", "pip", "install", "-q", "pip==26.3"], check=True)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("digest, installs", [(SIX_SHA256, True), ("0" * 64, False)])
def test_the_locks_hashes_reach_layer_1s_pip_and_a_different_file_fails(pip_venv, tmp_path, digest, installs):
    """The served hash pins, fetched by tank/puffertank-ca.sh as layer 1's step does, make its
    pip refuse a file whose sha256 is not the lock's (real pip, real package index)."""
    import os
    import subprocess

    from puffer_core.tank.image.build import _serve
    from puffer_core.tank.image.lock import BuildLock, hash_constraints

    lock = f"# base-image sha256:{'e' * 64}\n{SIX} --hash=sha256:{digest}\n"
    hashes = hash_constraints(lock, set(), "lock.txt")
    plan = BuildPlan(ROOT, ("base",), {}, {}, Constraints.none(), network="host", lock=BuildLock(b"", hashes, None))
    target = tmp_path / "site"
    step = (
        f". {ROOT / 'tank' / 'puffertank-ca.sh'} && {pip_venv / 'bin' / 'pip'} install --no-cache-dir -q "
        f'${{PUFFER_LOCK_HASHES:+--require-hashes --constraint "${{PUFFER_LOCK_HASHES}}"}} --target {target} {SIX}'
    )
    with _serve(plan) as urls:
        assert set(urls) == {"PUFFER_LOCK_URL", "PUFFER_LOCK_HASHES_URL"}
        env = {**os.environ, "PUFFER_LOCK_HASHES_URL": urls["PUFFER_LOCK_HASHES_URL"]}
        proc = subprocess.run(["bash", "-c", step], env=env, capture_output=True, text=True, timeout=300)
    assert (proc.returncode == 0) == installs, proc.stderr[-2000:]
    assert (target / "six.py").exists() == installs
    if not installs:
        assert "THESE PACKAGES DO NOT MATCH THE HASHES" in proc.stderr and SIX_SHA256 in proc.stderr


class _FakeApi:
    """An engine whose build streams ``chunks``."""

    def __init__(self, chunks):
        self.chunks = chunks

    def build(self, **kwargs):
        return iter(self.chunks)


class _FakeClient:
    def __init__(self, chunks):
        self.api = _FakeApi(chunks)


def test_a_failed_step_is_reported_by_its_one_line_and_the_full_log_is_kept(tmp_path):
    """A step that prints `puffertank-error: ...` as it fails (the dmlab stage: Bazel's first error)
    is reported by that line; the whole streamed log is written to the plan's log_dir."""
    from puffer_core.tank.errors import BuildError
    from puffer_core.tank.image.build import _stream

    chunks = [
        {"stream": "Step 5/9 : RUN bazel build\n"},
        *({"stream": f"bazel output line {i}\n"} for i in range(500)),
        {"stream": "q3map2/libs/bytebool.h:37:18: error: two or more data types\n"},
        {"stream": "puffertank-error: dmlab: bazel build failed: bytebool.h:37:18: error: two or more data types\n"},
        {"errorDetail": {"message": "The command '/bin/bash -c ...' returned a non-zero code: 1"}},
    ]
    plan = BuildPlan(
        root=ROOT, stages=("envs",), tags={"envs": "t:envs"}, layers={}, constraints=Constraints.none(),
        log_dir=tmp_path,
    )  # fmt: skip
    with pytest.raises(BuildError) as info:
        _stream(_FakeClient(chunks), "envs", None, "t:envs", {}, {}, plan, lambda kind, line: None)
    message = str(info.value)
    log = tmp_path / "t_envs.log"
    assert message == (
        "building the envs layer failed: dmlab: bazel build failed: bytebool.h:37:18: error: two or more data types"
        f" (full log: {log})"
    )
    text = log.read_text()
    assert "bazel output line 0\n" in text and "bazel output line 499\n" in text
    assert not any(line.startswith("puffertank-error:") for line in info.value.log_tail)


def test_a_failed_step_without_its_line_keeps_the_engines_message_and_the_log(tmp_path):
    from puffer_core.tank.errors import BuildError
    from puffer_core.tank.image.build import _stream

    chunks = [{"stream": "oops\n"}, {"error": "returned a non-zero code: 2"}]
    plan = BuildPlan(
        root=ROOT, stages=("envs",), tags={"envs": "t:envs"}, layers={}, constraints=Constraints.none(),
        network="host", log_dir=tmp_path,
    )  # fmt: skip
    with pytest.raises(BuildError, match=r"returned a non-zero code: 2 \(full log: .*t_envs\.log\)$"):
        _stream(_FakeClient(chunks), "envs", None, "t:envs", {}, {}, plan, lambda kind, line: None)
