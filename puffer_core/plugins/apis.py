"""Telling Gymnasium and PettingZoo envs apart, and AEC → Parallel conversion.

PettingZoo is imported only when an env is converted, so the core stays importable
without it; the type checks look it up in ``sys.modules`` (an env from PettingZoo means
PettingZoo is already imported) and fall back to duck typing.
"""

from __future__ import annotations

import sys
from typing import Any

import gymnasium

from puffer_core.errors import APIUsageError

__all__ = ["is_aec", "is_multiagent", "is_parallel", "to_parallel"]


def is_multiagent(env: Any) -> bool:
    """A PettingZoo-style env (Parallel or AEC, or an emulator of one) rather than a Gymnasium one."""
    # isinstance first: hasattr on a gymnasium 0.29 wrapper warns about attribute forwarding.
    return not isinstance(env, gymnasium.Env) and hasattr(env, "possible_agents")


def _pettingzoo_base(name: str) -> type | None:
    module = sys.modules.get("pettingzoo.utils.env")
    return getattr(module, name, None) if module is not None else None


def is_aec(env: Any) -> bool:
    """True for a PettingZoo AEC env (one agent acts at a time: ``last()``, ``observe()``)."""
    base = _pettingzoo_base("AECEnv")
    if base is not None and isinstance(env, base):
        return True
    cls = type(env)
    return hasattr(cls, "last") and hasattr(cls, "observe") and hasattr(env, "possible_agents")


def is_parallel(env: Any) -> bool:
    """True for a PettingZoo Parallel env (or anything that quacks like one)."""
    base = _pettingzoo_base("ParallelEnv")
    if base is not None and isinstance(env, base):
        return True
    return (
        not is_aec(env)
        and hasattr(env, "possible_agents")
        and callable(getattr(env, "observation_space", None))
        and callable(getattr(env, "action_space", None))
    )


def to_parallel(env: Any) -> Any:
    """A Parallel env for ``env``: Parallel envs pass through, AEC envs are converted.

    Parallelizable AEC envs (``metadata["is_parallelizable"]``) go through PettingZoo's
    ``aec_to_parallel``; turn-based ones (classic board games) through
    ``turn_based_aec_to_parallel``, where every agent observes each step and only the
    agent whose turn it is acts (its ``action_mask`` says so).
    """
    if is_parallel(env):
        return env
    if not is_aec(env):
        raise APIUsageError(
            f"{type(env).__name__} is neither a PettingZoo Parallel nor an AEC env; "
            "give a pettingzoo ParallelEnv/AECEnv, or a gymnasium.Env for single-agent use"
        )
    from pettingzoo.utils import conversions

    if getattr(env, "metadata", {}).get("is_parallelizable", False):
        return conversions.aec_to_parallel(env)
    return conversions.turn_based_aec_to_parallel(env)
