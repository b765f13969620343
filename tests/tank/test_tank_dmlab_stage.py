"""The DeepMind Lab stage: the source check (commit verified), the rendered Dockerfile (nothing
downloaded but Debian's packages and the hash-pinned Python tools; our Bazel files applied).

Here, not in the plugin's tests: it drives the stage through the tank's own render and source
resolution, which a plugin's code and tests do not import (the plugin author's API)."""

from __future__ import annotations

import base64
import gzip
import io
import re
import subprocess
import tarfile

import pytest
from puffer_plugin_dmlab import docker

from puffer_core.tank.errors import TankError
from puffer_core.tank.image.render import Constraints, render_envs
from puffer_core.tank.image.sources import resolve_sources

OTHER = "0123456789abcdef0123456789abcdef01234567"


def _source(folder, commit=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "WORKSPACE").write_text('workspace(name = "org_deepmind_lab")\n')
    if commit is not None:
        (folder / docker.COMMIT_FILE).write_text(commit + "\n")
    return folder


def _git(folder, *args):
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


def test_a_snapshot_naming_the_pinned_commit_passes(tmp_path):
    assert docker.check_source(_source(tmp_path / "src", docker.DMLAB_COMMIT)) is None


def test_a_snapshot_at_another_commit_is_refused_naming_both(tmp_path):
    problem = docker.check_source(_source(tmp_path / "src", OTHER))
    assert OTHER in problem and docker.DMLAB_COMMIT in problem
    assert "\n" not in problem


def test_a_checkout_at_another_commit_is_refused_naming_both(tmp_path):
    folder = _source(tmp_path / "src")
    _git(folder, "init", "-q")
    _git(folder, "add", "WORKSPACE")
    _git(folder, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    head = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    problem = docker.check_source(folder)
    assert head.strip() in problem and docker.DMLAB_COMMIT in problem and "checked out" in problem


def test_a_snapshot_without_its_commit_or_not_dmlab_is_refused(tmp_path):
    assert docker.COMMIT_FILE in docker.check_source(_source(tmp_path / "src"))
    (tmp_path / "other").mkdir()
    assert "not DeepMind Lab's source" in docker.check_source(tmp_path / "other")


def test_a_missing_source_says_how_to_get_it_in_one_line():
    with pytest.raises(TankError) as info:
        resolve_sources({"dmlab": docker.docker_layer()}, {}, environ={})
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("plugin dmlab's build stage dmlab needs --dmlab-source DIR (or PUFFER_DMLAB_SOURCE)")
    assert f"git clone {docker.DMLAB_REPOSITORY} DIR && git -C DIR checkout {docker.DMLAB_COMMIT}" in message


def test_the_wrong_commit_through_the_build_option_names_both(tmp_path):
    folder = _source(tmp_path / "src", OTHER)
    with pytest.raises(TankError, match=rf"^--dmlab-source {re.escape(str(folder))}: .*{OTHER}.*{docker.DMLAB_COMMIT}"):
        resolve_sources({"dmlab": docker.docker_layer()}, {"dmlab-source": str(folder)}, environ={})


def _stage_text():
    text = render_envs({"dmlab": docker.docker_layer()}, Constraints.none())
    stage = text.split("# ---- build stage dmlab", 1)[1].split("# ---- the environment layer ----", 1)[0]
    return text, stage


def test_the_stage_downloads_nothing_but_debian_packages_and_pinned_tools():
    _, stage = _stage_text()
    assert "FROM ${BASE} AS dmlab" in stage
    assert not re.search(r"https?://|curl |wget |git clone|bazelisk", stage)
    assert "COPY tank/sources/dmlab-source /opt/dmlab/src" in stage
    pip = [line for line in stage.splitlines() if "pip install" in line]
    assert len(pip) == 1 and "--require-hashes" in pip[0]
    assert "bazel-bootstrap" in stage


def test_the_stage_applies_our_bazel_files_then_builds_and_removes_bazel_output_in_one_step():
    _, stage = _stage_text()
    runs = [line for line in stage.splitlines() if line.startswith("RUN ") and "apt-get" not in line]
    apply = next(line for line in runs if "base64 -d" in line)
    build = next(line for line in runs if "bazel" in line and "build_pip_package" in line)
    assert runs.index(apply) < runs.index(build)
    blob = re.search(r"echo ([A-Za-z0-9+/=]+) \| base64 -d", apply).group(1)
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(base64.b64decode(blob)))) as tar:
        members = {member.name: tar.extractfile(member).read() for member in tar.getmembers()}
    assert set(members) == {"WORKSPACE", "puffer_build/BUILD", "puffer_build/system_libs.bzl", ".bazelrc"}
    assert members["WORKSPACE"] == (docker.BUILD_DIR / "WORKSPACE").read_bytes()
    assert b"http_archive" not in members["WORKSPACE"] and b"://" not in members["WORKSPACE"]
    assert f"rm -rf {docker.SRC} /opt/dmlab/dist {docker.BAZEL_ROOT}" in build
    assert "puffertank-error: dmlab: bazel build failed" in build


def test_the_environment_layer_installs_the_wheel_with_the_runtime_libraries():
    text, _ = _stage_text()
    layer = text.split("# ---- the environment layer ----", 1)[1]
    assert f"COPY --from=dmlab {docker.WHEEL} {docker.WHEEL}" in layer
    for package in ("libosmesa6", "libabsl20220623", "liblua5.1-0"):
        assert f"      {package}" in layer
    assert 'python3 -c "import deepmind_lab"' in layer


def test_a_bazel_failure_prints_the_whole_log_then_the_one_line_that_matters(tmp_path):
    """The very build step, with a stand-in `bazel` that fails as a compile error does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "bazel"
    fake.write_text(
        "#!/bin/sh\n"
        "echo 'INFO: Analyzed target //python/pip_package:build_pip_package'\n"
        "echo 'ERROR: /src/q3map2/BUILD:54:10: Compiling q3map2/common/imagelib.c failed: (Exit 1)'\n"
        "echo 'q3map2/libs/bytebool.h:37:18: error: two or more data types in declaration specifiers'\n"
        "exit 1\n"
    )
    fake.chmod(0o755)
    src = tmp_path / "src"
    src.mkdir()
    step = docker._steps()[-1].replace(docker.SRC, str(src)).replace(docker.BAZEL_LOG, str(tmp_path / "bazel.log"))
    proc = subprocess.run(
        ["bash", "-o", "pipefail", "-c", step],
        capture_output=True,
        text=True,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
    )
    assert proc.returncode == 1
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "INFO: Analyzed target //python/pip_package:build_pip_package"
    assert lines[-1] == (
        "puffertank-error: dmlab: bazel build failed: "
        "q3map2/libs/bytebool.h:37:18: error: two or more data types in declaration specifiers"
    )
