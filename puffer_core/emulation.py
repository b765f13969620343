"""The emulators, public face: one env made flat (``GymnasiumEmulator``, ``PettingZooEmulator``),
the layouts of their flat buffers and the buffers themselves. The code lives in
:mod:`puffer_core.env.emulation`; plugins and users import it from here (its ``__all__``, whole)."""

from __future__ import annotations

from puffer_core.env.emulation import *  # noqa: F403  (the face re-exports the module's __all__)
from puffer_core.env.emulation import __all__ as __all__
