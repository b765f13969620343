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

from puffer_core import CompatAxes, DockerLayer, EnvSpec, KnownBad, hookimpl

from puffer_plugin_pettingzoo.catalog import all_entries, make_env
from puffer_plugin_pettingzoo.quirks import QuietEnvLogger

__version__ = "0.1.0"

#: PettingZoo releases the matrix tries (newest patch of each minor; 1.24.4 is where
#: gymnasium >= 1.0 became required).
PETTINGZOO_VERSIONS = ("1.22.3", "1.23.1", "1.24.3", "1.24.4", "1.25.0", "1.26.1", "1.27.0")
GYMNASIUM_VERSIONS = ("0.29.1", "1.0.0", "1.2.0")


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
        )
        for entry in all_entries()
    ]


@hookimpl
def puffer_wrappers(spec: Any) -> list[Any]:
    """Turn-based classic games: PettingZoo prints every illegal move to stdout (see quirks.py)."""
    if spec.plugin != "pettingzoo" or spec.api != "pettingzoo-aec":
        return []
    return [functools.partial(QuietEnvLogger, env_id=spec.id)]


@hookimpl
def puffer_docker_layer() -> DockerLayer:
    """Nothing beyond pip: pygame(-ce), pymunk and open_spiel ship manylinux wheels that bundle
    SDL2 / Chipmunk / OpenSpiel, and with the default ``render_mode=None`` (or ``"rgb_array"``)
    no env opens a display or an audio device, so no X server, SDL or ALSA package is needed."""
    return DockerLayer()


@hookimpl
def puffer_compat_axes() -> CompatAxes:
    # Requires-Python and Requires-Dist read from each release's wheel metadata
    # (`pip download --no-deps pettingzoo==X`); they become known-bad cells with that reason.
    return CompatAxes(
        package="pettingzoo",
        versions=PETTINGZOO_VERSIONS,
        python=("3.10", "3.11", "3.12", "3.13"),
        axes={"gymnasium": GYMNASIUM_VERSIONS},
        # Releases up to 1.24.3 turn a 1-element action array into a Python scalar
        # (pistonball), which NumPy 2.4 refuses ("only 0-dimensional arrays can be converted
        # to Python scalars"); they are tried with the last NumPy they work with.
        pins={version: {"numpy": "2.2.6"} for version in ("1.22.3", "1.23.1", "1.24.3")},
        extras=(),
        known_bad=(
            KnownBad(
                when={"pettingzoo": ">=1.24.4", "gymnasium": "<1.0"},
                reason="pettingzoo >= 1.24.4 requires gymnasium >= 1.0.0",
            ),
            KnownBad(
                when={"pettingzoo": "<1.23", "python": ">=3.12"},
                reason="pettingzoo 1.22.x declares Requires-Python < 3.12",
            ),
            KnownBad(
                when={"pettingzoo": ">=1.24.4,<1.26", "python": ">=3.13"},
                reason="pettingzoo 1.24.4 and 1.25.0 declare Requires-Python < 3.13",
            ),
            # Build failures, not metadata: what the matrix logged before these entries.
            KnownBad(
                when={"pettingzoo": "<1.24", "python": "==3.11"},
                reason="its classic extra needs hanabi-learning-environment 0.0.4: no wheel for "
                "Python 3.11, and its CMake build fails there",
            ),
            KnownBad(
                when={"pettingzoo": ">=1.23,<1.24.4", "python": ">=3.12"},
                reason="its butterfly extra pins pygame 2.3.0: no wheel for Python >= 3.12, and "
                "its build fails there",
            ),
        ),
    )
