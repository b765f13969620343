"""The DeepMind Lab levels this plugin exposes, and the script path each one loads.

Ids are the level names with ``contributed/dmlab30/`` dropped: ``dmlab/lt_chasm`` loads
``lt_chasm``, ``dmlab/explore_goal_locations_small`` loads
``contributed/dmlab30/explore_goal_locations_small``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CORE_LEVELS", "DMLAB30_LEVELS", "LEVELS", "Level"]

DMLAB30_DIR = "contributed/dmlab30"


@dataclass(frozen=True)
class Level:
    name: str
    #: What ``deepmind_lab.Lab(level=...)`` is given.
    path: str
    description: str
    #: Language levels also observe the instruction text (``INSTR``).
    language: bool = False


#: The levels at the top of ``game_scripts/levels``.
CORE_LEVELS: dict[str, str] = {
    "lt_chasm": "laser tag against bots on a map split by a chasm",
    "lt_hallway_slope": "laser tag against bots in sloped hallways",
    "lt_horseshoe_color": "laser tag against bots on a horseshoe-shaped, colour-coded map",
    "lt_space_bounce_hard": "laser tag against skilled bots on bounce pads in space",
    "nav_maze_random_goal_01": "small maze, goal moved every episode",
    "nav_maze_random_goal_02": "medium maze, goal moved every episode",
    "nav_maze_random_goal_03": "large maze, goal moved every episode",
    "nav_maze_static_01": "small fixed maze with apples and a goal",
    "nav_maze_static_02": "medium fixed maze with apples and a goal",
    "nav_maze_static_03": "large fixed maze with apples and a goal",
    "seekavoid_arena_01": "open arena: collect apples, avoid lemons",
    "stairway_to_melon": "climb a stairway to the melon, or take the quick apples",
}

#: DMLab-30 (``game_scripts/levels/contributed/dmlab30``); the train/test pairs are two levels.
DMLAB30_LEVELS: dict[str, str] = {
    "rooms_collect_good_objects_train": "DMLab-30: collect good objects, avoid bad ones (train)",
    "rooms_collect_good_objects_test": "DMLab-30: collect good objects, held-out combinations (test)",
    "rooms_exploit_deferred_effects_train": "DMLab-30: a costly object pays off later (train)",
    "rooms_exploit_deferred_effects_test": "DMLab-30: a costly object pays off later (test)",
    "rooms_select_nonmatching_object": "DMLab-30: pick the object that does not match",
    "rooms_watermaze": "DMLab-30: find and remember a hidden platform",
    "rooms_keys_doors_puzzle": "DMLab-30: keys and coloured doors planning puzzle",
    "language_select_described_object": "DMLab-30: collect the object the instruction describes",
    "language_select_located_object": "DMLab-30: collect the object in the room the instruction names",
    "language_execute_random_task": "DMLab-30: follow one of seven kinds of instruction",
    "language_answer_quantitative_question": "DMLab-30: answer a yes/no question about colours and counts",
    "lasertag_one_opponent_small": "DMLab-30: laser tag, one bot, small procedural map",
    "lasertag_three_opponents_small": "DMLab-30: laser tag, three bots, small procedural map",
    "lasertag_one_opponent_large": "DMLab-30: laser tag, one bot, large procedural map",
    "lasertag_three_opponents_large": "DMLab-30: laser tag, three bots, large procedural map",
    "natlab_fixed_large_map": "DMLab-30: collect mushrooms on a fixed naturalistic terrain",
    "natlab_varying_map_regrowth": "DMLab-30: collect regrowing mushrooms on varying terrain",
    "natlab_varying_map_randomized": "DMLab-30: collect mushrooms on randomized terrain",
    "skymaze_irreversible_path_hard": "DMLab-30: reach the goal across irreversible platforms (hard)",
    "skymaze_irreversible_path_varied": "DMLab-30: reach the goal across irreversible platforms (varied)",
    "psychlab_arbitrary_visuomotor_mapping": "DMLab-30: Psychlab arbitrary visuomotor mapping (needs dataset)",
    "psychlab_continuous_recognition": "DMLab-30: Psychlab continuous recognition (needs dataset)",
    "psychlab_sequential_comparison": "DMLab-30: Psychlab sequential comparison",
    "psychlab_visual_search": "DMLab-30: Psychlab visual search",
    "explore_object_locations_small": "DMLab-30: collect objects in a small random maze",
    "explore_object_locations_large": "DMLab-30: collect objects in a large random maze",
    "explore_obstructed_goals_small": "DMLab-30: find the goal behind doors in a small maze",
    "explore_obstructed_goals_large": "DMLab-30: find the goal behind doors in a large maze",
    "explore_goal_locations_small": "DMLab-30: find the goal repeatedly in a small random maze",
    "explore_goal_locations_large": "DMLab-30: find the goal repeatedly in a large random maze",
    "explore_object_rewards_few": "DMLab-30: collect the rewarding object category (few objects)",
    "explore_object_rewards_many": "DMLab-30: collect the rewarding object category (many objects)",
}

LEVELS: dict[str, Level] = {
    **{name: Level(name, name, description) for name, description in CORE_LEVELS.items()},
    **{
        name: Level(name, f"{DMLAB30_DIR}/{name}", description, language=name.startswith("language_"))
        for name, description in DMLAB30_LEVELS.items()
    },
}
