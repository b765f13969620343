"""`puffer new-plugin`: writes a complete, working plugin distribution to start from."""

from __future__ import annotations

import keyword
import textwrap
from pathlib import Path

from packaging.version import Version

import puffer_core
from puffer_core.errors import APIUsageError
from puffer_core.specs.declarations import plugin_name_problem

__all__ = ["core_range", "scaffold_plugin"]

PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "puffer-plugin-{name}"
version = "0.1.0"
description = "Puffer Core plugin: {name} environments"
readme = "README.md"
requires-python = ">=3.10"
# The puffer-core releases this plugin is written against (`puffer new-plugin` puts the running one's).
dependencies = ["{core}", "gymnasium>=0.29", "numpy"]

[project.optional-dependencies]
test = ["pytest"]

# This line is what makes Puffer Core find the plugin.
[project.entry-points.puffer]
{name} = "{module}"

[tool.setuptools]
packages = ["{module}"]
"""

INIT = '''\
"""Puffer Core plugin `{name}`: declares its environments and what they need."""

from __future__ import annotations

import puffer_core
from puffer_core import CompatAxes, DockerLayer, EnvSpec


def make_guess(**kwargs):
    # Import the environment's own code inside the creator, so `puffer envs` works
    # even where the environment package is missing.
    from {module}.envs import GuessEnv

    return GuessEnv(**kwargs)


@puffer_core.hookimpl
def puffer_envs():
    return [
        EnvSpec(
            id="{name}/guess",
            creator=make_guess,
            kwargs={{"size": 8}},
            description="guess the hidden number from higher/lower hints",
        )
    ]


@puffer_core.hookimpl
def puffer_docker_layer():
    # Debian packages, one-line build steps, env vars and pip installs for PufferTank.
    return DockerLayer()


@puffer_core.hookimpl
def puffer_compat_axes():
    # The versions `nox -s compat` should try for this plugin.
    return CompatAxes(package="gymnasium", versions=("1.2.0",), python=("3.10", "3.11", "3.12"))
'''

ENV = '''\
"""A tiny Gymnasium environment: find the hidden number from higher/lower hints."""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces


class GuessEnv(gymnasium.Env):
    metadata = {{"render_modes": []}}

    def __init__(self, size: int = 8, max_steps: int = 16):
        self.size = int(size)
        self.max_steps = int(max_steps)
        self.observation_space = spaces.Dict(
            {{
                "hint": spaces.Discrete(3),  # 0 lower, 1 correct, 2 higher
                "progress": spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32),
            }}
        )
        self.action_space = spaces.Discrete(self.size)
        self._target = 0
        self._steps = 0

    def _obs(self, hint: int):
        return {{"hint": hint, "progress": np.array([self._steps / self.max_steps], dtype=np.float32)}}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._target = int(self.np_random.integers(self.size))
        self._steps = 0
        return self._obs(1), {{}}

    def step(self, action):
        self._steps += 1
        guess = int(action)
        hint = 1 if guess == self._target else (2 if self._target > guess else 0)
        terminated = hint == 1
        truncated = self._steps >= self.max_steps and not terminated
        return self._obs(hint), float(terminated), terminated, truncated, {{}}
'''

TEST = '''\
"""Tests for the {name} plugin, through Puffer Core's public API."""

import puffer_core
from puffer_core.testing import check_plugin


def test_plugin_passes_puffer_check():
    report = check_plugin("{name}")
    assert report.passed, report.summary()


def test_guess_env_episode_ends():
    env = puffer_core.make("{name}/guess")
    env.reset(seed=0)
    for guess in range(8):
        _, _, terminated, truncated, info = env.step(guess)
        if terminated or truncated:
            break
    assert terminated, "scanning every number must find the target"
    assert info["episode_length"] == guess + 1
'''

README = """\
# puffer-plugin-{name}

A Puffer Core (`puffer-core`) plugin providing:

| id | description |
| --- | --- |
| `{name}/guess` | guess the hidden number from higher/lower hints |

## Install and try

```bash
python -m pip install -e '.[test]'   # [test]: pytest, in this venv
puffer envs --plugin {name}
puffer check {name}
puffer run {name}/guess
python -m pytest tests
```

## Layout

- `pyproject.toml` declares the entry point `[project.entry-points.puffer] {name} = "{module}"`.
- `{module}/__init__.py` implements the hooks (`puffer_envs`, `puffer_docker_layer`,
  `puffer_compat_axes`); see Puffer Core's `docs/writing-plugins.md` for every hook.
- `{module}/envs.py` is the environment itself. Plugins keep one layout: `envs.py`, and
  `wrappers.py`, `docker.py`, `compat.py` once they have those parts.
"""


def core_range(version: str) -> str:
    """The puffer-core requirement of a plugin written against ``version``: its minor release
    before 1.0 (where a minor release may break the API), its major release from 1.0 on."""
    release = Version(version)
    if release.major == 0:
        return f"puffer-core>=0.{release.minor},<0.{release.minor + 1}"
    return f"puffer-core>={release.major}.{release.minor},<{release.major + 1}"


def scaffold_plugin(name: str, directory: Path | None = None, force: bool = False) -> Path:
    """Write plugin ``name`` into ``directory`` (default ``./puffer-plugin-NAME``); returns it."""
    problem = plugin_name_problem(name)
    if problem:
        raise APIUsageError(problem)
    module = "puffer_plugin_" + name.replace("-", "_")
    if not module.isidentifier() or keyword.iskeyword(module):
        raise APIUsageError(f"plugin name {name!r} does not give a valid module name ({module})")
    target = Path(directory) if directory is not None else Path.cwd() / f"puffer-plugin-{name}"
    if target.exists() and any(target.iterdir()) and not force:
        raise APIUsageError(f"{target} exists and is not empty; choose another DIR or pass --force")
    files = {
        "pyproject.toml": PYPROJECT,
        "README.md": README,
        f"{module}/__init__.py": INIT,
        f"{module}/envs.py": ENV,
        f"tests/test_{module}.py": TEST,
    }
    for relative, template in files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            textwrap.dedent(template).format(name=name, module=module, core=core_range(puffer_core.__version__))
        )
    return target
