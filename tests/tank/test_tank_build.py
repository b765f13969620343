"""`puffer tank build` without an engine: tags, the hand-written layers' pins, arguments checked first."""

from __future__ import annotations

import pathlib

import pytest

from puffer_core.tank.build import BuildPlan, build, image_tags
from puffer_core.tank.errors import TankError
from puffer_core.tank.render import Constraints

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
    with pytest.raises(TankError, match="not an image name"):
        image_tags("Bad Name")


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


def test_ca_cert_needs_host_network(tmp_path):
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    plan = BuildPlan(ROOT, ("base",), {}, {}, Constraints.none(), ca_cert=bundle, network=None)
    with pytest.raises(TankError, match="--ca-cert needs --network host"):
        build(plan, client=None, out=lambda kind, line: None)
