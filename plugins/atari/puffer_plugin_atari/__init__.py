"""Puffer Core plugin for the Arcade Learning Environment: ``atari/<game>``.

Hooks: ``puffer_envs`` (one EnvSpec per ALE v5 game of the installed ale-py, or of a
built-in list when it is missing), ``puffer_docker_layer`` and ``puffer_compat_axes``.
ale-py is imported only when an env is made.
"""

from __future__ import annotations

import functools

from puffer_core import CompatAxes, DockerLayer, EnvSpec, hookimpl
from puffer_plugin_atari.compat import compat_axes
from puffer_plugin_atari.docker import docker_layer
from puffer_plugin_atari.envs import MIN_ALE_PY, RESTORABLE, make_atari, make_atari_batch
from puffer_plugin_atari.games import game_ids, gymnasium_id, title

__version__ = "0.1.0"

PLUGIN = "atari"

#: What ``puffer envs`` and ``make`` suggest when ale-py is missing or older than MIN_ALE_PY.
INSTALL_HINT = f"pip install -U 'ale-py>={MIN_ALE_PY}'"

__all__ = ["INSTALL_HINT", "PLUGIN", "__version__", "env_specs"]


def env_specs() -> list[EnvSpec]:
    return [
        EnvSpec(
            id=f"{PLUGIN}/{game}",
            creator=functools.partial(make_atari, game),
            batch_creator=functools.partial(make_atari_batch, game),
            api="gymnasium",
            description=f"Atari 2600 {title(game)} (ALE v5: sticky actions; 84x84x4 grayscale unless preprocess=False)",
            # The import name catches a missing (or unimportable) ale-py, the versioned
            # requirement an installed one too old to drive (0.8: no ROMs, gym API).
            requires=("ale_py", f"ale-py>={MIN_ALE_PY}"),
            install_hint=INSTALL_HINT,
            # The per-life signal: present only on the steps a life is lost, so it costs
            # (almost) no multiprocessing traffic.
            step_info_keys=("life_lost",),
            # One frame per step of 4 frames (the default frameskip) of a 60 Hz screen.
            render_fps=15.0,
            restorable=RESTORABLE,
            aliases=(gymnasium_id(game),),
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
