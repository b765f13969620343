"""The creator behind every ``atari/<game>``: an ALE v5 env, preprocessed for training by default.

Defaults are ALE v5's (Machado et al. 2018): sticky actions with probability 0.25, the
minimal action set, at most 108,000 emulator frames (30 minutes) per episode, and 4
emulator frames per agent step. On top, unless ``preprocess=False``, the standard DQN
preprocessing (gymnasium's ``AtariPreprocessing``): up to 30 no-op actions after reset,
the 4 frames of a step max-pooled over the last two, grayscale, 84x84 (INTER_AREA), and
the last 4 such frames stacked -> observations of shape (4, 84, 84), uint8.

Frameskip is one knob in both modes: with preprocessing ALE runs at frameskip 1 and the
preprocessing skips ``frameskip`` frames (it must see the last two to max-pool); without
it ALE skips them itself, exactly as ``gymnasium.make("ALE/<Game>-v5")``. Sticky actions
stay inside ALE in both modes, so they apply to every emulator frame, as in v5.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import inspect
import os
from typing import Any

from packaging.version import InvalidVersion, Version

from puffer_core import AnyOf, Flag, FloatRange, IntRange, KwargRule, ListOf, OneOf
from puffer_core.errors import MissingDependencyError
from puffer_plugin_atari.games import game_ids

__all__ = ["MIN_ALE_PY", "RESTORABLE", "check_ale_py_version", "make_atari", "make_atari_batch"]

#: ale-py 0.8 speaks the gym API and bundles no ROMs (they came from AutoROM); 0.9 is the
#: first release with gymnasium envs and bundled ROMs.
MIN_ALE_PY = "0.9"


_FRAMESKIP = IntRange(1, 16)
#: The creator kwargs a checkpoint may bring back (EnvSpec.restorable), with sizes bounded: a
#: saved frame_stack or screen_size sizes every observation and the policy reading it.
RESTORABLE: dict[str, KwargRule] = {
    "preprocess": Flag(),
    "frameskip": AnyOf(_FRAMESKIP, ListOf(_FRAMESKIP, max_length=2)),
    "repeat_action_probability": FloatRange(0, 1),
    "full_action_space": Flag(),
    "max_num_frames_per_episode": AnyOf(IntRange(1, 10_000_000), OneOf(None)),
    "noop_max": IntRange(0, 1_000),
    "screen_size": IntRange(8, 256),
    "grayscale": Flag(),
    "frame_stack": IntRange(1, 16),
    "mode": IntRange(0, 255),
    "difficulty": IntRange(0, 255),
    "obs_type": OneOf("rgb", "grayscale", "ram"),
}


def check_ale_py_version(version: str | None) -> None:
    """Raise a clear error for an ale-py this plugin cannot drive."""
    if version is None:
        return
    try:
        too_old = Version(version) < Version(MIN_ALE_PY)
    except InvalidVersion:
        return
    if too_old:
        raise MissingDependencyError(
            f"the atari plugin needs ale-py >= {MIN_ALE_PY} (bundled ROMs, Gymnasium API); "
            f"found ale-py {version}. Install with: pip install -U 'ale-py>={MIN_ALE_PY}'"
        )


def _ale_py_version() -> str | None:
    try:
        return importlib.metadata.version("ale-py")
    except importlib.metadata.PackageNotFoundError:
        return None


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def make_atari(
    game: str,
    *,
    preprocess: bool = True,
    frameskip: int | tuple[int, int] = 4,
    repeat_action_probability: float = 0.25,
    full_action_space: bool = False,
    max_num_frames_per_episode: int | None = 108_000,
    noop_max: int = 30,
    screen_size: int = 84,
    grayscale: bool = True,
    frame_stack: int = 4,
    **ale_kwargs: Any,
) -> Any:
    """Build ``atari/<game>``; ``ale_kwargs`` (mode, difficulty, obs_type, render_mode, ...)
    go to ``ale_py.env.AtariEnv``. The preprocessing knobs apply only with ``preprocess=True``.
    """
    if game not in game_ids():
        raise ValueError(f"unknown Atari game {game!r}; `puffer envs --plugin atari` lists them")
    check_ale_py_version(_ale_py_version())
    import ale_py
    from ale_py.env import AtariEnv

    from puffer_plugin_atari.wrappers import AtariEpisodeStats, FrameStack

    # ALE prints its banner when the first interface is made unless told to keep quiet.
    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    common = dict(
        game=game,
        repeat_action_probability=repeat_action_probability,
        full_action_space=full_action_space,
        max_num_frames_per_episode=max_num_frames_per_episode,
    )
    if not preprocess:
        env = AtariEnv(frameskip=frameskip, **common, **ale_kwargs)
        return AtariEpisodeStats(env)

    if "obs_type" in ale_kwargs:
        raise ValueError("obs_type is chosen by the preprocessing (see grayscale=); pass preprocess=False to set it")
    if not isinstance(frameskip, int):
        raise ValueError("a stochastic frameskip (low, high) needs preprocess=False; preprocessing skips a fixed count")
    if not _importable("cv2"):
        raise MissingDependencyError(
            f"atari/{game} with preprocess=True resizes frames with OpenCV, which this Python cannot import. "
            "Install with: pip install opencv-python-headless (or pass preprocess=False for raw frames)"
        )
    from gymnasium.wrappers import AtariPreprocessing

    # ALE renders grayscale directly; the preprocessing reads the screen from ALE itself.
    env = AtariEnv(frameskip=1, obs_type="grayscale" if grayscale else "rgb", **common, **ale_kwargs)
    if env.get_action_meanings()[0] != "NOOP":
        # No-op starts step action 0 as NOOP; a few minimal action sets (backgammon,
        # video_checkers) have no NOOP at all, so those games start without no-ops.
        noop_max = 0
    env = AtariPreprocessing(
        env,
        noop_max=noop_max,
        frame_skip=frameskip,
        screen_size=screen_size,
        terminal_on_life_loss=False,
        grayscale_obs=grayscale,
        scale_obs=False,
    )
    if frame_stack > 1:
        env = FrameStack(env, frame_stack)
    return AtariEpisodeStats(env)


def _creator_defaults() -> dict[str, Any]:
    """``make_atari``'s keyword defaults: the one place the envs' settings are written."""
    parameters = inspect.signature(make_atari).parameters.values()
    return {p.name: p.default for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}


def make_atari_batch(game: str, num_envs: int, **kwargs: Any) -> Any:
    """``num_envs`` of ``atari/<game>`` as one native batch: ALE's own ``AtariVectorEnv``, its
    envs stepped by C++ threads with the preprocessing in C++, set up as ``make_atari``'s
    (the same kwargs and defaults; sticky actions, no reward clipping, no fire on reset, no
    episode per life), so the observation and action spaces are the same. ALE's preprocessing
    is its own: its frames and no-op starts are not bit for bit gymnasium's
    ``AtariPreprocessing``'s, so a seed gives other trajectories than the per-env path (env i
    is seeded seed + i in both). ``num_threads`` sets the batch's threads (default: one per
    env, up to this process's CPUs)."""
    threads = kwargs.pop("num_threads", None)
    kwargs.pop("render_mode", None)  # recordings take the per-env path
    defaults = _creator_defaults()
    unknown = sorted(set(kwargs) - set(defaults))  # mode, difficulty, obs_type, ...: AtariEnv's, not the vector env's
    if unknown:
        raise ValueError(f"ALE's vector env does not take {', '.join(unknown)}; use native=False")
    options = {**defaults, **kwargs}
    if not options["preprocess"]:
        raise ValueError("native batches of atari envs preprocess (ALE's vector env); for raw frames use native=False")
    if not isinstance(options["frameskip"], int):
        raise ValueError("a stochastic frameskip (low, high) needs native=False and preprocess=False")
    if game not in game_ids():
        raise ValueError(f"unknown Atari game {game!r}; `puffer envs --plugin atari` lists them")
    check_ale_py_version(_ale_py_version())
    from ale_py.vector_env import AtariVectorEnv

    return AtariVectorEnv(
        game,
        num_envs,
        num_threads=threads or min(num_envs, len(os.sched_getaffinity(0))),
        repeat_action_probability=options["repeat_action_probability"],
        full_action_space=options["full_action_space"],
        max_num_frames_per_episode=options["max_num_frames_per_episode"] or 0,
        img_height=options["screen_size"],
        img_width=options["screen_size"],
        grayscale=options["grayscale"],
        stack_num=options["frame_stack"],
        frameskip=options["frameskip"],
        noop_max=options["noop_max"],
        reward_clipping=False,
        use_fire_reset=False,
        episodic_life=False,
    )
