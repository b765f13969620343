"""Puffer Core plugin for the NetHack Learning Environment: ``nethack/<task>``.

Hooks: ``puffer_envs`` (one EnvSpec per NLE task), ``puffer_wrappers`` (seeding and
episode statistics for this plugin's envs), ``puffer_docker_layer`` (NetHack's build
dependencies) and ``puffer_compat_axes`` (nle versions x gym/gymnasium x Python).
nle is imported only when an env is made.
"""

from __future__ import annotations

import functools
from typing import Any

from puffer_core import CompatAxes, DockerLayer, EnvSpec, hookimpl
from puffer_plugin_nethack.compat import compat_axes
from puffer_plugin_nethack.docker import docker_layer
from puffer_plugin_nethack.envs import (
    DEFAULT_OBSERVATION_KEYS,
    RESTORABLE,
    TASKS,
    api_for_version,
    installed_nle_version,
    make_nethack,
)

__version__ = "0.1.0"

#: What `puffer train nethack/...` starts from (docs/training.md, "NetHack", says why):
#: a recurrent policy, many envs on two workers, short rollouts, score deltas scaled down.
TRAIN_DEFAULTS = {
    "backend": "multiprocessing",
    "num_workers": 2,
    "num_envs": 64,
    "rollout_steps": 64,
    "policy": "lstm",
    "hidden_size": 128,
    "learning_rate": 1e-3,
    "update_epochs": 2,
    "ent_coef": 0.01,
    "reward_scale": 0.1,
    "reward_clip": 10.0,
}
#: The policy learns from the glyphs around the agent and the bottom-line stats.
TRAIN_KWARGS = {"observation_keys": ("glyphs_crop", "blstats")}

PLUGIN = "nethack"

__all__ = ["PLUGIN", "TRAIN_DEFAULTS", "TRAIN_KWARGS", "__version__", "env_specs", "gymnasium_id"]


def env_specs() -> list[EnvSpec]:
    """One EnvSpec per NLE task; the API follows the installed nle (0.9: gym, 1.x: gymnasium)."""
    api = api_for_version(installed_nle_version())
    requires, hint = ("nle",), "pip install nle"
    if api == "gym":  # nle 0.9.x imports pkg_resources, which setuptools 81 removed
        requires, hint = ("nle", "pkg_resources"), "pip install 'setuptools<81' (nle 0.9 imports its pkg_resources)"
    return [
        EnvSpec(
            id=f"{PLUGIN}/{task}",
            creator=functools.partial(make_nethack, task),
            kwargs={"observation_keys": DEFAULT_OBSERVATION_KEYS},
            api=api,
            description=description,
            requires=requires,
            install_hint=hint,
            # One frame per step: 10 a second reads like a fast player (nle says 42).
            render_fps=10.0,
            train_defaults=TRAIN_DEFAULTS,
            train_kwargs=TRAIN_KWARGS,
            restorable=RESTORABLE,
            aliases=(gymnasium_id(cls),),
        )
        for task, (_module, cls, description) in TASKS.items()
    ]


def gymnasium_id(cls: str) -> str:
    """The id nle registers for its class ``cls`` (``NetHackScore-v0``; the full game ``NLE`` is ``NetHack-v0``)."""
    return "NetHack-v0" if cls == "NLE" else f"{cls}-v0"


@hookimpl
def puffer_envs() -> list[EnvSpec]:
    return env_specs()


@hookimpl
def puffer_wrappers(spec: Any) -> list[Any]:
    if getattr(spec, "plugin", None) != PLUGIN:
        return []
    from puffer_plugin_nethack.wrappers import NetHackWrapper

    return [NetHackWrapper]


@hookimpl
def puffer_docker_layer() -> DockerLayer:
    return docker_layer()


@hookimpl
def puffer_compat_axes() -> CompatAxes:
    return compat_axes()
