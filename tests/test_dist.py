"""The release artifacts: the checks of tests/dist_check.py, and `nox -s dist`'s wheels installed
into a fresh virtual environment, without the checkout, as a stranger installs them."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
from dist_check import (
    ROOT,
    Source,
    dist_problems,
    release_problems,
    sdist_problems,
    sources,
    suite_files,
    wheel_problems,
)

import puffer_core
from puffer_core.matrix.model import DEFAULT_PYTHON

LICENSE = (ROOT / "LICENSE").read_text()
NETHACK = next(source for source in sources() if source.name == "puffer-plugin-nethack")
CORE = sources()[0]
#: noxfile.TORCH: the version of this machine's local CPU wheel (pip finds it through its find-links).
TORCH_PIN = "torch==2.13.0"


def metadata(source: Source, **fields: str) -> str:
    """The METADATA / PKG-INFO setuptools writes for ``source`` (``fields`` override, '' drops one)."""
    headers = {
        "Metadata-Version": "2.4",
        "Name": source.name,
        "Version": source.version(),
        "License-Expression": "MIT",
        "License-File": "LICENSE",
        **fields,
    }
    head = "".join(f"{key}: {value}\n" for key, value in headers.items() if value)
    return head + "\n" + (source.folder / "README.md").read_text()


def make_wheel(path: Path, source: Source, files: dict[str, str | None]) -> Path:
    """A wheel of ``source`` as setuptools builds it, with ``files`` added (None: left out)."""
    info = f"{source.stem}-{source.version()}.dist-info"
    members = {
        f"{source.package}/__init__.py": (source.folder / source.package / "__init__.py").read_text(),
        f"{info}/METADATA": metadata(source),
        f"{info}/licenses/LICENSE": LICENSE,
        f"{info}/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/RECORD": "",
        **files,
    }
    wheel = path / f"{source.stem}-{source.version()}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in members.items():
            if text is not None:
                archive.writestr(name, text)
    return wheel


def make_sdist(path: Path, source: Source, files: dict[str, str | None]) -> Path:
    """An sdist of ``source`` as setuptools builds it (its tests/ for a plugin), ``files`` added."""
    top = f"{source.stem}-{source.version()}"
    members: dict[str, str | None] = {
        "PKG-INFO": metadata(source),
        "pyproject.toml": (source.folder / "pyproject.toml").read_text(),
        "README.md": (source.folder / "README.md").read_text(),
        "LICENSE": LICENSE,
        f"{source.package}/__init__.py": "",
        f"{source.stem}.egg-info/SOURCES.txt": "",
    }
    if source.plugin:
        members.update(dict.fromkeys(suite_files(source), ""))
    members.update(files)
    sdist = path / f"{top}.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for name, text in members.items():
            if text is not None:
                data = text.encode()
                info = tarfile.TarInfo(f"{top}/{name}")
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
    return sdist


def only_problem(problems: list[str], *fragments: str) -> str:
    """The one problem found: one line, naming the file and what is wrong."""
    assert len(problems) == 1, problems
    assert "\n" not in problems[0] and all(fragment in problems[0] for fragment in fragments), problems[0]
    return problems[0]


def test_a_wheel_as_setuptools_builds_it_passes(tmp_path):
    assert wheel_problems(make_wheel(tmp_path, NETHACK, {}), NETHACK, LICENSE) == []
    assert sdist_problems(make_sdist(tmp_path, NETHACK, {}), NETHACK, LICENSE) == []


@pytest.mark.parametrize(
    ("files", "fragments"),
    [
        ({"puffer_core/__init__.py": ""}, ["puffer_core/__init__.py is not part of puffer_plugin_nethack"]),
        ({"tests/test_envs.py": ""}, ["tests/test_envs.py is not part of"]),
        ({"build/lib/puffer_plugin_nethack/envs.py": ""}, ["build/lib/puffer_plugin_nethack/envs.py is not part of"]),
        ({"puffer_plugin_nethack/tests/test_x.py": ""}, ["puffer_plugin_nethack/tests/test_x.py is test, cache"]),
        ({"puffer_plugin_nethack/__pycache__/envs.cpython-311.pyc": ""}, ["__pycache__/envs.cpython-311.pyc is test"]),
        ({"{info}/licenses/LICENSE": None}, ["no LICENSE in", ".dist-info/licenses"]),
        ({"{info}/licenses/LICENSE": "All rights reserved.\n"}, ["LICENSE differs"]),
        ({"puffer_plugin_nethack/__init__.py": None}, ["no puffer_plugin_nethack/__init__.py"]),
    ],
    ids=[
        "other-package",
        "tests",
        "build-leftover",
        "tests-inside",
        "bytecode",
        "no-license",
        "other-license",
        "empty",
    ],
)
def test_a_wheel_with_more_or_less_than_its_package_is_refused(tmp_path, files, fragments):
    info = f"{NETHACK.stem}-{NETHACK.version()}.dist-info"
    wheel = make_wheel(tmp_path, NETHACK, {name.format(info=info): text for name, text in files.items()})
    problem = only_problem(wheel_problems(wheel, NETHACK, LICENSE), *fragments)
    assert problem.startswith(f"{wheel}: ")


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"Version": "9.9.9"}, f"its metadata says version 9.9.9, the source {NETHACK.version()}"),
        ({"License-Expression": ""}, "lacks License-Expression MIT"),
        ({"Name": "puffer-plugin-other"}, "names 'puffer-plugin-other'"),
    ],
)
def test_a_wheel_whose_metadata_disagrees_is_refused(tmp_path, fields, fragment):
    info = f"{NETHACK.stem}-{NETHACK.version()}.dist-info"
    wheel = make_wheel(tmp_path, NETHACK, {f"{info}/METADATA": metadata(NETHACK, **fields)})
    only_problem(wheel_problems(wheel, NETHACK, LICENSE), str(wheel), fragment)
    stale = make_wheel(tmp_path, NETHACK, {f"{info}/METADATA": metadata(NETHACK).replace("NetHack", "Nethack")})
    only_problem(wheel_problems(stale, NETHACK, LICENSE), "long description is not plugins/nethack/README.md")


@pytest.mark.parametrize(
    ("source", "files", "fragment"),
    [
        (CORE, {"tests/test_atomic.py": ""}, "tests/test_atomic.py does not belong in it"),
        (NETHACK, {"tests/test_nethack_envs.py": None}, "its tests/ lacks tests/test_nethack_envs.py"),
        (NETHACK, {"tests/__pycache__/conftest.cpython-311.pyc": ""}, "tests/__pycache__/conftest"),
        (NETHACK, {"LICENSE": None}, "LICENSE is missing"),
        (NETHACK, {"build/lib/x.py": ""}, "build/lib/x.py does not belong in it"),
    ],
    ids=["core-tests", "plugin-tests-incomplete", "bytecode", "no-license", "build-leftover"],
)
def test_an_sdist_with_more_or_less_than_it_should_is_refused(tmp_path, source, files, fragment):
    sdist = make_sdist(tmp_path, source, files)
    only_problem(sdist_problems(sdist, source, LICENSE), str(sdist), fragment)


def test_dist_wants_one_wheel_and_one_sdist_of_each_distribution_and_nothing_else(tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    problems = dist_problems(tmp_path)
    assert f"{tmp_path}/notes.txt: not an artifact of this checkout's distributions at their versions" in problems
    for source in sources():
        stem = f"{source.stem}-{source.version()}"
        assert f"{tmp_path}/{stem}-py3-none-any.whl: missing (the wheel of {source.name})" in problems
        assert f"{tmp_path}/{stem}.tar.gz: missing (the sdist of {source.name})" in problems


def test_the_checkout_versions_agree():
    """One version per distribution (its __version__), each plugin's puffer-core range admits
    the core's, and CHANGELOG.md, CITATION.cff, the common extra and LICENSE copies match."""
    assert release_problems() == []
    assert 'version = { attr = "puffer_core.__version__" }' in (ROOT / "pyproject.toml").read_text()
    assert puffer_core.__version__ == CORE.version()


