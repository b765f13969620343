"""``puffer train``: a compact PPO that learns through Puffer Core's vector envs.

Needs the ``train`` extra (``pip install 'puffer-core[train]'``: torch and matplotlib);
``import puffer_core`` never imports this package.

``ppo(env, steps, out=DIR, **settings)`` trains and returns the ``Curve`` (``plan_run`` then
``train_plan``: the run resolved once, then trained, as ``puffer train`` does);
``evaluate(DIR, episodes)`` plays a saved policy; ``sweep(env, trials=…, params=…, out=…)``
searches PPO's settings with Optuna. See :mod:`puffer_core.train.run` (a run) and
:mod:`puffer_core.train.trainer` (the loop).
"""

from __future__ import annotations

from typing import Any

from puffer_core.errors import MissingDependencyError

__all__ = [
    "Checkpoint",
    "Curve",
    "EvalPlan",
    "EvalResult",
    "PPOConfig",
    "Policy",
    "RunPlan",
    "SweepInterrupted",
    "SweepResult",
    "TrainingDiverged",
    "TrainingInterrupted",
    "UnsafeCheckpointError",
    "Wandb",
    "evaluate",
    "evaluate_plan",
    "load",
    "plan_eval",
    "plan_run",
    "ppo",
    "sweep",
    "train_plan",
]

#: public name → the module that defines it; imported on first use, so that importing this
#: package (the CLI does, for `puffer train`'s --help) never needs torch.
_HOMES = {
    "Checkpoint": "checkpoint",
    "load": "checkpoint",
    "PPOConfig": "config",
    "Curve": "curve",
    "EvalResult": "evaluation",
    "evaluate": "evaluation",
    "evaluate_plan": "evaluation",
    "EvalPlan": "plan",
    "RunPlan": "plan",
    "plan_eval": "plan",
    "plan_run": "plan",
    "Policy": "policy",
    "SweepInterrupted": "sweeps",
    "SweepResult": "sweeps",
    "TrainingDiverged": "trainer",
    "TrainingInterrupted": "trainer",
    "UnsafeCheckpointError": "checkpoint",
    "ppo": "run",
    "train_plan": "run",
    "sweep": "sweeps",
    "Wandb": "logs",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'puffer_core.train' has no attribute {name!r}")
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            "puffer train needs torch; install the extra with `pip install 'puffer-core[train]'`"
        ) from exc
    import importlib

    return getattr(importlib.import_module(f"puffer_core.train.{home}"), name)
