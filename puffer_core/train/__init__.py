"""``puffer train``: a compact PPO that learns through Puffer Core's vector envs.

Needs the ``train`` extra (``pip install 'puffer-core[train]'``: torch and matplotlib);
``import puffer_core`` never imports this package.

``ppo(env, steps, out=DIR, **settings)`` trains and returns the ``Curve``;
``evaluate(DIR, episodes)`` plays a saved policy. See :mod:`puffer_core.train.ppo`.
"""

from __future__ import annotations

from puffer_core.errors import MissingDependencyError

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only where torch is absent
    raise MissingDependencyError(
        "puffer train needs torch; install the extra with `pip install 'puffer-core[train]'`"
    ) from exc

from puffer_core.train.checkpoint import Checkpoint, load
from puffer_core.train.config import PPOConfig
from puffer_core.train.curve import Curve
from puffer_core.train.evaluate import EvalResult, evaluate
from puffer_core.train.policy import Policy
from puffer_core.train.ppo import TrainingInterrupted, ppo

__all__ = [
    "Checkpoint",
    "Curve",
    "EvalResult",
    "PPOConfig",
    "Policy",
    "TrainingInterrupted",
    "evaluate",
    "load",
    "ppo",
]
