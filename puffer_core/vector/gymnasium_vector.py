"""``to_gymnasium``: a Puffer vector env as a ``gymnasium.vector.VectorEnv`` (Gymnasium ≥ 1.1).

A training script written for ``gymnasium.vector`` (CleanRL's, say) runs on it unchanged
except for how the envs are made. It is a thin layer: ``reset`` and ``step`` hand back the
backend's own arrays (views of shared memory for Multiprocessing; no copy unless
``copy=True``, valid until the next step) and only the infos are converted, from Puffer's
list of non-empty dicts to Gymnasium's dict of arrays with ``_key`` masks. Same-step
autoreset's ``final_observation`` appears under Gymnasium's name, ``final_obs``.

Multi-agent envs: every agent row is one sub-env (``num_envs`` counts rows). Rows of dead
agents hold a zero observation, reward 0 and no flags until their env's episode ends;
``infos["mask"]`` (with ``infos["_mask"]``) tells which rows hold a live agent. Calls
(``call``, ``get_attr``, ``render``) return one entry per row, the rows of one env sharing
their env's answer.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from puffer_core.errors import APIUsageError, MissingDependencyError
from puffer_core.vector.base import VectorEnv

__all__ = ["GymnasiumVectorEnv", "to_gymnasium"]

#: Puffer's info key → Gymnasium's name for it
_RENAMED = {"final_observation": "final_obs"}
#: value types whose infos become plain arrays of that type (as Gymnasium's _add_info makes them)
_NUMBERS = {int, float, bool}


def _autoreset_mode(name: str) -> Any:
    try:
        from gymnasium.vector import AutoresetMode
    except ImportError:
        raise MissingDependencyError(
            f"to_gymnasium needs gymnasium ≥ 1.1 (for autoreset modes), found {gymnasium.__version__}; "
            "pip install 'gymnasium>=1.1'"
        ) from None
    return AutoresetMode[name.upper()]


class GymnasiumVectorEnv(gymnasium.vector.VectorEnv):
    """See the module docstring; ``envs`` must step all rows at once (``batch_size == num_envs``)."""

    def __init__(self, envs: VectorEnv, copy: bool = False):
        if not isinstance(envs, VectorEnv):
            raise APIUsageError(
                f"to_gymnasium takes a Puffer vector env (puffer_core.vector.make(...)), got {type(envs).__name__}"
            )
        if envs.batch_size != envs.num_envs:
            raise APIUsageError(
                f"to_gymnasium needs a vector env that steps every row at once, but this one returns batches of "
                f"{envs.batch_size} of {envs.num_envs} rows; make it without batch_size (or batch_size=num_envs)"
            )
        self.envs = envs
        self.copy = copy
        self.num_envs = envs.num_envs
        self.single_observation_space = envs.single_observation_space
        self.single_action_space = envs.single_action_space
        self.observation_space = gymnasium.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.action_space = gymnasium.vector.utils.batch_space(self.single_action_space, self.num_envs)
        driver = envs.driver_env
        self.render_mode = getattr(driver, "render_mode", None)
        self.metadata = {
            "render_modes": list(getattr(driver, "metadata", {}).get("render_modes", [])),
            "autoreset_mode": _autoreset_mode(envs.autoreset_mode),
        }
        self._multiagent = envs.agents_per_env > 1

    def reset(self, *, seed: Any = None, options: dict | None = None) -> tuple[Any, dict]:
        """``seed``: None, an int or one per env; ``options={"reset_mask": mask}`` as in Gymnasium."""
        self.envs.async_reset(seed, options)
        obs, _, _, _, infos, _, masks = self.envs.recv()
        return (obs.copy() if self.copy else obs), self._infos(infos, masks)

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict]:
        self.envs.send(actions)
        obs, rewards, terminals, truncations, infos, _, masks = self.envs.recv()
        if self.copy:
            obs, rewards, terminals, truncations = obs.copy(), rewards.copy(), terminals.copy(), truncations.copy()
        return obs, rewards, terminals, truncations, self._infos(infos, masks)

    def _infos(self, infos: list[dict], masks: np.ndarray) -> dict:
        """Puffer's list of tagged dicts → Gymnasium's dict of arrays with ``_key`` masks.

        Numbers (what episode statistics are) take a fast path; anything else (nested
        dicts, arrays, the final observation) goes through Gymnasium's own ``_add_info``."""
        out: dict = {}
        n = self.num_envs
        for entry in infos:
            row = entry["env_id"]
            for key, value in entry.items():
                kind = type(value)
                if key == "env_id":
                    continue
                if kind in _NUMBERS:
                    array = out.get(key)
                    if array is None:
                        array = out[key] = np.zeros(n, kind)
                        out["_" + key] = np.zeros(n, bool)
                    array[row] = value
                    out["_" + key][row] = True
                else:
                    self._add_info(out, {_RENAMED.get(key, key): value}, row)
        if self._multiagent:
            out["mask"], out["_mask"] = masks.copy(), np.ones(n, bool)
        return out

    def render(self) -> tuple | None:
        frames = self._per_row(self.envs.render())
        return None if all(frame is None for frame in frames) else frames

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple:
        return self._per_row(self.envs.call(name, *args, **kwargs))

    def get_attr(self, name: str) -> tuple:
        return self._per_row(self.envs.get_attr(name))

    def set_attr(self, name: str, values: Any) -> None:
        """One value for every env, or a list with one per row (the rows of one env must agree)."""
        a = self.envs.agents_per_env
        if isinstance(values, (list, tuple)) and a > 1:
            values = list(values)
            if len(values) != self.num_envs:
                raise APIUsageError(f"set_attr({name!r}) got {len(values)} values for {self.num_envs} rows")
            values = values[::a]
        self.envs.set_attr(name, values)

    def _per_row(self, per_env: tuple) -> tuple:
        a = self.envs.agents_per_env
        return per_env if a == 1 else tuple(value for value in per_env for _ in range(a))

    def close_extras(self, **kwargs: Any) -> None:
        envs = getattr(self, "envs", None)  # None when __init__ refused the envs
        if envs is not None:
            envs.close()

    @property
    def unwrapped(self) -> GymnasiumVectorEnv:
        return self

    def __repr__(self) -> str:
        return f"GymnasiumVectorEnv({self.envs!r})"


def to_gymnasium(envs: VectorEnv, copy: bool = False) -> GymnasiumVectorEnv:
    """``envs`` as a ``gymnasium.vector.VectorEnv``; ``copy=True`` hands out copies of the
    arrays (as Gymnasium's own vector envs do by default) instead of the backend's views."""
    return GymnasiumVectorEnv(envs, copy=copy)
