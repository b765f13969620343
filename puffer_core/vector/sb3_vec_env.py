"""``to_sb3``: a Puffer vector env as a Stable-Baselines3 ``VecEnv`` (``pip install 'puffer-core[sb3]'``).

It behaves as SB3's ``DummyVecEnv`` does: same-step autoreset (so the vector env must be
made with ``autoreset="same_step"``), the last observation of an ended episode in its
info as ``"terminal_observation"``, ``"TimeLimit.truncated"`` in every info, the reset's
infos in ``reset_infos``, and ``"episode": {"r", "l", "t"}`` in the info of an episode's
last step (what SB3's ``Monitor`` adds; SB3 logs ``rollout/ep_rew_mean`` from it).

Observations are copied once per step: SB3 keeps the previous step's observation array
across ``env.step`` (it stores it in its rollout buffer afterwards), so the backend's
shared buffer cannot be handed out as it is.

Multi-agent envs: every agent row is one SB3 env. Rows of dead agents hold a zero
observation with reward 0 and ``done`` False until their env's episode ends, so SB3 trains
on them as on ordinary steps; prefer ``puffer train``, which masks them out.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from gymnasium import spaces

from puffer_core.env.postprocess import EPISODE_LENGTH, EPISODE_RETURN
from puffer_core.errors import APIUsageError, MissingDependencyError
from puffer_core.vector.autoreset import SAME_STEP
from puffer_core.vector.base import VectorEnv
from puffer_core.vector.calls import is_wrapped

try:
    from stable_baselines3.common.vec_env import VecEnv
except ImportError as exc:  # pragma: no cover - exercised only where SB3 is absent
    raise MissingDependencyError(
        "to_sb3 needs Stable-Baselines3; install it with `pip install 'puffer-core[sb3]'`"
    ) from exc

__all__ = ["SB3VecEnv", "to_sb3"]

_SB3_OBSERVATIONS = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
_SB3_ACTIONS = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def check_sb3_compatible(envs: Any) -> None:
    """Raise APIUsageError naming what SB3 cannot take and what works instead."""
    if not isinstance(envs, VectorEnv):
        raise APIUsageError(
            f"to_sb3 takes a Puffer vector env (puffer_core.vector.make(...)), got {type(envs).__name__}"
        )
    if envs.autoreset_mode != SAME_STEP:
        raise APIUsageError(
            f"to_sb3 needs autoreset='same_step' (SB3 resets an env within the step it ends), got "
            f"{envs.autoreset_mode!r}; make the vector env with vector.make(..., autoreset='same_step')"
        )
    if envs.batch_size != envs.num_envs:
        raise APIUsageError(
            f"to_sb3 needs a vector env that steps every row at once, but this one returns batches of "
            f"{envs.batch_size} of {envs.num_envs} rows; make it without batch_size"
        )
    obs, act = envs.single_observation_space, envs.single_action_space
    if not isinstance(obs, _SB3_OBSERVATIONS):
        raise APIUsageError(
            f"SB3 cannot take the observation space {obs}; it takes Box, Discrete, MultiDiscrete or MultiBinary"
        )
    if not isinstance(act, _SB3_ACTIONS):
        raise APIUsageError(
            f"SB3 cannot take the action space {act}; it takes Box, Discrete, MultiDiscrete or MultiBinary"
        )
    layout = getattr(envs.driver_env, "obs_layout", None)
    if getattr(layout, "mixed_dtypes", False):
        leaves = ", ".join(f"{path} {node[2]}" for path, node in layout.leaves[:4])
        raise APIUsageError(
            f"the observation's leaves mix dtypes ({leaves}, …), so each flat observation holds raw bytes, which "
            "SB3's policies would read as numbers; give the env one observation dtype (e.g. wrap the raw env in "
            "gymnasium.wrappers.FlattenObservation) or train with `puffer train`, which unflattens them"
        )


class SB3VecEnv(VecEnv):
    """See the module docstring."""

    def __init__(self, envs: VectorEnv):
        check_sb3_compatible(envs)
        self.envs = envs
        self._agents = envs.agents_per_env
        self._actions: np.ndarray | None = None
        self._episode_start = time.perf_counter()
        super().__init__(envs.num_envs, envs.single_observation_space, envs.single_action_space)

    # ---------------------------------------------------------------- stepping
    def reset(self) -> np.ndarray:
        """Reset every env with the seeds and options given through ``seed`` / ``set_options``."""
        seeds = self._seeds[:: self._agents]  # SB3 seeds rows; the rows of an env share its seed
        options = self._options[0] if self._options and self._options[0] else None
        if any(opts != self._options[0] for opts in self._options):
            raise APIUsageError("to_sb3: set_options must give every env the same options")
        obs, infos = self.envs.reset(seed=None if all(s is None for s in seeds) else list(seeds), options=options)
        self.reset_infos = [{} for _ in range(self.num_envs)]
        for entry in infos:
            self.reset_infos[entry["env_id"]] = {k: v for k, v in entry.items() if k != "env_id"}
        self._reset_seeds()
        self._reset_options()
        return obs.copy()

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict]]:
        obs, rewards, terminals, truncations, infos = self.envs.step(self._actions)
        out = [{"TimeLimit.truncated": False} for _ in range(self.num_envs)]
        if truncations.any():  # rare: only then find the rows truncated but not terminated
            for row in np.flatnonzero(truncations & ~terminals).tolist():
                out[row]["TimeLimit.truncated"] = True
        for entry in infos:
            self._merge_info(out, entry)
        return obs.copy(), rewards.copy(), terminals | truncations, out

    def _merge_info(self, out: list[dict], entry: dict) -> None:
        """One Puffer info → the row's SB3 info (final step) and ``reset_infos`` (the reset's part)."""
        row = entry["env_id"]
        if "final_observation" not in entry:
            out[row].update((k, v) for k, v in entry.items() if k != "env_id")
            return
        info = out[row]
        info.update(entry["final_info"])
        info["terminal_observation"] = entry["final_observation"]
        if EPISODE_RETURN in info:
            info["episode"] = {
                "r": info[EPISODE_RETURN],
                "l": info[EPISODE_LENGTH],
                "t": round(time.perf_counter() - self._episode_start, 6),
            }
        skip = ("env_id", "final_observation", "final_info")
        self.reset_infos[row] = {k: v for k, v in entry.items() if k not in skip}

    def close(self) -> None:
        self.envs.close()

    # ---------------------------------------------------------------- reaching the envs
    def _env_indices(self, indices: Any) -> list[int]:
        """SB3's row indices → env indices (each env once, in order)."""
        rows = self._get_indices(indices)
        return list(dict.fromkeys(int(row) // self._agents for row in rows))

    def _per_row(self, indices: Any, per_env: tuple) -> list:
        rows = list(self._get_indices(indices))
        by_env = dict(zip(self._env_indices(indices), per_env))
        return [by_env[int(row) // self._agents] for row in rows]

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        return self._per_row(indices, self.envs.get_attr(attr_name, env_indices=self._env_indices(indices)))

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        self.envs.set_attr(attr_name, [value] * len(self._env_indices(indices)), env_indices=self._env_indices(indices))

    def env_method(self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any) -> list[Any]:
        envs = self._env_indices(indices)
        return self._per_row(indices, self.envs.call(method_name, *method_args, env_indices=envs, **method_kwargs))

    def env_is_wrapped(self, wrapper_class: type, indices: Any = None) -> list[bool]:
        return self._per_row(indices, self.envs.call(is_wrapped, wrapper_class, env_indices=self._env_indices(indices)))

    def get_images(self) -> list[np.ndarray]:
        if self.render_mode != "rgb_array":
            raise APIUsageError(f"get_images needs render_mode='rgb_array', the envs have {self.render_mode!r}")
        return self._per_row(None, self.envs.render())

    def __repr__(self) -> str:
        return f"SB3VecEnv({self.envs!r})"


def to_sb3(envs: VectorEnv) -> SB3VecEnv:
    """``envs`` (made with ``autoreset="same_step"``) as a Stable-Baselines3 ``VecEnv``."""
    return SB3VecEnv(envs)
