"""TEST DOUBLE of the ``deepmind_lab`` module: not DeepMind Lab, a stand-in for tests.

It follows the real module's C implementation (``python/dmlab_module.c``) for everything
a caller can get wrong:

* ``Lab(level, observations, config={}, renderer='software', level_cache=None)``:
  ``level`` must be a ``str``, ``observations`` a ``list`` (a tuple is rejected) and
  ``config`` a ``dict`` whose keys and values are ``str`` — ``TypeError`` otherwise;
  an unknown renderer or setting value → ``RuntimeError``; an unknown observation name
  → ``ValueError("Unknown observation '…'.")``; a level script that does not exist →
  ``RuntimeError`` (the real one fails in ``init``).
* ``reset(episode=-1, seed=None)``: ``seed`` must be an int or None (``ValueError``).
* ``step(action, num_steps=1)``: ``action`` must be a ``numpy.ndarray`` (``TypeError``);
  stepping when not running → ``RuntimeError("Environment in wrong status to advance.")``
  (checked first, as in the real one); shape other than ``(7,)`` or dtype other than
  ``np.intc`` → ``ValueError``. STRICTER than the real module: a component outside its
  ``action_spec()`` min/max raises ``ValueError`` (the real one documents the behaviour
  as undefined), so a test catches an adapter that sends one.
* ``observations()`` outside a running episode → ``RuntimeError``.
* ``observation_spec()`` / ``action_spec()`` have the real names, dtypes and shapes
  (``RGB_INTERLEAVED`` is ``(height, width, 3)`` uint8; ``INSTR`` is ``str`` with shape
  ``()``; dynamic dimensions are 0).
* Episodes end after ``episodeLengthSeconds`` (the level script's, ``EPISODE_SECONDS``, else
  90) of game time at 60 frames per second, i.e. ``is_running()`` turns false once that many
  frames have been stepped. Like the real ``Lab``, there is no ``fps()`` method (compared
  with the real engine: ``test_dmlab_engine.py``); ``properties``/``read_property``/
  ``write_property`` are not doubled.

What it makes up: the pixels (a deterministic function of the seed, the frame count and how
many episodes this Lab ran before: the real engine carries state across episodes),
the reward (1 per frame moving forward) and the instruction text. It records what it was
given: ``Lab.instances``, and per instance ``reset_calls`` and ``actions``.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, ClassVar

import numpy as np

__all__ = ["KNOWN_LEVELS", "Lab", "runfiles_path", "set_runfiles_path", "version"]

_runfiles_path = "/double/deepmind_lab"

ACTION_SPEC = (
    {"name": "LOOK_LEFT_RIGHT_PIXELS_PER_FRAME", "min": -512, "max": 512},
    {"name": "LOOK_DOWN_UP_PIXELS_PER_FRAME", "min": -512, "max": 512},
    {"name": "STRAFE_LEFT_RIGHT", "min": -1, "max": 1},
    {"name": "MOVE_BACK_FORWARD", "min": -1, "max": 1},
    {"name": "FIRE", "min": 0, "max": 1},
    {"name": "JUMP", "min": 0, "max": 1},
    {"name": "CROUCH", "min": 0, "max": 1},
)

_CORE = (
    "lt_chasm lt_hallway_slope lt_horseshoe_color lt_space_bounce_hard nav_maze_random_goal_01 "
    "nav_maze_random_goal_02 nav_maze_random_goal_03 nav_maze_static_01 nav_maze_static_02 nav_maze_static_03 "
    "seekavoid_arena_01 stairway_to_melon tests/empty_room_test"
).split()
_DMLAB30 = (
    "rooms_collect_good_objects_train rooms_collect_good_objects_test rooms_exploit_deferred_effects_train "
    "rooms_exploit_deferred_effects_test rooms_select_nonmatching_object rooms_watermaze rooms_keys_doors_puzzle "
    "language_select_described_object language_select_located_object language_execute_random_task "
    "language_answer_quantitative_question lasertag_one_opponent_small lasertag_three_opponents_small "
    "lasertag_one_opponent_large lasertag_three_opponents_large natlab_fixed_large_map natlab_varying_map_regrowth "
    "natlab_varying_map_randomized skymaze_irreversible_path_hard skymaze_irreversible_path_varied "
    "psychlab_arbitrary_visuomotor_mapping psychlab_continuous_recognition psychlab_sequential_comparison "
    "psychlab_visual_search explore_object_locations_small explore_object_locations_large "
    "explore_obstructed_goals_small explore_obstructed_goals_large explore_goal_locations_small "
    "explore_goal_locations_large explore_object_rewards_few explore_object_rewards_many"
).split()
#: ``episodeLengthSeconds`` of the level scripts that set it themselves (game_scripts/levels/*.lua
#: at the pinned commit); the others end after 90 s here. The real seekavoid_arena_01 ends after
#: 1200 frames (test_dmlab_engine.py compares).
EPISODE_SECONDS = {
    "nav_maze_random_goal_01": 60,
    "nav_maze_random_goal_02": 150,
    "nav_maze_random_goal_03": 300,
    "nav_maze_static_01": 60,
    "nav_maze_static_02": 150,
    "nav_maze_static_03": 300,
    "seekavoid_arena_01": 20,
    "stairway_to_melon": 60,
}
#: The level scripts shipped in game_scripts/levels that the double knows.
KNOWN_LEVELS = frozenset(_CORE + [f"contributed/dmlab30/{name}" for name in _DMLAB30])

_FPS = 60
_STATUS_CLOSED, _STATUS_UNINITIALIZED, _STATUS_RUNNING, _STATUS_TERMINATED = "closed", "uninit", "running", "done"


def version() -> str:
    return "1.0"


def runfiles_path() -> str:
    return _runfiles_path


def set_runfiles_path(path: str) -> bool:
    global _runfiles_path
    if not isinstance(path, str):
        raise TypeError(f"set_runfiles_path() argument 1 must be str, not {type(path).__name__}")
    _runfiles_path = path
    return True


def _positive_int_setting(config: dict[str, str], key: str, default: int) -> int:
    raw = config.get(key, str(default))
    try:
        value = int(raw)
    except ValueError:
        raise RuntimeError(f"Failed to apply setting '{key} = {raw}' - \"invalid value\"") from None
    if value <= 0:
        raise RuntimeError(f"Failed to apply setting '{key} = {raw}' - \"must be positive\"")
    return value


class Lab:
    """The double of ``deepmind_lab.Lab`` (see the module docstring)."""

    instances: ClassVar[list[Lab]] = []
    #: The action components in the order this Lab's action_spec() lists them.
    ACTION_SPEC: ClassVar[tuple[dict[str, Any], ...]] = ACTION_SPEC

    def __init__(
        self,
        level: Any,
        observations: Any,
        config: Any = None,
        renderer: Any = "software",
        level_cache: Any = None,
    ):
        if not isinstance(level, str):
            raise TypeError(f"argument 'level' must be str, not {type(level).__name__}")
        if not isinstance(observations, list):
            raise TypeError(f"argument 'observations' must be list, not {type(observations).__name__}")
        if config is None:
            config = {}
        if not isinstance(config, dict):
            raise TypeError(f"argument 'config' must be dict, not {type(config).__name__}")
        for key, value in config.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError("bad argument type for built-in operation")  # PyUnicode_AsUTF8's message
        if not isinstance(renderer, str):
            raise TypeError(f"argument 'renderer' must be str, not {type(renderer).__name__}")
        if renderer not in ("", "software", "hardware"):
            raise RuntimeError(f'Failed to set renderer must be "hardware" or "software" actual "{renderer}"!')
        if level not in KNOWN_LEVELS:
            raise RuntimeError(f'Failed to init environment - "Could not find level script: {level}"')
        self.level = level
        self.config = dict(config)
        self.renderer = renderer or "software"
        self.level_cache = level_cache
        self.width = _positive_int_setting(config, "width", 320)
        self.height = _positive_int_setting(config, "height", 240)
        seconds = float(config.get("episodeLengthSeconds", str(EPISODE_SECONDS.get(level, 90))))
        self.episode_frames = max(1, round(seconds * _FPS))
        spec_names = {spec["name"] for spec in self.observation_spec()}
        for name in observations:
            if not isinstance(name, str):
                raise TypeError("bad argument type for built-in operation")
            if name not in spec_names:
                raise ValueError(f"Unknown observation '{name}'.")
        self.observation_names = list(observations)
        self.status = _STATUS_UNINITIALIZED
        self.episode = 0
        self.frames = 0
        self.seed: int | None = None
        self.reset_calls: list[dict[str, Any]] = []
        self.actions: list[np.ndarray] = []
        self.step_calls: list[int] = []
        self._level_compiled = False
        Lab.instances.append(self)

    # -- specs ------------------------------------------------------------------------

    def observation_spec(self) -> list[dict[str, Any]]:
        h, w = self.height, self.width
        u8, f64 = np.uint8, np.float64
        return [
            {"name": "RGB_INTERLEAVED", "dtype": u8, "shape": (h, w, 3)},
            {"name": "RGBD_INTERLEAVED", "dtype": u8, "shape": (h, w, 4)},
            {"name": "RGB", "dtype": u8, "shape": (3, h, w)},
            {"name": "RGBD", "dtype": u8, "shape": (4, h, w)},
            {"name": "BGR_INTERLEAVED", "dtype": u8, "shape": (h, w, 3)},
            {"name": "BGRD_INTERLEAVED", "dtype": u8, "shape": (h, w, 4)},
            {"name": "FRAMES_REMAINING_AT_60", "dtype": f64, "shape": (1,)},
            {"name": "VEL.TRANS", "dtype": f64, "shape": (3,)},
            {"name": "VEL.ROT", "dtype": f64, "shape": (3,)},
            {"name": "INSTR", "dtype": str, "shape": ()},
            {"name": "DEBUG.POS.TRANS", "dtype": f64, "shape": (3,)},
            {"name": "DEBUG.POS.ROT", "dtype": f64, "shape": (3,)},
            {"name": "DEBUG.PLAYER_ID", "dtype": f64, "shape": (1,)},
            {"name": "DEBUG.PLAYERS.HEALTH", "dtype": f64, "shape": (0,)},
        ]

    def action_spec(self) -> list[dict[str, Any]]:
        return [dict(entry) for entry in self.ACTION_SPEC]

    # -- episode ------------------------------------------------------------------------

    def reset(self, episode: int = -1, seed: Any = None) -> bool:
        if self.status == _STATUS_CLOSED:
            raise RuntimeError('Failed to start environment - "environment is closed"')
        if not isinstance(episode, int):
            raise TypeError(f"'episode' must be int, not {type(episode).__name__}")
        if seed is not None and not isinstance(seed, int):
            raise ValueError(f"'seed' must be int or None, was '{type(seed).__name__}'.")
        if seed is not None and not -(2**31) <= seed < 2**31:
            raise OverflowError("signed integer is greater than maximum")
        if episode >= 0:
            self.episode = episode
        self.reset_calls.append({"episode": episode, "seed": seed})
        self._compile_level()
        self.episodes_run = getattr(self, "episodes_run", -1) + 1
        self.seed = int(np.random.default_rng().integers(2**31)) if seed is None else seed
        self.frames = 0
        self.episode += 1
        self.status = _STATUS_RUNNING
        return True

    def _compile_level(self) -> None:
        """Like the real Lab: ask the level cache first, compile and write it on a miss."""
        if self._level_compiled or self.level_cache is None:
            return
        key = f"{self.level.replace('/', '_')}.pk3"
        with tempfile.TemporaryDirectory() as tmp:
            pk3_path = os.path.join(tmp, key)
            if not self.level_cache.fetch(key, pk3_path):
                with open(pk3_path, "wb") as f:
                    f.write(b"compiled " + self.level.encode())
                self.level_cache.write(key, pk3_path)
        self._level_compiled = True

    def is_running(self) -> bool:
        return self.status == _STATUS_RUNNING

    def num_steps(self) -> int:
        return self.frames

    def step(self, action: Any, num_steps: int = 1) -> float:
        if not isinstance(action, np.ndarray):
            raise TypeError(f"argument 'action' must be numpy.ndarray, not {type(action).__name__}")
        if not isinstance(num_steps, int):
            raise TypeError(f"'num_steps' must be int, not {type(num_steps).__name__}")
        if not self.is_running():
            raise RuntimeError("Environment in wrong status to advance.")
        if action.ndim != 1 or action.shape[0] != len(self.ACTION_SPEC):
            raise ValueError(f"action must have shape ({len(self.ACTION_SPEC)})")
        if action.dtype != np.intc:
            raise ValueError("action must have dtype np.intc")
        for value, spec in zip(action.tolist(), self.ACTION_SPEC):
            if not spec["min"] <= value <= spec["max"]:
                raise ValueError(f"[test double] {spec['name']}={value} is outside [{spec['min']}, {spec['max']}]")
        self.actions.append(action.copy())
        self.step_calls.append(num_steps)
        frames = min(num_steps, self.episode_frames - self.frames)
        self.frames += num_steps
        if self.frames >= self.episode_frames:
            self.status = _STATUS_TERMINATED
        forward = self.named_action(action)["MOVE_BACK_FORWARD"] == 1
        return float(frames) if forward else 0.0

    def named_action(self, action: np.ndarray) -> dict[str, int]:
        """An action array read through this Lab's action_spec() order (a test helper)."""
        return {spec["name"]: int(value) for spec, value in zip(self.ACTION_SPEC, action.tolist())}

    def observations(self) -> dict[str, Any]:
        if not self.is_running():
            raise RuntimeError("Environment in wrong status for call to observations()")
        specs = {spec["name"]: spec for spec in self.observation_spec()}
        out: dict[str, Any] = {}
        for name in self.observation_names:
            spec = specs[name]
            if spec["dtype"] is str:
                # Like the real levels' instructions, a function of the seed: a seeded reset replays it.
                out[name] = f"instruction {self.seed % 7} for seed {self.seed}"
            else:
                shape = tuple(spec["shape"])
                # Like the real engine, a Lab carries state across its episodes: the same seed in a
                # second episode of one Lab gives other pixels than in a new Lab.
                value = (self.seed + self.frames + 37 * self.episodes_run) % 256
                out[name] = np.full(shape, value, dtype=spec["dtype"])
        return out

    def events(self) -> list[tuple[str, list[Any]]]:
        if self.status not in (_STATUS_RUNNING, _STATUS_TERMINATED):
            raise RuntimeError("Environment in wrong status for call to events()")
        return []

    def close(self) -> bool:
        if self.status == _STATUS_CLOSED:
            return False
        self.status = _STATUS_CLOSED
        return True
