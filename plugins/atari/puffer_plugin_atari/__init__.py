"""Puffer Core plugin for the Arcade Learning Environment: ``atari/<game>``.

Hooks: ``puffer_envs`` (one EnvSpec per ALE v5 game of the installed ale-py, or of a
built-in list when it is missing), ``puffer_docker_layer`` and ``puffer_compat_axes``.
ale-py is imported only when an env is made.
"""

from __future__ import annotations

import functools

from puffer_core import EnvSpec, hookimpl
from puffer_core.specs import CompatAxes, DockerLayer
from puffer_plugin_atari.compat import compat_axes, docker_layer
from puffer_plugin_atari.envs import make_atari
from puffer_plugin_atari.games import game_ids, title

__version__ = "0.1.0"

PLUGIN = "atari"

__all__ = ["PLUGIN", "__version__", "env_specs"]


def env_specs() -> list[EnvSpec]:
    return [
        EnvSpec(
            id=f"{PLUGIN}/{game}",
            creator=functools.partial(make_atari, game),
            api="gymnasium",
            description=f"Atari 2600 {title(game)} (ALE v5: sticky actions; 84x84x4 grayscale unless preprocess=False)",
            requires=("ale_py",),
            install_hint="pip install ale-py",
        )
        for game in game_ids()
    ]


@hookimpl
def puffer_envs() -> list[EnvSpec]:
    return env_specs()


@hookimpl
def puffer_docker_layer() -> DockerLayer:
    return docker_layer()


@hookimpl
def puffer_compat_axes() -> CompatAxes:
    return compat_axes()
