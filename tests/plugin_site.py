"""Builds folders of real installed-distribution metadata (``*.dist-info``) for plugin tests.

Each fake plugin is a module plus a ``.dist-info`` with METADATA and entry_points.txt, so
``importlib.metadata`` discovers it exactly as it would a pip-installed plugin once the
folder is on ``sys.path`` / ``PYTHONPATH``.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

GOOD = """
import functools
import puffer_core
from puffer_core import EnvSpec, DockerLayer, CompatAxes

def _make(**kwargs):
    import gymnasium
    return gymnasium.make("CartPole-v1", **kwargs)

@puffer_core.hookimpl
def puffer_envs():
    return [
        EnvSpec("good/cartpole", _make, description="a good plugin's cartpole"),
        EnvSpec("good/needy", _make, requires=("definitely_missing_pkg_xyz",),
                install_hint="pip install definitely-missing-pkg-xyz", description="needs a missing package"),
    ]

@puffer_core.hookimpl
def puffer_docker_layer():
    return DockerLayer(apt=("libbz2-dev",), env={"GOOD": "1"})

@puffer_core.hookimpl
def puffer_compat_axes():
    return CompatAxes(package="gymnasium", versions=("1.2.0",), python=("3.11",))
"""

BROKEN_IMPORT = """
import definitely_missing_dependency_of_broken  # noqa: F401  (the point of this plugin)
"""

BAD_SPEC = """
import puffer_core
from puffer_core import EnvSpec

@puffer_core.hookimpl
def puffer_envs():
    return [EnvSpec("NoSlashHere", lambda: None)]
"""

NO_CREATOR = """
import puffer_core
from puffer_core import EnvSpec

@puffer_core.hookimpl
def puffer_envs():
    return [EnvSpec("nocreator/env", None)]
"""


def claims(env_id: str) -> str:
    return f"""
import puffer_core
from puffer_core import EnvSpec

def _make():
    import gymnasium
    return gymnasium.make("CartPole-v1")

@puffer_core.hookimpl
def puffer_envs():
    return [EnvSpec({env_id!r}, _make), EnvSpec({env_id!r}.split("/")[0] + "/own_" + __name__[-1], _make)]
"""


def raises_in(hook: str, exception: str = "SystemExit(3)", when: str = "True") -> str:
    """A plugin ``puffer_plugin_<name>`` with an env ``<name>/cartpole`` and every hook, whose
    ``hook`` raises ``exception`` (Python source) whenever ``when`` (Python source) holds; its
    other hooks return good values (``puffer_adapt`` and ``puffer_wrappers`` nothing)."""
    return f"""
import multiprocessing  # for `when`: whether this is a vector env's worker process
import puffer_core
from puffer_core import CompatAxes, DockerLayer, EnvSpec

NAME = __name__.removeprefix("puffer_plugin_").replace("_", "-")

def _fail(hook):
    if hook == {hook!r} and ({when}):
        raise {exception}

def _make():
    import gymnasium
    return gymnasium.make("CartPole-v1")

@puffer_core.hookimpl
def puffer_envs():
    _fail("puffer_envs")
    return [EnvSpec(NAME + "/cartpole", _make)]

@puffer_core.hookimpl
def puffer_adapt(env, spec):
    _fail("puffer_adapt")

@puffer_core.hookimpl
def puffer_wrappers(spec):
    _fail("puffer_wrappers")

@puffer_core.hookimpl
def puffer_docker_layer():
    _fail("puffer_docker_layer")
    return DockerLayer(apt=("cowsay",))

@puffer_core.hookimpl
def puffer_compat_axes():
    _fail("puffer_compat_axes")
    return CompatAxes(package="gymnasium", versions=("1.2.0",), python=("3.11",))
"""


def write_plugin(site: Path, name: str, source: str, dist: str | None = None, version: str = "1.0.0") -> None:
    """Write module ``puffer_plugin_<name>`` and its dist-info declaring the entry point."""
    module = f"puffer_plugin_{name.replace('-', '_')}"
    dist = dist or f"puffer-plugin-{name}"
    (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[puffer]\n{name} = {module}\n")
    (info / "top_level.txt").write_text(module + "\n")


def site_entry_points(site: Path) -> list[metadata.EntryPoint]:
    """Entry points of the ``puffer`` group found in ``site`` only."""
    found = []
    for dist in metadata.distributions(path=[str(site)]):
        found += [ep for ep in dist.entry_points if ep.group == "puffer"]
    return found


def puffer_env(site: Path | None, extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment with ``site`` on PYTHONPATH, PUFFER_DEBUG unset, ``extra_env`` on top."""
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    env.pop("PUFFER_DEBUG", None)
    env.update(extra_env or {})
    return env


def run_puffer(site: Path | None, *args: str, extra_env: dict[str, str] | None = None, timeout: float = 120):
    """Run the `puffer` CLI in a subprocess with ``site`` on PYTHONPATH."""
    return subprocess.run(
        [sys.executable, "-m", "puffer_core.cli.main", *args],
        capture_output=True,
        text=True,
        env=puffer_env(site, extra_env),
        timeout=timeout,
    )


def run_puffer_many(
    cases: list[tuple[str, ...]], env: dict[str, str], preload: tuple[str, ...] = (), timeout: float = 600
) -> list[subprocess.CompletedProcess]:
    """Many `puffer` command lines, in the order given, each in a process forked from one that
    has imported the CLI (and the modules in ``preload``) with environment ``env``: see
    ``forked_cli.py``. Each case saves the interpreter's start-up, about a second."""
    with tempfile.TemporaryDirectory() as tmp:
        cases_file, results_file = Path(tmp) / "cases.json", Path(tmp) / "results.json"
        cases_file.write_text(json.dumps([list(args) for args in cases]))
        runner = Path(__file__).with_name("forked_cli.py")
        command = [sys.executable, str(runner), str(cases_file), str(results_file), *preload]
        subprocess.run(command, env=env, timeout=timeout, check=True)
        done = json.loads(results_file.read_text())
    return [
        subprocess.CompletedProcess(list(args), r["returncode"], r["stdout"], r["stderr"])
        for args, r in zip(cases, done)
    ]
