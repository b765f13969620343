"""Puffer plugin ``pettingzoo``: PettingZoo's butterfly and classic multi-agent environments.

Ids are ``pettingzoo/<name>`` with PettingZoo's version suffix dropped
(``pettingzoo/pistonball`` is ``pistonball_v6`` on PettingZoo 1.27). Parallel envs are
declared with api ``pettingzoo``; the turn-based classic games are AEC envs (api
``pettingzoo-aec``) that the core's adapter converts to the Parallel API, so every env
here reaches ``PettingZooEmulator`` with one slot per possible agent and a live mask.
Nothing imports pettingzoo until an env is made.
"""

from __future__ import annotations

import functools
from typing import Any

from puffer_core import CompatAxes, DockerLayer, EnvSpec, hookimpl

from puffer_plugin_pettingzoo.compat import compat_axes
from puffer_plugin_pettingzoo.docker import docker_layer
from puffer_plugin_pettingzoo.envs import RESTORABLE, all_entries, make_env
from puffer_plugin_pettingzoo.wrappers import QuietEnvLogger

__version__ = "0.1.0"


@hookimpl
def puffer_envs() -> list[EnvSpec]:
    return [
        EnvSpec(
            id=f"pettingzoo/{entry.name}",
            creator=functools.partial(make_env, entry.family, entry.name, entry.api == "pettingzoo"),
            api=entry.api,
            description=entry.description,
            requires=entry.requires,
            install_hint=entry.install_hint,
            restorable=RESTORABLE.get(entry.name, {}),
        )
        for entry in all_entries()
    ]


@hookimpl
def puffer_wrappers(spec: Any) -> list[Any]:
    """Turn-based classic games: PettingZoo prints every illegal move to stdout (see wrappers.py)."""
    if spec.plugin != "pettingzoo" or spec.api != "pettingzoo-aec":
        return []
    return [functools.partial(QuietEnvLogger, env_id=spec.id)]


@hookimpl
def puffer_docker_layer() -> DockerLayer:
    return docker_layer()


@hookimpl
def puffer_compat_axes() -> CompatAxes:
    return compat_axes()