def release_copy(tmp_path: Path) -> Path:
    """The files release_problems reads, copied from the checkout to ``tmp_path``."""
    names = ["pyproject.toml", "LICENSE", "CHANGELOG.md", "CITATION.cff", "puffer_core/__init__.py"]
    for source in sources()[1:]:
        folder = source.folder.relative_to(ROOT).as_posix()
        names += [f"{folder}/pyproject.toml", f"{folder}/LICENSE", f"{folder}/{source.package}/__init__.py"]
    for name in names:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


@pytest.mark.parametrize(
    ("path", "pattern", "new", "fragment"),
    [
        ("plugins/nethack/pyproject.toml", r'"puffer-core[^"]*"', '"puffer-core"', "declare the puffer-core range"),
        ("plugins/atari/pyproject.toml", r'"puffer-core[^"]*"', '"puffer-core>=99.0,<100"', "does not admit"),
        ("plugins/dmlab/pyproject.toml", r'dynamic = \["version"\]', 'version = "0.1.0"', "must be dynamic"),
        ("puffer_core/__init__.py", r'__version__ = "[^"]*"', '__version__ = "99.0.0"', "names no release 99.0.0"),
        ("plugins/pettingzoo/LICENSE", "MIT License", "Other License", "pettingzoo/LICENSE is missing or differs"),
        (
            "plugins/nethack/puffer_plugin_nethack/__init__.py",
            r'__version__ = "[^"]*"',
            '__version__ = "99.0.0"',
            "common extra pins",
        ),
    ],
    ids=["no-range", "range-misses-core", "static-version", "no-changelog-entry", "license-copy", "common-extra"],
)
def test_release_problems_name_the_file_and_the_fix(tmp_path, path, pattern, new, fragment):
    root = release_copy(tmp_path)
    text, found = re.subn(pattern, new, (root / path).read_text(), count=1)
    assert found == 1, f"{path} has no {pattern}"
    (root / path).write_text(text)
    problems = release_problems(root)
    assert problems and all("\n" not in problem for problem in problems), problems
    assert any(fragment in problem for problem in problems), problems


