"""What each layer's build is sent: a lean, reproducible tar of the files its Dockerfile copies."""

from __future__ import annotations

import os
import pathlib
import tarfile

import pytest

from puffer_core.tank.errors import TankError
from puffer_core.tank.image.build_context import build_context, layer_context

ROOT = pathlib.Path(__file__).resolve().parents[2]


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


def test_each_layer_is_sent_only_what_its_dockerfile_copies():
    base = _members(layer_context(ROOT, "base", []))
    assert sorted(name for name in base if "." in name) == ["tank/Dockerfile.base", "tank/puffertank-ca.sh"]
    envs = layer_context(ROOT, "envs", [], "FROM scratch\n", "tank/requirements-envs.txt")
    with tarfile.open(fileobj=envs) as tar:
        assert tar.extractfile("tank/Dockerfile.envs").read() == b"FROM scratch\n"  # the render, not the file
        assert "tank/requirements-envs.txt" in tar.getnames()
    final = _members(layer_context(ROOT, "final", ["nethack"]))
    assert "puffer_core/__init__.py" in final and "plugins/nethack/pyproject.toml" in final
    assert "LICENSE" in final and "plugins/nethack/LICENSE" in final  # the wheels' license-files
    assert not any(name.startswith(("plugins/atari", "plugins/nethack/tests", "tests/")) for name in final)
    with pytest.raises(TankError, match=r"plugin\(s\) nope have no plugins/<name>/pyproject.toml"):
        layer_context(ROOT, "final", ["nope"])
