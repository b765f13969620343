"""PufferTank's DeepMind Lab build: Bazel builds the pip package in its own stage, offline.

DeepMind Lab's ``WORKSPACE`` downloads about sixteen archives, and current Bazel releases
no longer build it as shipped; neither Bazel nor those archives can be downloaded where
PufferTank is built. What is there: Debian 12's packages. So the stage builds with
Debian's Bazel 4.2.3 (``bazel-bootstrap``) in WORKSPACE mode, on the tank's own base layer
(Debian 12, the Python 3.11 of ``/opt/venv``), with our replacement ``WORKSPACE``
(``bazel/`` beside this file) that declares every repository DeepMind Lab names over the
system libraries (Abseil, Eigen, GLib, libxml2, Lua 5.1, libjpeg, libpng, zlib, SDL2,
OSMesa) and Bazel's own rule sets: nothing is downloaded but Debian's packages and the
build's Python tools from the package index. ``bazel/README.md`` lists what each of our
files works around.

The source is an input, never fetched and never part of this repository (DeepMind Lab is
GPL): ``puffer tank build --dmlab-source DIR`` (or ``PUFFER_DMLAB_SOURCE``), a checkout of
:data:`DMLAB_COMMIT` (verified with git) or a snapshot naming its commit in
``DIR/.dmlab-commit`` (a ``git archive`` holds no history to ask). The build step applies
our files over the copy in the stage, builds, and removes Bazel's output in the same step;
when Bazel fails, the step prints Bazel's whole log, then the one line that matters (the
first compiler ``error:`` or missing command, else Bazel's first ``ERROR:``), which ``puffer tank build``
reports (the full log is kept in ``~/.cache/puffertank/logs``).

The module is built against NumPy 2's headers (a module built against NumPy 1.x does not
import under NumPy 2, one built against 2.x imports under both). ``deepmind_lab`` imports
``dm_env``, ``six`` and ``pkg_resources`` (setuptools) when it loads: the layer's pip
requirements.
"""

from __future__ import annotations

import base64
import gzip
import io
import pathlib
import subprocess
import tarfile

from puffer_core import BuildStage, DockerLayer, StageSource

__all__ = [
    "COMMIT_FILE",
    "DMLAB_COMMIT",
    "SOURCE",
    "WHEEL",
    "build_files",
    "check_source",
    "docker_layer",
]

#: The DeepMind Lab revision built: one full commit (master's head, "Propagate exceptions (#244)").
DMLAB_COMMIT = "b1db91af5b4d2f3a24466f4632a3e5e1b0829cca"
DMLAB_REPOSITORY = "https://github.com/google-deepmind/lab.git"
#: A snapshot without .git names its commit in this file (e.g. `git rev-parse HEAD > DIR/.dmlab-commit`).
COMMIT_FILE = ".dmlab-commit"
SRC = "/opt/dmlab/src"
#: Bazel's output, removed in the step that made it.
BAZEL_ROOT = "/tmp/dmlab-bazel"
BAZEL_LOG = "/tmp/dmlab-bazel.log"
#: The built wheel, under one fixed name (the environment layer copies and installs it).
WHEEL = "/opt/dmlab/deepmind_lab-1.0-py3-none-any.whl"
#: Our files applied over DeepMind Lab's source (package data): the WORKSPACE replaces
#: DeepMind Lab's, the rest go to puffer_build/ and .bazelrc.
BUILD_DIR = pathlib.Path(__file__).with_name("bazel")
BUILD_FILES = {
    "WORKSPACE": "WORKSPACE",
    "BUILD": "puffer_build/BUILD",
    "system_libs.bzl": "puffer_build/system_libs.bzl",
    "bazelrc": ".bazelrc",
}

#: The build's Python tools, each pinned to the one file pip installs on CPython 3.11 x86_64
#: (NumPy: the cp311 manylinux_2_28 wheel; its headers are what the module compiles against).
BUILD_TOOLS = (
    "numpy==2.4.6 --hash=sha256:89cd468399cfd2504718f0ba50e410dca55a170b61a02ad92bb18c8a65186e93",
    "packaging==26.4 --hash=sha256:81383611a09c1bc0b08b76e0fd5829d7c6824c65b27a6aee339da133f4233ea2",
    "setuptools==80.10.2 --hash=sha256:95b30ddfb717250edb492926c92b5221f7ef3fbcc2b07579bcd4a27da21d0173",
    "wheel==0.48.0 --hash=sha256:3217dcc807155e45db462d7ef2431f5ddda0d7273b700d05a67b271ceb1287ab",
)

#: Debian 12's packages the build takes in place of DeepMind Lab's downloads.
BUILD_APT = (
    "bazel-bootstrap",  # Bazel 4.2.3
    "bazel-platforms",
    "build-essential",
    "libabsl-dev",
    "libegl-dev",
    "libeigen3-dev",
    "libgl-dev",
    "libglib2.0-dev",
    "libjpeg-dev",
    "liblua5.1-0-dev",
    "libosmesa6-dev",
    "libpng-dev",
    "libsdl2-dev",
    "libxml2-dev",
    "python3-dev",
    "zlib1g-dev",
    "zip",  # the genrules that pack the assets into .pk3 files
)