def fresh_env() -> dict[str, str]:
    """This environment without what would put the checkout, a venv or a test's own matrix data on a
    child's path."""
    drop = {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PUFFER_LOAD_PLUGINS", "PUFFER_DISABLE_PLUGINS"}
    drop.add("PUFFER_VERIFIED_DIR")  # puffer doctor's data: the installed puffer-core's own
    return {key: value for key, value in os.environ.items() if key not in drop}


def nox_dist(out: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "nox", "--noxfile", str(ROOT / "noxfile.py"), "-s", "dist", "--", str(out)]
    return subprocess.run(command, capture_output=True, text=True, env=fresh_env(), cwd=ROOT, timeout=900)


@pytest.mark.dist
def test_dist_refuses_a_folder_that_holds_more_than_artifacts(tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    proc = nox_dist(tmp_path)
    assert proc.returncode != 0
    assert f"{tmp_path} holds notes.txt, not only built artifacts: clear it" in proc.stdout + proc.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


class FreshVenv:
    """A new DEFAULT_PYTHON venv (with pip, as a user has) whose commands run from an empty
    folder with nothing of the checkout on their path."""

    def __init__(self, folder: Path, uv: str):
        self.venv, self.cwd, self.env = folder / "venv", folder / "empty", fresh_env()
        self.cwd.mkdir(parents=True)
        make_venv = [uv, "venv", "-q", "--seed", "--python", DEFAULT_PYTHON, str(self.venv)]
        subprocess.run(make_venv, check=True, env=self.env, timeout=300)
        self.site = self.venv / "lib" / f"python{DEFAULT_PYTHON}" / "site-packages"

    def pip_install(self, *args: str) -> None:
        pip = [str(self.venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run([*pip, *args], check=True, env=self.env, cwd=self.cwd, timeout=900)

    def run(self, command: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        path = str(self.venv / "bin" / command)
        env, cwd = self.env, self.cwd
        return subprocess.run([path, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """`nox -s dist`'s artifacts, built once for the module's install tests."""
    dist = tmp_path_factory.mktemp("dist") / "dist"
    started = time.monotonic()
    proc = nox_dist(dist)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    print(f"nox -s dist {time.monotonic() - started:.1f} s")
    return dist


@pytest.mark.slow
@pytest.mark.dist
def test_the_built_wheels_install_and_run_without_the_checkout(built, tmp_path):
    """As a stranger installs: puffer-core from dist/ (the local index), then `pip install -c
    <(puffer constraints) puffer-plugin-nethack`, third-party packages from the package index."""
    venv = FreshVenv(tmp_path, shutil.which("uv") or pytest.fail("uv is part of the dev extra"))
    started = time.monotonic()
    venv.pip_install("--find-links", str(built), f"puffer-core=={puffer_core.__version__}")  # never a namesake
    printed = venv.run("puffer", "constraints")
    assert printed.returncode == 0, printed.stderr
    # The set the wheel carries is the checkout's for this Python: what the matrix verified.
    assert printed.stdout == (ROOT / "puffer_core/matrix/verified" / f"constraints-py{DEFAULT_PYTHON}.txt").read_text()
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(printed.stdout)
    venv.pip_install("--find-links", str(built), "-c", str(constraints), "puffer-plugin-nethack")
    installed = time.monotonic()

    where = venv.run("python", "-c", "import puffer_core, puffer_plugin_nethack as p; print(p.__file__)")
    assert where.stdout.strip() == str(venv.site / "puffer_plugin_nethack" / "__init__.py"), where.stderr
    # puffer-core is the one built here, not a namesake from the index.
    core = "puffer_core/__init__.py"
    assert (venv.site / core).read_bytes() == (ROOT / core).read_bytes()
    pinned = dict(line.split("==") for line in printed.stdout.splitlines() if "==" in line and line[0] != "#")
    freeze = venv.run("python", "-m", "pip", "freeze", "--all").stdout.splitlines()
    for name, version in (line.split("==") for line in freeze if "==" in line):
        if name.lower() in pinned:
            assert version == pinned[name.lower()], name  # within the verified set
    version = venv.run("puffer", "--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.splitlines()[0].startswith(f"puffer-core {puffer_core.__version__} (Python {DEFAULT_PYTHON}.")
    assert f"puffer-plugin-nethack {NETHACK.version()} (plugin nethack)" in version.stdout.splitlines()
    result = venv.run("puffer", "run", "nethack/score", "--steps", "200", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["steps"] >= 200
    print(f"pip install {installed - started:.1f} s, the commands {time.monotonic() - installed:.1f} s")


@pytest.mark.slow
@pytest.mark.dist
def test_the_train_extra_installs_and_trains_without_the_checkout(built, tmp_path):
    """`pip install 'puffer-core[train]'` from dist/, then `puffer train classic/probe_1`. torch
    is pinned to the machine's local CPU wheel: unpinned, it is a multi-GB CUDA build."""
    venv = FreshVenv(tmp_path, shutil.which("uv") or pytest.fail("uv is part of the dev extra"))
    venv.pip_install("--find-links", str(built), f"puffer-core[train]=={puffer_core.__version__}", TORCH_PIN)
    out = tmp_path / "run"
    result = venv.run("puffer", "train", "classic/probe_1", "--steps", "2048", "--out", str(out), "--json", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(result.stdout)
    assert summary["steps"] >= 2048, summary
    assert (out / "policy.pt").is_file() and (out / "curve.csv").is_file()
