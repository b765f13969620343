"""PufferTank's environment layer for PettingZoo: nothing beyond pip."""

from __future__ import annotations

from puffer_core import DockerLayer

__all__ = ["docker_layer"]


def docker_layer() -> DockerLayer:
    """Nothing beyond pip: pygame(-ce), pymunk and open_spiel ship manylinux wheels that bundle
    SDL2 / Chipmunk / OpenSpiel, and with the default ``render_mode=None`` (or ``"rgb_array"``)
    no env opens a display or an audio device, so no X server, SDL or ALSA package is needed."""
    return DockerLayer()