#: What the built module loads at runtime: the system libraries it links (DeepMind Lab would
#: have linked its own copies in), OSMesa for renderer="software", EGL/GL for "hardware".
RUNTIME_APT = (
    "libabsl20220623",
    "libegl1",
    "libgl1",
    "libglib2.0-0",
    "libjpeg62-turbo",
    "liblua5.1-0",
    "libosmesa6",
    "libpng16-16",
    "libsdl2-2.0-0",
    "libxml2",
    "zip",  # compile_map.sh packs the maps the levels generate at runtime (or the level aborts)
    "zlib1g",
)
#: What ``import deepmind_lab`` imports (its __init__ loads dmenv_module, which needs dm_env and
#: six; pkg_resources comes with setuptools, already in the set).
RUNTIME_PIP = ("dm-env", "six")


def _how_to_get() -> str:
    return (
        f"DeepMind Lab's source at commit {DMLAB_COMMIT}: git clone {DMLAB_REPOSITORY} DIR && "
        f"git -C DIR checkout {DMLAB_COMMIT} (a snapshot without .git: write that commit into DIR/{COMMIT_FILE})"
    )


def check_source(folder: pathlib.Path) -> str | None:
    """The problem with ``folder`` as the source to build, in one line, or None.

    A git checkout is asked for its HEAD; a snapshot without ``.git`` must name its commit in
    :data:`COMMIT_FILE`. Either way the commit must be :data:`DMLAB_COMMIT`.
    """
    folder = pathlib.Path(folder)
    workspace = folder / "WORKSPACE"
    if not workspace.is_file() or "org_deepmind_lab" not in workspace.read_text(errors="replace"):
        return f"not DeepMind Lab's source (no WORKSPACE naming org_deepmind_lab). {_how_to_get()}"
    if (folder / ".git").exists():
        try:
            proc = subprocess.run(
                ["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=60
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"a git checkout, but git could not say its commit ({exc}); install git"
        if proc.returncode != 0:
            return f"a git checkout, but `git rev-parse HEAD` failed: {proc.stderr.strip().splitlines()[-1:]}"
        commit, how = proc.stdout.strip(), "checked out"
    elif (folder / COMMIT_FILE).is_file():
        commit, how = (folder / COMMIT_FILE).read_text().strip(), f"named in {COMMIT_FILE}"
    else:
        return (
            f"no .git to verify the commit with and no {COMMIT_FILE} naming it; "
            f"for a snapshot of {DMLAB_COMMIT}, write that commit into DIR/{COMMIT_FILE}"
        )
    if commit != DMLAB_COMMIT:
        return (
            f"DeepMind Lab's source is at commit {commit} ({how}), but the plugin builds {DMLAB_COMMIT}: "
            f"git -C DIR checkout {DMLAB_COMMIT}"
        )
    return None


SOURCE = StageSource(name="dmlab-source", path=SRC, how_to_get=_how_to_get(), verify=check_source)


def build_files() -> bytes:
    """Our build files as a gzipped tar, laid out as they go over the source (fixed bytes)."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for name, target in BUILD_FILES.items():
            data = (BUILD_DIR / name).read_bytes()
            info = tarfile.TarInfo(target)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _steps() -> tuple[str, ...]:
    tools = (
        "printf '%s\\n' " + " ".join(f"'{line}'" for line in BUILD_TOOLS) + " > /tmp/build-tools.txt"
        " && python3 -m pip install --no-cache-dir --require-hashes -r /tmp/build-tools.txt && rm /tmp/build-tools.txt"
    )
    patch = (
        f": apply puffer_plugin_dmlab/bazel/ over the source"
        f" && echo {base64.b64encode(build_files()).decode()} | base64 -d | tar -xz -C {SRC}"
    )
    bazel = f"bazel --output_user_root={BAZEL_ROOT}"
    build = (
        f"{{ env -C {SRC} {bazel} build --spawn_strategy=standalone //python/pip_package:build_pip_package"
        f" > {BAZEL_LOG} 2>&1 || {{ cat {BAZEL_LOG};"
        f' echo "puffertank-error: dmlab: bazel build failed:'
        f" $(grep -m1 -E ': error: |: command not found' {BAZEL_LOG}"
        f" || grep -m1 '^ERROR: ' {BAZEL_LOG} || tail -n1 {BAZEL_LOG})\"; exit 1; }}; }}"
        f' && env -C {SRC} PYTHON_BIN_PATH="$(command -v python3)" ./bazel-bin/python/pip_package/build_pip_package'
        f" /opt/dmlab/dist && cp /opt/dmlab/dist/*.whl {WHEEL}"
        # In the same step, so no layer keeps Bazel's gigabytes.
        f" && env -C {SRC} {bazel} shutdown && rm -rf {SRC} /opt/dmlab/dist {BAZEL_ROOT} {BAZEL_LOG}"
    )
    return (tools, patch, build)


# --no-deps: the wheel's requirements (numpy, six) are in the hash-locked set with dm-env.
INSTALL_STEP = (
    f"mkdir -p /opt/puffertank/reports && python3 -m pip install --no-cache-dir --no-deps"
    f' --report /opt/puffertank/reports/2-plugin-dmlab.json "{WHEEL}"'
    f' && python3 -c "import deepmind_lab"'
    f" && rm -rf /opt/dmlab /root/.cache/pip"
)


def docker_layer() -> DockerLayer:
    return DockerLayer(
        apt=RUNTIME_APT,
        pip=RUNTIME_PIP,
        run=(INSTALL_STEP,),
        stages=(
            BuildStage(
                name="dmlab",
                # The tank's own base layer: Debian 12 and the Python 3.11 the module is built for.
                base="${BASE}",
                apt=BUILD_APT,
                run=_steps(),
                artifacts=(WHEEL,),
                sources=(SOURCE,),
            ),
        ),
    )
