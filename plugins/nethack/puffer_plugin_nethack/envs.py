"""The NLE tasks as ``nethack/<task>``: the task table, the creator and observation keys.

Nothing here imports ``nle`` at import time: the creator does, so ``puffer envs`` lists
these ids even where nle is not installed.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
from collections.abc import Iterable
from typing import Any

from packaging.version import InvalidVersion, Version

from puffer_core import AnyOf, Flag, FloatRange, IntRange, KwargRule, ListOf, OneOf, Text
from puffer_plugin_nethack.crop import CROP_KEY, CROP_SIZE, GlyphCrop

__all__ = [
    "ALL",
    "CROP_KEY",
    "CROP_SIZE",
    "DEFAULT_OBSERVATION_KEYS",
    "NLE_DEFAULT",
    "RESTORABLE",
    "TASKS",
    "api_for_version",
    "installed_nle_version",
    "make_nethack",
    "resolve_observation_keys",
]

#: puffer task name -> (nle module, class, one-line description)
TASKS: dict[str, tuple[str, str, str]] = {
    "nethack": ("nle.env.base", "NLE", "the full game of NetHack, reward = in-game score delta (NLE NetHack-v0)"),
    "score": ("nle.env.tasks", "NetHackScore", "maximise the in-game score, reduced action set (NetHackScore-v0)"),
    "staircase": ("nle.env.tasks", "NetHackStaircase", "reach the staircase down (NetHackStaircase-v0)"),
    "pet": (
        "nle.env.tasks",
        "NetHackStaircasePet",
        "reach the staircase down with the pet next to you (NetHackStaircasePet-v0)",
    ),
    "oracle": ("nle.env.tasks", "NetHackOracle", "find and stand next to the Oracle (NetHackOracle-v0)"),
    "gold": ("nle.env.tasks", "NetHackGold", "collect gold (NetHackGold-v0)"),
    "eat": ("nle.env.tasks", "NetHackEat", "keep the hunger status up by eating (NetHackEat-v0)"),
    "scout": ("nle.env.tasks", "NetHackScout", "explore as many map cells as possible (NetHackScout-v0)"),
    "challenge": (
        "nle.env.tasks",
        "NetHackChallenge",
        "the NeurIPS 2021 NetHack Challenge: full keyboard, random character (NetHackChallenge-v0)",
    ),
}

#: The lean default: what the NLE baseline agents learn from, about 3.8 KB a step.
#: glyphs (21x79 int16) is the map with one id per monster/object/feature, blstats (27
#: ints) the bottom-line stats (position, HP, depth, score, ...) and message (256 bytes)
#: the top-line text. The rest (chars/colors duplicate glyphs; tty_* the terminal;
#: screen_descriptions alone is 130 KB) is one kwarg away.
DEFAULT_OBSERVATION_KEYS: tuple[str, ...] = ("glyphs", "blstats", "message")


#: ``observation_keys="all"``: every observation NLE offers except ``internal``, which
#: NLE itself warns exposes hidden game state (ask for it by name if you need it).
ALL = "all"
#: ``observation_keys="nle"``: whatever the nle task class uses when given no keys.
NLE_DEFAULT = "nle"
LEAN = "lean"
_HIDDEN_KEYS = ("internal",)

_KEY = Text(max_length=32, pattern=r"[a-z_]+")
#: The creator kwargs a checkpoint may bring back (EnvSpec.restorable): what training passes
#: and the game's own knobs. Never ``savedir`` / ``save_ttyrec_every`` (where nle writes files),
#: ``options`` (raw NetHack options) or ``wizard``: those come from the user only.
RESTORABLE: dict[str, KwargRule] = {
    "observation_keys": AnyOf(OneOf(LEAN, ALL, NLE_DEFAULT, None), _KEY, ListOf(_KEY, max_length=32)),
    "crop_size": IntRange(1, 79),
    "max_episode_steps": IntRange(1, 10_000_000),
    "character": Text(max_length=32, pattern=r"[A-Za-z@-]+"),
    "allow_all_yn_questions": Flag(),
    "allow_all_modes": Flag(),
    "spawn_monsters": Flag(),
    "penalty_mode": OneOf("constant", "exp", "square", "linear", "always"),
    "penalty_step": FloatRange(-100, 100),
    "penalty_time": FloatRange(-100, 100),
}

#: The observation keys nle's ``render()`` reads in each render mode (``nle.env.base.NLE.render``).
#: "ansi" is the plugin's own (``puffer_plugin_nethack.tty``: the coloured terminal, its
#: keys observed on the side) where nle speaks gymnasium; nle 0.9 renders it from chars.
RENDER_MODE_KEYS: dict[str, tuple[str, ...]] = {
    "human": ("tty_chars", "tty_colors", "tty_cursor"),
    "full": ("message", "chars", "colors"),
    "ansi": ("chars",),
    "string": ("chars",),
}


def installed_nle_version() -> str | None:
    """The installed nle version, read from its metadata (nle itself is not imported)."""
    try:
        return importlib.metadata.version("nle")
    except importlib.metadata.PackageNotFoundError:
        return None


def api_for_version(version: str | None) -> str:
    """The API the raw nle env speaks: nle < 1.0 is gym (0.15–0.23), nle >= 1.0 is gymnasium.

    With nle not installed the answer is the API of the version ``pip install nle`` brings.
    """
    if version is None:
        return "gymnasium"
    try:
        parsed = Version(version)
    except InvalidVersion:
        return "gymnasium"
    return "gym" if parsed.release < (1,) else "gymnasium"


def _all_keys() -> list[str]:
    from nle.env import base

    items = getattr(base, "NLE_SPACE_ITEMS", None)
    if items is not None:
        keys = [key for key, _space in items]
    else:  # pragma: no cover - every nle from 0.9 to 1.3 has NLE_SPACE_ITEMS
        from nle import nethack

        keys = list(nethack.OBSERVATION_DESC)
    return keys


def resolve_observation_keys(observation_keys: Any) -> tuple[str, ...] | None:
    """Turn the ``observation_keys`` kwarg into the tuple nle expects (None: nle's default).

    Accepts a tuple/list of key names, a single key name, ``"lean"`` (the plugin's
    default), ``"all"`` (every key but ``internal``) or ``"nle"``/None (nle's own default).
    """
    if observation_keys is None or observation_keys == NLE_DEFAULT:
        return None
    if observation_keys == LEAN:
        return DEFAULT_OBSERVATION_KEYS
    known = _all_keys()
    if observation_keys == ALL:
        return tuple(key for key in known if key not in _HIDDEN_KEYS)
    if isinstance(observation_keys, str):
        observation_keys = (observation_keys,)
    if not isinstance(observation_keys, Iterable):
        raise TypeError(
            f"observation_keys must be a tuple of key names, 'lean', 'all' or 'nle', not {observation_keys!r}"
        )
    keys = tuple(observation_keys)
    unknown = [key for key in keys if key not in known and key != CROP_KEY]
    if unknown:
        raise ValueError(
            f"unknown NLE observation key(s) {', '.join(map(repr, unknown))}; "
            f"this nle offers: {', '.join(known)}, and the plugin {CROP_KEY} (or pass 'lean', 'all' or 'nle')"
        )
    if not keys:
        raise ValueError("observation_keys is empty; give at least one key, or 'lean', 'all' or 'nle'")
    return keys


def _task_class(task: str) -> type:
    try:
        module_name, class_name, _description = TASKS[task]
    except KeyError:
        raise ValueError(f"unknown NetHack task {task!r}; tasks: {', '.join(TASKS)}") from None
    return getattr(importlib.import_module(module_name), class_name)


def _accepts(cls: type, name: str) -> bool:
    """Whether the NLE base constructor takes ``name`` (tasks pass their **kwargs on to it)."""
    from nle.env import base

    try:
        return name in inspect.signature(base.NLE.__init__).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return False


def _check_render_keys(render_mode: str | None, keys: tuple[str, ...] | None) -> None:
    """Refuse a render mode whose observation keys are not observed: nle's render() would fail on each call."""
    if keys is None:  # nle's own default keys, which every render mode can use
        return
    missing = [key for key in RENDER_MODE_KEYS.get(render_mode or "", ()) if key not in keys]
    if missing:
        raise ValueError(
            f"render_mode={render_mode!r} renders from the observation keys {', '.join(missing)}, which "
            f"observation_keys={keys!r} leaves out; add them to observation_keys (or pass observation_keys='all'), "
            "or use render_mode='pixel' or None"
        )


def _colour_terminal(cls: type, keys: tuple[str, ...] | None, kwargs: dict[str, Any]) -> Any:
    """``render_mode="ansi"``: nle observing the terminal too, rendered in colour (``tty.py``)."""
    from puffer_plugin_nethack.tty import TTY_KEYS, ColourTerminal

    kwargs["render_mode"] = None  # the wrapper renders; nle's "ansi" would read chars
    if keys is not None:
        kwargs["observation_keys"] = keys + tuple(key for key in TTY_KEYS if key not in keys)
    _with_seed_clock(cls, kwargs)
    env = cls(**kwargs)
    return ColourTerminal(env, keys if keys is not None else tuple(env.observation_space.spaces))


def _with_seed_clock(cls: type, kwargs: dict[str, Any]) -> None:
    # nle >= 1.3: with seeds set, derive moon phase / Friday 13th / night from the seed
    # instead of the wall clock, so a seed gives the same game on any day.
    if "fix_moon_phase" not in kwargs and _accepts(cls, "fix_moon_phase"):
        kwargs["fix_moon_phase"] = True


def _nle_keys(keys: tuple[str, ...]) -> tuple[str, ...]:
    """What nle must observe for ``keys``: the crop is cut from ``glyphs`` at ``blstats``' position."""
    wanted = [key for key in keys if key != CROP_KEY]
    if CROP_KEY in keys:
        wanted += [key for key in ("glyphs", "blstats") if key not in wanted]
    return tuple(wanted)


def _with_crop(env: Any, keys: tuple[str, ...] | None, crop_size: int) -> Any:
    if keys is None or CROP_KEY not in keys:
        return env
    return GlyphCrop(env, keys, crop_size)


def _check_crop(keys: tuple[str, ...] | None, crop_size: Any) -> None:
    if keys is None or CROP_KEY not in keys:
        return
    if api_for_version(installed_nle_version()) != "gymnasium":
        raise ValueError(f"observation key {CROP_KEY!r} needs nle >= 1.0 (this nle speaks gym); pip install 'nle>=1'")
    if isinstance(crop_size, bool) or not isinstance(crop_size, int) or crop_size < 1 or crop_size % 2 == 0:
        raise ValueError(f"crop_size must be an odd number ≥ 1 (the agent in the middle), got {crop_size!r}")


def make_nethack(
    task: str, observation_keys: Any = DEFAULT_OBSERVATION_KEYS, crop_size: int = CROP_SIZE, **kwargs: Any
) -> Any:
    """Build the raw nle env for ``task``; every other kwarg goes to the nle constructor.

    ``crop_size`` is the side of the ``glyphs_crop`` observation key (when asked for).
    """
    cls = _task_class(task)
    keys = resolve_observation_keys(observation_keys)
    _check_crop(keys, crop_size)
    if keys is not None:
        kwargs["observation_keys"] = _nle_keys(keys)
    # nle >= 1.0 renders in "human" mode unless told otherwise, from tty_* keys the lean
    # default leaves out, so its render() fails; no render mode is Gymnasium's default.
    if "render_mode" not in kwargs and _accepts(cls, "render_mode"):
        kwargs["render_mode"] = None
    if kwargs.get("render_mode") == "ansi" and api_for_version(installed_nle_version()) == "gymnasium":
        return _with_crop(_colour_terminal(cls, keys and _nle_keys(keys), kwargs), keys, crop_size)
    _check_render_keys(kwargs.get("render_mode"), keys)
    _with_seed_clock(cls, kwargs)
    return _with_crop(cls(**kwargs), keys, crop_size)
