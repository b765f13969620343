"""Which Atari games exist: read from the installed ale-py without importing it.

ale-py >= 0.9 bundles its ROMs and lists them in ``ale_py/roms/md5.json`` (what
``ale_py.roms.get_all_rom_ids()`` reads). Reading that file directly keeps ``puffer envs``
fast and keeps ale-py's C extension out of every process that only lists plugins. Where
ale-py is missing (or too old to bundle ROMs) the built-in list below is used, so the ids
are still listed and making one explains what to install.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path

__all__ = ["MULTIPLAYER_ONLY", "STANDARD_GAMES", "game_ids", "gymnasium_id", "installed_game_ids", "title"]

#: ROMs ale-py ships that have no single-player mode: ALE registers no v5 env for them.
MULTIPLAYER_ONLY = frozenset({"combat", "joust", "maze_craze", "warlords"})

#: The ALE v5 games of ale-py 0.12.1 (its 108 ROMs minus MULTIPLAYER_ONLY), in snake_case.
STANDARD_GAMES: tuple[str, ...] = (
    "adventure", "air_raid", "alien", "amidar", "assault", "asterix", "asteroids", "atlantis", "atlantis2",
    "backgammon", "bank_heist", "basic_math", "battle_zone", "beam_rider", "berzerk", "blackjack", "bowling",
    "boxing", "breakout", "carnival", "casino", "centipede", "chopper_command", "crazy_climber", "crossbow",
    "darkchambers", "defender", "demon_attack", "donkey_kong", "double_dunk", "earthworld", "elevator_action",
    "enduro", "entombed", "et", "fishing_derby", "flag_capture", "freeway", "frogger", "frostbite", "galaxian",
    "gopher", "gravitar", "hangman", "haunted_house", "hero", "human_cannonball", "ice_hockey", "jamesbond",
    "journey_escape", "kaboom", "kangaroo", "keystone_kapers", "king_kong", "klax", "koolaid", "krull",
    "kung_fu_master", "laser_gates", "lost_luggage", "mario_bros", "miniature_golf", "montezuma_revenge", "mr_do",
    "ms_pacman", "name_this_game", "othello", "pacman", "phoenix", "pitfall", "pitfall2", "pong", "pooyan",
    "private_eye", "qbert", "riverraid", "road_runner", "robotank", "seaquest", "sir_lancelot", "skiing",
    "solaris", "space_invaders", "space_war", "star_gunner", "superman", "surround", "tennis", "tetris",
    "tic_tac_toe_3d", "time_pilot", "trondead", "turmoil", "tutankham", "up_n_down", "venture", "video_checkers",
    "video_chess", "video_cube", "video_pinball", "wizard_of_wor", "word_zapper", "yars_revenge", "zaxxon",
)  # fmt: skip


def installed_game_ids() -> tuple[str, ...] | None:
    """The v5 games of the installed ale-py, or None when it cannot be read without importing."""
    try:
        spec = importlib.util.find_spec("ale_py")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        md5 = Path(location) / "roms" / "md5.json"
        try:
            names = json.loads(md5.read_text())
        except (OSError, ValueError):
            continue
        ids = {str(name).split(".")[0] for name in names}
        return tuple(sorted(ids - MULTIPLAYER_ONLY))
    return None


@functools.lru_cache(maxsize=1)
def game_ids() -> tuple[str, ...]:
    """The games to list as ``atari/<game>``: the installed ale-py's, else the built-in list."""
    return installed_game_ids() or STANDARD_GAMES


def title(game: str) -> str:
    """``montezuma_revenge`` -> ``Montezuma Revenge``."""
    return game.replace("_", " ").title()


def gymnasium_id(game: str) -> str:
    """The v5 id ale-py registers for ``game`` (``ALE/Breakout-v5``, ``ALE/TicTacToe3D-v5``): its PascalCase name."""
    return f"ALE/{game.title().replace('_', '')}-v5"
