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
"""

from __future__ import annotations

from puffer_core import BuildStage, DockerLayer

__all__ = ["BAZEL_VERSION", "DMLAB_REF", "WHEEL", "docker_layer"]

BAZEL_VERSION = "7.6.1"
ABSEIL_VERSION = "20230125.3"
#: The DeepMind Lab revision built; pin a commit here to make the image reproducible.
DMLAB_REF = "master"
PYTHON_VERSION = "3.11"
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
    f"curl -fsSL -o /usr/local/bin/bazel "
    f"https://github.com/bazelbuild/bazel/releases/download/{BAZEL_VERSION}/bazel-{BAZEL_VERSION}-linux-x86_64"
    f" && chmod +x /usr/local/bin/bazel && bazel --version",
    'python3 -m pip install --no-cache-dir --break-system-packages "numpy>=2,<3" "setuptools>=68" "wheel>=0.40"'
    f' && ln -sfn "$(python3 -c "import numpy; print(numpy.get_include())")/numpy"'
    f" /usr/include/python{PYTHON_VERSION}/numpy",
    f"git clone https://github.com/google-deepmind/lab.git {SRC} && git -C {SRC} checkout {DMLAB_REF}",
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

# numpy too: the wheel declares no dependencies, but the module needs numpy to import (and
# the tank's base layer may have none); PIP_CONSTRAINT pins it to the common set.
INSTALL_STEP = (
    f'python3 -m pip install --no-cache-dir "numpy>=1.23" "{WHEEL}"'
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
                base="debian:bookworm",
                apt=BUILD_APT,
                run=BUILD_STEPS,
                artifacts=(WHEEL,),
            ),
        ),
    )
