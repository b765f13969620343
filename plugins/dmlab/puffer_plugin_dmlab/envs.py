"""``DMLabEnv``: a Gymnasium env over ``deepmind_lab.Lab``.

What it does that a thin wrapper would get wrong:

* actions reach ``Lab.step`` as a 1-D ``np.intc`` array of length 7 in the order of the
  Lab's own ``action_spec()``, each component within its min/max (see ``actions.py``);
* config values are passed as strings (the Lab rejects anything else) and the
  observation list as a ``list``;
* ``Lab.observations()`` raises once an episode is over, so the observation returned
  with ``terminated=True`` is the last one the Lab produced;
* seeding: ``reset(seed=s)`` starts the Lab with seed ``s`` (a new Lab when this one has
  run an episode: the engine carries state across episodes of one Lab); later resets draw
  their Lab seed from the env's seeded generator, so one seed fixes every following episode.

Episode ends come from the level (``is_running()`` turns false, typically when
``episodeLengthSeconds`` of game time have passed) and are reported as ``terminated``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from puffer_plugin_dmlab.actions import make_action_map

__all__ = ["DMLabEnv", "LevelCache", "to_config"]

#: Lab seeds are C ints.
MAX_LAB_SEED = 2**31 - 1


def to_config(values: Mapping[str, Any]) -> dict[str, str]:
    """DeepMind Lab settings as the ``{str: str}`` dict the Lab requires (booleans as Lua's true/false)."""
    config = {}
    for key, value in values.items():
        if not isinstance(key, str):
            raise TypeError(f"DeepMind Lab config keys must be strings, got {key!r}")
        if isinstance(value, bool):
            config[key] = "true" if value else "false"
        else:
            config[key] = str(value)
    return config


class LevelCache:
    """Keeps compiled levels (``.pk3``) in a directory, so a level compiles once per machine.

    The Lab calls ``fetch(key, pk3_path)`` before compiling a level and ``write(key,
    pk3_path)`` after; writes go through a temporary file and a rename, so workers sharing
    the directory never read a half-written level.
    """

    def __init__(self, directory: str | os.PathLike):
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)

    def fetch(self, key: str, pk3_path: str) -> bool:
        path = os.path.join(self.directory, key)
        if not os.path.isfile(path):
            return False
        shutil.copyfile(path, pk3_path)
        return True

    def write(self, key: str, pk3_path: str) -> None:
        path = os.path.join(self.directory, key)
        if os.path.exists(path):
            return
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
        os.close(fd)
        try:
            shutil.copyfile(pk3_path, tmp)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _observation_space(spec: Mapping[str, Any], text_length: int) -> spaces.Box:
    name, shape, dtype = spec["name"], tuple(int(d) for d in spec["shape"]), spec["dtype"]
    if dtype is str or dtype is bytes:
        # Text (INSTR): UTF-8 bytes, zero-padded, so it flattens like any other array.
        return spaces.Box(0, 255, shape=(text_length,), dtype=np.uint8)
    if any(d == 0 for d in shape):
        raise ValueError(
            f"observation {name!r} has a dynamic shape {shape}; DMLabEnv needs fixed shapes (drop it from observations)"
        )
    dtype = np.dtype(dtype)
    if dtype == np.uint8:
        return spaces.Box(0, 255, shape=shape, dtype=np.uint8)
    return spaces.Box(-np.inf, np.inf, shape=shape, dtype=dtype)


