"""PufferTank's DeepMind Lab build: a Bazel build of the pip package in its own stage.

DeepMind Lab's ``WORKSPACE`` tracks several dependencies at ``master`` and predates
Bzlmod, so current Bazel releases no longer build it as shipped. What builds it (google-
deepmind/lab issue #258, PR #262): Bazel 7.6.1 in WORKSPACE mode (``--enable_bzlmod=false
--enable_workspace=true``; Bazel 8 turns WORKSPACE off by default and 9 removes it),
Abseil pinned to 20230125.3 (``WORKSPACE`` fetches Abseil master, which no longer builds
there), and C++17 for the C++ sources (``--cxxopt=-std=c++17``; Abseil refuses anything
below C++14).

The stage builds against the tank's own Python: Debian 12's ``python3`` 3.11 (the tank
base is Debian bookworm). ``bazel/python.BUILD`` hard-codes ``python3.8`` headers, so the
build points it at 3.11, and NumPy's headers come from NumPy 2 (linked into the Python
include directory, where that rule looks), because a module built against NumPy 1.x does
not import under NumPy 2 while one built against 2.x imports under both.

Every input is pinned to its bytes, so two builds compile the same sources with the same
tools: the stage's Debian image by digest (``debian:bookworm-20260918``, the index digest
the official image's published record gives), DeepMind Lab at one full commit (checked out
detached and verified), the Bazel binary against the sha256 of the release file, and the
build's Python tools (NumPy, setuptools, wheel, packaging) each pinned to the sha256 of the
one file pip installs (``--require-hashes``). What Bazel itself fetches is DeepMind Lab's
``WORKSPACE``'s business: several of its archives carry a sha256 there, and the ones that
track a branch (googletest, bazel-skylib, abseil-py) do not; Abseil is moved to a tag here.
"""

from __future__ import annotations

from puffer_core import BuildStage, DockerLayer

__all__ = ["BASE_IMAGE", "BAZEL_SHA256", "BAZEL_VERSION", "DMLAB_COMMIT", "WHEEL", "docker_layer"]

#: The stage's image: Debian 12 by its multi-platform index digest (the tag alone would float).
BASE_IMAGE = "debian:bookworm-20260918@sha256:f37a335e82bca302e955fa39f9dfe28f1be618f016f8a2b56318e5a5111afc26"
BAZEL_VERSION = "7.6.1"
#: sha256 of bazel-7.6.1-linux-x86_64 as Bazel's release publishes it (the .sha256 file next
#: to the binary); a download that differs fails the step.
BAZEL_SHA256 = "ac6249d1192aea9feaf49dfee2ab50c38cee2454b00cf29bbec985a11795c025"
BAZEL_URL = f"https://github.com/bazelbuild/bazel/releases/download/{BAZEL_VERSION}/bazel-{BAZEL_VERSION}-linux-x86_64"
ABSEIL_VERSION = "20230125.3"
#: The DeepMind Lab revision built: one full commit (master's head, "Propagate exceptions
#: (#244)"), checked out detached and verified; a branch name would build whatever it points at.
DMLAB_COMMIT = "b1db91af5b4d2f3a24466f4632a3e5e1b0829cca"
DMLAB_REPOSITORY = "https://github.com/google-deepmind/lab.git"
PYTHON_VERSION = "3.11"
#: The build's Python tools, each pinned to the one file pip installs on Debian 12's CPython
#: 3.11 x86_64 (NumPy: the cp311 manylinux_2_28 wheel). packaging is wheel's dependency.
BUILD_TOOLS = (
    "numpy==2.4.6 --hash=sha256:89cd468399cfd2504718f0ba50e410dca55a170b61a02ad92bb18c8a65186e93",
    "packaging==26.4 --hash=sha256:81383611a09c1bc0b08b76e0fd5829d7c6824c65b27a6aee339da133f4233ea2",
    "setuptools==80.10.2 --hash=sha256:95b30ddfb717250edb492926c92b5221f7ef3fbcc2b07579bcd4a27da21d0173",
    "wheel==0.48.0 --hash=sha256:3217dcc807155e45db462d7ef2431f5ddda0d7273b700d05a67b271ceb1287ab",
)
SRC = "/opt/dmlab/src"
#: The built wheel, under one fixed name (setuptools spells the project "DeepMind Lab"
#: differently across versions) so the environment layer can copy and install it.
WHEEL = "/opt/dmlab/deepmind_lab-1.0-py3-none-any.whl"

