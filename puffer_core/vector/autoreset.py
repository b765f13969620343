"""Autoreset modes, as Gymnasium 1.1+ names them, and the per-env reset plan.

``next_step`` (default)
    An env that ended is reset by the next ``send``; its action for that step is ignored
    and its rows come back with the reset observation, reward 0 and both flags False.
``same_step``
    An env that ends is reset within the same step: its rows hold the reset observation
    with the final step's reward, terminal and truncation, and its info holds
    ``"final_observation"`` (the flat last observation, a copy) and ``"final_info"`` (the
    final step's info); the reset's own info entries sit beside them.
``disabled``
    Nothing resets on its own: the caller resets ended envs with
    ``reset(options={"reset_mask": mask})``; stepping an ended env is an error.

A reset takes a seed as Gymnasium's vector envs do: ``None``, an int (env ``i`` gets
``seed + i``) or one seed (or ``None``) per env; and ``options={"reset_mask": mask}`` to
reset only some envs, any other options being passed to each env's ``reset``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from puffer_core.errors import APIUsageError
from puffer_core.specs.limits import MAX_SEED, int_in

__all__ = ["AUTORESET_MODES", "DISABLED", "NEXT_STEP", "SAME_STEP", "ResetPlan", "check_autoreset", "reset_plan"]

NEXT_STEP, SAME_STEP, DISABLED = "next_step", "same_step", "disabled"
AUTORESET_MODES = (NEXT_STEP, SAME_STEP, DISABLED)
#: a per-env seed slot holding this value means "no seed" (seeds themselves are ≥ 0)
NO_SEED = -1
#: seeds are ints in [0, SEED_LIMIT): env i of a vector env gets seed + i
SEED_LIMIT = MAX_SEED + 1


def check_autoreset(mode: Any) -> str:
    """The mode's name; accepts gymnasium's ``AutoresetMode`` members (and their values) too."""
    name = getattr(mode, "name", mode)  # AutoresetMode.SAME_STEP → "SAME_STEP"
    if isinstance(name, str):
        key = name.replace("_", "").lower()  # also gymnasium's values: "SameStep"
        for known in AUTORESET_MODES:
            if key == known.replace("_", ""):
                return known
    raise APIUsageError(f"autoreset must be one of {', '.join(repr(m) for m in AUTORESET_MODES)}, got {mode!r}")


def _check_one_seed(seed: Any, what: str) -> int:
    if not int_in(seed, 0, SEED_LIMIT - 1):
        raise APIUsageError(f"{what} must be None or an int in [0, 2**62), got {seed!r}")
    return int(seed)


def check_seed(seed: Any) -> int | None:
    """A vector env's base seed: None or an int in [0, 2**62)."""
    return None if seed is None else _check_one_seed(seed, "seed")


def seed_array(seed: Any, num_envs: int) -> np.ndarray | None:
    """Per-env seeds (``NO_SEED`` where none) for ``seed`` = None, an int or a sequence."""
    if seed is None:
        return None
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        base = _check_one_seed(seed, "seed")
        if base + num_envs > SEED_LIMIT:
            raise APIUsageError(f"seed {seed} + {num_envs} envs overflows 2**62; use a smaller seed")
        return np.arange(base, base + num_envs, dtype=np.int64)
    if isinstance(seed, (list, tuple, np.ndarray)):
        if len(seed) != num_envs:
            raise APIUsageError(
                f"a list of seeds needs one seed (or None) per env: {num_envs}, got {len(seed)}; "
                "or pass one int (env i gets seed + i)"
            )
        return np.array(
            [NO_SEED if s is None else _check_one_seed(s, f"seed[{i}]") for i, s in enumerate(seed)], dtype=np.int64
        )
    raise APIUsageError(f"seed must be None, an int or a list of one seed per env, got {type(seed).__name__}")


def _mask_array(mask: Any, num_envs: int, agents_per_env: int) -> np.ndarray:
    """One bool per env; a mask with one entry per agent row must agree within each env."""
    array = np.asarray(mask)
    rows = num_envs * agents_per_env
    shapes = f"({num_envs},)" + (f" (one per env) or ({rows},) (one per agent row)" if agents_per_env > 1 else "")
    if array.dtype != np.bool_ or array.shape not in {(num_envs,), (rows,)}:
        raise APIUsageError(
            f"options['reset_mask'] must be a bool array of shape {shapes}, got dtype {array.dtype} shape {array.shape}"
        )
    if array.shape != (num_envs,):
        per_env = array.reshape(num_envs, agents_per_env)
        split = np.flatnonzero(per_env.any(axis=1) != per_env.all(axis=1))
        if split.size:
            raise APIUsageError(
                f"options['reset_mask'] must be the same for every agent row of an env, but env {split[0]} "
                f"(rows {split[0] * agents_per_env}–{(split[0] + 1) * agents_per_env - 1}) is mixed; "
                "envs reset as a whole"
            )
        array = per_env[:, 0]
    if not array.any():
        raise APIUsageError("options['reset_mask'] selects no env; set True for each env to reset")
    return array.copy()


@dataclass
class ResetPlan:
    """Which envs to reset, with which seeds and options (arrays in env units)."""

    seeds: np.ndarray | None  # int64 per env, NO_SEED for none; None: no env gets a seed
    mask: np.ndarray | None  # bool per env; None: every env
    options: dict | None  # passed to each env's reset

    def envs(self, lo: int, hi: int) -> ResetPlan:
        """The part of the plan for envs ``lo:hi``."""
        return ResetPlan(
            None if self.seeds is None else self.seeds[lo:hi],
            None if self.mask is None else self.mask[lo:hi],
            self.options,
        )


def reset_plan(seed: Any, options: Any, num_envs: int, agents_per_env: int) -> ResetPlan:
    """Validate a vector ``reset(seed, options)`` into a ``ResetPlan``."""
    if options is not None and not isinstance(options, dict):
        raise APIUsageError(f"options must be a dict or None, got {type(options).__name__}")
    options = dict(options or {})
    mask = options.pop("reset_mask", None)
    return ResetPlan(
        seed_array(seed, num_envs),
        None if mask is None else _mask_array(mask, num_envs, agents_per_env),
        options or None,
    )