class DMLabEnv(gymnasium.Env):
    """One DeepMind Lab level behind the Gymnasium API (see the module docstring)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 15}

    def __init__(
        self,
        level: str,
        observations: Sequence[str] = ("RGB_INTERLEAVED",),
        width: int = 96,
        height: int = 72,
        num_steps: int = 4,
        action_set: Any = "impala",
        config: Mapping[str, Any] | None = None,
        renderer: str = "software",
        level_cache_dir: str | os.PathLike | None = None,
        runfiles_path: str | None = None,
        text_length: int = 128,
        render_mode: str | None = None,
    ):
        import deepmind_lab

        if isinstance(observations, str):
            observations = [observations]
        if int(num_steps) < 1:
            raise ValueError(f"num_steps (frames per agent step) must be >= 1, got {num_steps}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode {render_mode!r} is not supported; use 'rgb_array' or None")
        if runfiles_path is not None:
            deepmind_lab.set_runfiles_path(os.fspath(runfiles_path))
        self.level = level
        self.observation_names = [str(name) for name in observations]
        self.num_steps = int(num_steps)
        self.text_length = int(text_length)
        self.render_mode = render_mode
        self.config = to_config({"width": int(width), "height": int(height), **(config or {})})
        self._lab_args = (level, renderer, LevelCache(level_cache_dir) if level_cache_dir is not None else None)
        self.lab = self._new_lab()
        self._episodes = 0

        specs = {spec["name"]: spec for spec in self.lab.observation_spec()}
        missing = [name for name in self.observation_names if name not in specs]
        if missing:
            raise ValueError(f"{level}: unknown observation(s) {missing}; this Lab offers {sorted(specs)}")
        self._obs_spaces = {name: _observation_space(specs[name], self.text_length) for name in self.observation_names}
        if len(self._obs_spaces) == 1:
            self.observation_space = next(iter(self._obs_spaces.values()))
        else:
            self.observation_space = spaces.Dict(self._obs_spaces)

        self.action_map = make_action_map(action_set, self.lab.action_spec())
        self.action_space = self.action_map.space
        self._last_obs: Any = None
        self._needs_reset = True

    def _new_lab(self) -> Any:
        import deepmind_lab

        level, renderer, level_cache = self._lab_args
        return deepmind_lab.Lab(
            level, list(self.observation_names), config=self.config, renderer=renderer, level_cache=level_cache
        )

    # -- observations --------------------------------------------------------------------

    def _convert(self, name: str, value: Any) -> np.ndarray:
        space = self._obs_spaces[name]
        if isinstance(value, str):
            encoded = np.frombuffer(value.encode("utf-8")[: self.text_length], dtype=np.uint8)
            out = np.zeros(space.shape, dtype=np.uint8)
            out[: len(encoded)] = encoded
            return out
        return np.asarray(value, dtype=space.dtype).reshape(space.shape)

    def _observe(self) -> Any:
        raw = self.lab.observations()
        converted = {name: self._convert(name, raw[name]) for name in self.observation_names}
        if len(converted) == 1:
            return next(iter(converted.values()))
        return converted

    # -- Gymnasium API -------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        lab_seed = seed % (MAX_LAB_SEED + 1) if seed is not None else int(self.np_random.integers(MAX_LAB_SEED))
        episode = int((options or {}).get("episode", -1))
        if seed is not None and self._episodes:
            # The engine carries state from one episode to the next in one Lab: reset(seed=s) on a
            # used Lab gives other observations than on a new one (checked against the real
            # engine). A seeded reset therefore starts a new Lab, so the same seed gives the same
            # episode; unseeded resets (autoreset) keep the Lab.
            self.lab.close()
            self.lab = self._new_lab()
        self.lab.reset(episode=episode, seed=int(lab_seed))
        self._episodes += 1
        self._last_obs = self._observe()
        self._needs_reset = False
        return self._last_obs, {}

    def step(self, action: Any):
        if self._needs_reset:
            raise RuntimeError(f"{self.level}: step() called on a finished (or never started) episode; call reset()")
        reward = self.lab.step(self.action_map.to_lab(action), num_steps=self.num_steps)
        terminated = not self.lab.is_running()
        if terminated:
            self._needs_reset = True  # observations() raises now; keep the last frame
        else:
            self._last_obs = self._observe()
        return self._last_obs, float(reward), terminated, False, {}

    def render(self) -> np.ndarray | None:
        if self._last_obs is None:
            return None
        if isinstance(self._last_obs, dict):
            return self._last_obs.get("RGB_INTERLEAVED")
        return self._last_obs if "RGB_INTERLEAVED" in self.observation_names else None

    def close(self) -> None:
        lab = getattr(self, "lab", None)
        if lab is not None:
            lab.close()
