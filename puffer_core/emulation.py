"""The emulators, public face: one env made flat (``GymnasiumEmulator``, ``PettingZooEmulator``),
the layouts of their flat buffers and the buffers themselves. The code lives in
:mod:`puffer_core.env.emulation`; plugins and users import it from here."""

from __future__ import annotations

from puffer_core.env.emulation import (
    ActionLayout,
    Buffers,
    GymnasiumEmulator,
    ObservationLayout,
    PettingZooEmulator,
    emulate,
    observation_dtype,
    offer_observation_buffer,
    to_parallel,
)

__all__ = [
    "ActionLayout",
    "Buffers",
    "GymnasiumEmulator",
    "ObservationLayout",
    "PettingZooEmulator",
    "emulate",
    "observation_dtype",
    "offer_observation_buffer",
    "to_parallel",
]
