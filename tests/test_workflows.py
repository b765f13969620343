"""The GitHub workflows run what the project's own commands run: tests call `.ci/run` (the
README's test command, every interpreter demanded) on every supported Python, the weekly matrix
discovers new releases, docs and the release call their nox sessions. `nox -s lint` checks the
workflows themselves (jactionlint)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
CI_RUN = ROOT / ".ci" / "run"
README = ROOT / "README.md"

#: Each workflow and a command one of its `run:` steps must hold.
COMMANDS = {
    "tests.yml": "bash .ci/run",
    "matrix.yml": "nox -s compat -- --discover",
    "docs.yml": "nox -s docs",
    "release.yml": "nox -s dist",
}


def workflow(name: str) -> str:
    path = WORKFLOWS / name
    assert path.is_file(), f"{path.relative_to(ROOT)} is missing"
    return path.read_text()


def supported_pythons() -> list[str]:
    text = (ROOT / "pyproject.toml").read_text()
    return re.findall(r'"Programming Language :: Python :: (3\.\d+)"', text)


def apt_packages(text: str) -> set[str]:
    """The packages of the first `apt-get install` in a script (its continuation lines included)."""
    command = re.search(r"apt-get install ((?:[^\n]*\\\n)*[^\n]*)", text)
    assert command, "no apt-get install"
    words = shlex.split(command.group(1).replace("\\\n", " "))
    return {w for w in words if not w.startswith("-") and w not in (">/dev/null",)}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_workflow_runs_its_command(name):
    assert COMMANDS[name] in workflow(name)


def test_ci_run_is_the_readme_test_command_with_every_interpreter_demanded():
    readme = re.search(r"python -m pip install nox uv && nox (-s [\w ]+)", README.read_text())
    assert readme, "README.md has no test command"
    run = CI_RUN.read_text()
    assert f"nox --error-on-missing-interpreters {readme.group(1).strip()}" in run


def test_tests_run_on_every_supported_python():
    setup = re.search(r"python-version: \|\n((?:\s+3\.\d+\n)+)", workflow("tests.yml"))
    assert setup, "tests.yml sets up no list of Pythons"
    assert supported_pythons(), "pyproject.toml's classifiers name no Python"
    assert sorted(setup.group(1).split()) == sorted(supported_pythons())


def test_the_matrix_installs_what_ci_run_installs_and_keeps_its_results():
    text = workflow("matrix.yml")
    assert apt_packages(text) == apt_packages(CI_RUN.read_text())
    assert "schedule:" in text and "actions/upload-artifact@" in text and "compat_matrix/" in text


def test_docs_publish_site_to_pages_and_the_release_publishes_dist_to_pypi():
    docs = workflow("docs.yml")
    assert "path: site/" in docs and "actions/deploy-pages@" in docs and "pages: write" in docs
    release = workflow("release.yml")
    assert 'tags: ["v*"]' in release and "name: pypi" in release and "id-token: write" in release
    assert "pypa/gh-action-pypi-publish@" in release and "packages-dir: dist/" in release


def test_the_apt_package_reader_reads_continuation_lines():
    script = "apt-get install -y -qq \\\n    a b \\\n    c >/dev/null\nfi\n"
    assert apt_packages(script) == {"a", "b", "c"}
