"""Which PettingZoo environments exist, and how to build one.

The catalogue is found without importing pettingzoo (importing it pulls in pygame): the
package directory is scanned for ``<family>/<name>_v<N>.py`` modules and the highest
version of each name wins, so ``pettingzoo/pistonball`` follows whatever ``pistonball_vN``
the installed release ships. Names known from PettingZoo 1.27 are always listed, so
``puffer envs`` shows them where pettingzoo is missing too.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from puffer_core import Flag, FloatRange, IntRange, KwargRule, OneOf
from puffer_core.errors import PluginError

__all__ = [
    "FAMILIES",
    "KNOWN",
    "RESTORABLE",
    "Entry",
    "all_entries",
    "installed_modules",
    "make_env",
    "scan_modules",
]

FAMILIES = ("butterfly", "classic")

_BUTTERFLY_REQUIRES = ("pettingzoo", "pygame", "pymunk")
_CLASSIC_REQUIRES = ("pettingzoo", "pygame")
_BUTTERFLY_HINT = "pip install 'pettingzoo[butterfly]'"
_CLASSIC_HINT = "pip install 'pettingzoo[classic]'"


@dataclass(frozen=True)
class Entry:
    """One PettingZoo environment as the plugin exposes it."""

    family: str
    name: str
    #: "pettingzoo" (Parallel API) or "pettingzoo-aec" (AEC, converted by the core's adapter).
    api: str
    description: str
    requires: tuple[str, ...]
    install_hint: str


def _butterfly(name: str, description: str) -> Entry:
    return Entry("butterfly", name, "pettingzoo", description, _BUTTERFLY_REQUIRES, _BUTTERFLY_HINT)


def _classic(name: str, description: str, extra: tuple[str, ...] = (), hint: str = _CLASSIC_HINT) -> Entry:
    return Entry("classic", name, "pettingzoo-aec", description, _CLASSIC_REQUIRES + extra, hint)


#: What PettingZoo 1.27 provides, with one-line descriptions.
KNOWN: dict[str, Entry] = {
    entry.name: entry
    for entry in (
        _butterfly("pistonball", "cooperative: 20 pistons move a ball to the left wall (images, continuous)"),
        _butterfly("knights_archers_zombies", "cooperative: knights and archers stop a zombie horde (vectors)"),
        _butterfly("cooperative_pong", "cooperative: two paddles keep a ball in play as long as possible"),
        _classic("chess", "turn-based: chess, with legal-move action mask", ("chess",)),
        _classic("connect_four", "turn-based: connect four, with legal-move action mask"),
        _classic("tictactoe", "turn-based: tic-tac-toe, with legal-move action mask"),
        _classic("go", "turn-based: Go on a 19x19 board, with legal-move action mask"),
        _classic("leduc_holdem", "turn-based: Leduc hold'em poker (RLCard), with action mask", ("rlcard",)),
        _classic("texas_holdem", "turn-based: limit Texas hold'em (RLCard), with action mask", ("rlcard",)),
        _classic("texas_holdem_no_limit", "turn-based: no-limit Texas hold'em (RLCard), with action mask", ("rlcard",)),
        _classic(
            "hanabi",
            "turn-based cooperative: Hanabi card game (OpenSpiel), with action mask",
            ("pyspiel", "shimmy"),
            "pip install 'pettingzoo[classic]' open_spiel shimmy (OpenSpiel wheels need Python >= 3.11)",
        ),
        # Simultaneous moves: PettingZoo ships it with a Parallel API.
        Entry(
            "classic",
            "rps",
            "pettingzoo",
            "simultaneous: rock-paper-scissors, repeated",
            _CLASSIC_REQUIRES,
            _CLASSIC_HINT,
        ),
    )
}

_MAX_CYCLES = {"max_cycles": IntRange(1, 1_000_000)}
_SPEED = IntRange(1, 100)
_REWARD = FloatRange(-1e6, 1e6)
#: The creator kwargs a checkpoint may bring back (EnvSpec.restorable), per env name: each
#: game's own knobs, with sizes bounded. Envs not listed restore none.
RESTORABLE: dict[str, dict[str, KwargRule]] = {
    "pistonball": {
        **_MAX_CYCLES,
        "n_pistons": IntRange(2, 40),
        "time_penalty": _REWARD,
        **{name: Flag() for name in ("continuous", "random_drop", "random_rotate")},
    },
    "knights_archers_zombies": {
        **_MAX_CYCLES,
        **{name: IntRange(0, 10) for name in ("num_archers", "num_knights")},
        **{name: IntRange(0, 100) for name in ("max_zombies", "max_arrows")},
        "spawn_rate": IntRange(1, 1_000),
        **{
            name: Flag()
            for name in ("vector_state", "use_typemasks", "killable_knights", "killable_archers", "line_death")
        },
        "pad_observation": Flag(),
    },
    "cooperative_pong": {
        **_MAX_CYCLES,
        **{name: _SPEED for name in ("ball_speed", "left_paddle_speed", "right_paddle_speed")},
        **{name: Flag() for name in ("cake_paddle", "bounce_randomness")},
        **{name: _REWARD for name in ("max_reward", "off_screen_penalty")},
    },
    "go": {"board_size": IntRange(2, 19), "komi": FloatRange(-100, 100)},
    "texas_holdem": {"num_players": IntRange(2, 10)},
    "texas_holdem_no_limit": {"num_players": IntRange(2, 10)},
    "rps": {**_MAX_CYCLES, "num_actions": OneOf(3, 5)},
}

_MODULE_RE = re.compile(r"^(?P<name>[a-z][a-z0-9_]*?)_v(?P<version>\d+)\.py$")


def installed_modules() -> dict[tuple[str, str], str]:
    """``(family, name) -> module`` for the installed pettingzoo, highest version each; {} if absent."""
    try:
        spec = importlib.util.find_spec("pettingzoo")
    except (ImportError, ValueError):
        return {}
    if spec is None or not spec.submodule_search_locations:
        return {}
    return scan_modules(spec.submodule_search_locations)


def scan_modules(roots: Iterable[str], package: str = "pettingzoo") -> dict[tuple[str, str], str]:
    """``(family, name) -> "<package>.<family>.<name>_vN"`` for the env modules under ``roots``."""
    found: dict[tuple[str, str], tuple[int, str]] = {}
    for root in roots:
        for family in FAMILIES:
            try:
                files = os.listdir(os.path.join(root, family))
            except OSError:
                continue
            for filename in files:
                match = _MODULE_RE.match(filename)
                if match is None:
                    continue
                version = int(match["version"])
                key = (family, match["name"])
                if key not in found or version > found[key][0]:
                    found[key] = (version, f"{package}.{family}.{filename[:-3]}")
    return {key: module for key, (_version, module) in found.items()}


def all_entries() -> list[Entry]:
    """Every environment to list: the known ones, plus any other the installed release ships."""
    entries = dict(KNOWN)
    for family, name in sorted(installed_modules()):
        if name in entries:
            continue
        if family == "butterfly":
            entries[name] = _butterfly(name, f"PettingZoo butterfly/{name}")
        else:
            entries[name] = _classic(name, f"PettingZoo classic/{name} (turn-based AEC)")
    return list(entries.values())


def _import_quietly(module: str) -> Any:
    # pettingzoo >= 1.27 warns that importing env modules directly is deprecated in favour
    # of its registry; the module path is the one that works on every release we support.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(module)


def make_env(family: str, name: str, parallel: bool, **kwargs: Any) -> Any:
    """Build ``pettingzoo.<family>.<name>_vN``: its ``parallel_env`` when ``parallel``, else its AEC ``env``."""
    module_name = installed_modules().get((family, name))
    if module_name is None:
        import pettingzoo  # raises ModuleNotFoundError, which make() reports with the install hint

        raise PluginError(
            f"pettingzoo/{name}: the installed pettingzoo {pettingzoo.__version__} has no {family}/{name}_v* "
            f"environment; upgrade pettingzoo or pick another env from `puffer envs --plugin pettingzoo`",
            plugin="pettingzoo",
        )
    module = _import_quietly(module_name)
    if parallel and hasattr(module, "parallel_env"):
        return module.parallel_env(**kwargs)
    return module.env(**kwargs)
