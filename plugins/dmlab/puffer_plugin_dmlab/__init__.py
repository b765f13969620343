"""Puffer plugin ``dmlab``: DeepMind Lab levels as ``dmlab/<level>``.

DeepMind Lab is not on the package index; it is built from source with Bazel (PufferTank
does this, see ``docker.py``). The envs are listed wherever this plugin is installed, and
making one where ``deepmind_lab`` cannot be imported raises ``MissingDependencyError``
saying how to get it. Nothing here imports ``deepmind_lab`` until an env is made.
"""

from __future__ import annotations

from typing import Any

from puffer_core import AnyOf, CompatAxes, DockerLayer, EnvSpec, IntRange, KwargRule, ListOf, OneOf, Text, hookimpl

from puffer_plugin_dmlab.actions import ACTION_NAMES, IMPALA_ACTION_SET
from puffer_plugin_dmlab.compat import compat_axes
from puffer_plugin_dmlab.docker import DMLAB_COMMIT, docker_layer
from puffer_plugin_dmlab.levels import LEVELS

__all__ = ["ACTION_NAMES", "IMPALA_ACTION_SET", "INSTALL_HINT", "LEVELS", "RESTORABLE", "make_env"]
__version__ = "0.1.0"

#: Read after "needs deepmind_lab, which this Python does not have." (and in `puffer envs`).
INSTALL_HINT = (
    "DeepMind Lab: in PufferTank only (no package index serves it): with DIR a clone of DeepMind Lab's "
    f"source, git -C DIR checkout {DMLAB_COMMIT} && puffer tank build --plugins dmlab --dmlab-source DIR; "
    "or build the wheel yourself as the puffer-plugin-dmlab README describes"
)


_OBSERVATION = Text(max_length=64, pattern=r"[A-Za-z0-9_.]+")
#: The creator kwargs a checkpoint may bring back (EnvSpec.restorable), sizes bounded. Never
#: ``level`` (a script path), ``config``, ``level_cache_dir`` or ``runfiles_path`` (where Lab
#: reads and writes files): those come from the spec or the user only.
RESTORABLE: dict[str, KwargRule] = {
    "observations": AnyOf(_OBSERVATION, ListOf(_OBSERVATION, max_length=16)),
    "width": IntRange(16, 1024),
    "height": IntRange(16, 1024),
    "num_steps": IntRange(1, 64),
    "action_set": OneOf("impala", "full"),
    "renderer": OneOf("software", "hardware"),
    "text_length": IntRange(1, 4096),
}


def make_env(**kwargs: Any) -> Any:
    """Build a ``DMLabEnv`` (imports ``deepmind_lab`` only now)."""
    from puffer_plugin_dmlab.envs import DMLabEnv

    return DMLabEnv(**kwargs)


def _kwargs(level) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"level": level.path}
    if level.language:
        kwargs["observations"] = ("RGB_INTERLEAVED", "INSTR")
    return kwargs


@hookimpl
def puffer_envs() -> list[EnvSpec]:
    return [
        EnvSpec(
            id=f"dmlab/{level.name}",
            creator=make_env,
            kwargs=_kwargs(level),
            api="gymnasium",
            description=level.description,
            requires=("deepmind_lab",),
            install_hint=INSTALL_HINT,
            restorable=RESTORABLE,
        )
        for level in LEVELS.values()
    ]


@hookimpl
def puffer_docker_layer() -> DockerLayer:
    return docker_layer()


@hookimpl
def puffer_compat_axes() -> CompatAxes:
    return compat_axes()