BUILD_APT = (
    "build-essential",
    "ca-certificates",
    "curl",
    "freeglut3-dev",
    "gettext",
    "git",
    "libegl-dev",
    "libffi-dev",
    "libgl-dev",
    "libglu1-mesa-dev",
    "libjpeg-dev",
    "liblua5.1-0-dev",
    "libosmesa6-dev",
    "libsdl2-dev",
    "lua5.1",
    "pkg-config",
    "python3-dev",
    "python3-pip",
    "unzip",
    "zip",
    "zlib1g-dev",
)

#: Libraries the built module loads at runtime: OSMesa for renderer="software",
#: EGL/GL for renderer="hardware".
RUNTIME_APT = ("libegl1", "libgl1", "libosmesa6")

# One shell command per step; `env -C DIR` rather than `cd` (hadolint DL3003).
BUILD_STEPS = (
    f"curl -fsSL -o /tmp/bazel {BAZEL_URL}"
    f" && echo '{BAZEL_SHA256}  /tmp/bazel' | sha256sum --check --strict -"
    " && install -m 0755 /tmp/bazel /usr/local/bin/bazel && rm /tmp/bazel && bazel --version",
    "printf '%s\\n' " + " ".join(f"'{line}'" for line in BUILD_TOOLS) + " > /tmp/build-tools.txt"
    " && python3 -m pip install --no-cache-dir --break-system-packages --require-hashes -r /tmp/build-tools.txt"
    f' && ln -sfn "$(python3 -c "import numpy; print(numpy.get_include())")/numpy"'
    f" /usr/include/python{PYTHON_VERSION}/numpy",
    f"git clone {DMLAB_REPOSITORY} {SRC}"
    f" && git -C {SRC} -c advice.detachedHead=false checkout --detach '{DMLAB_COMMIT}^{{commit}}'"
    f' && test "$(git -C {SRC} rev-parse HEAD)" = {DMLAB_COMMIT}',
    f"echo {BAZEL_VERSION} > {SRC}/.bazelversion"
    " && printf '%s\\n' 'common --enable_bzlmod=false' 'common --enable_workspace=true'"
    f" 'build --cxxopt=-std=c++17' 'build --host_cxxopt=-std=c++17' >> {SRC}/.bazelrc"
    f" && sed -i 's#abseil-cpp-master#abseil-cpp-{ABSEIL_VERSION}#;"
    f" s#abseil-cpp/archive/master.zip#abseil-cpp/archive/refs/tags/{ABSEIL_VERSION}.zip#' {SRC}/WORKSPACE"
    f" && sed -i 's#python3\\.8#python{PYTHON_VERSION}#g' {SRC}/bazel/python.BUILD",
    f"env -C {SRC} bazel build -c opt //python/pip_package:build_pip_package"
    f" && env -C {SRC} PYTHON_BIN_PATH=/usr/bin/python3 ./bazel-bin/python/pip_package/build_pip_package"
    f" /opt/dmlab/dist && cp /opt/dmlab/dist/*.whl {WHEEL}"
    # In the same step, so the stage's cached layer does not keep gigabytes of Bazel output.
    f" && env -C {SRC} bazel shutdown && rm -rf {SRC} /opt/dmlab/dist /root/.cache/bazel",
)

# numpy too: the wheel declares no dependencies, but the module needs numpy to import. The
# hash-locked set (installed before the plugins' steps) already holds it, so nothing is
# downloaded then; rendered without that set, PIP_CONSTRAINT pins it to the common set.
# --no-deps: the wheel is ours, its dependencies are the set's. The report gives the lock
# the wheel's sha256.
INSTALL_STEP = (
    f"mkdir -p /opt/puffertank/reports && python3 -m pip install --no-cache-dir --no-deps"
    f' --report /opt/puffertank/reports/2-plugin-dmlab.json "numpy>=1.23" "{WHEEL}"'
    f' && python3 -c "import deepmind_lab"'
    f" && rm -rf /opt/dmlab /root/.cache/bazel /root/.cache/pip"
)


def docker_layer() -> DockerLayer:
    return DockerLayer(
        apt=RUNTIME_APT,
        run=(INSTALL_STEP,),
        stages=(
            BuildStage(
                name="dmlab",
                # Same OS and Python as the tank's base layer (Debian 12, Python 3.11).
                base=BASE_IMAGE,
                apt=BUILD_APT,
                run=BUILD_STEPS,
                artifacts=(WHEEL,),
            ),
        ),
    )
