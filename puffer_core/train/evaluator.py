"""Evaluation during training (``eval_seconds``): the policy played on an env of its own, the best kept.

Every ``eval_seconds`` (at the end of an update), ``eval_episodes`` episodes of the current
policy, its actions sampled as in training, on one env built once for the run (seeded apart
from the training envs). Their mean return and length go to the logs (``eval/episodic_return``,
``eval/episodic_length``); when the mean return is the best so far, the run's checkpoint is
written as ``OUT/best.pt`` beside ``policy.pt``, which ``puffer eval OUT/best.pt`` and
``--record`` play as they play ``policy.pt``.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

from puffer_core import vector
from puffer_core.errors import APIUsageError
from puffer_core.train import checkpoint as checkpoints
from puffer_core.train.evaluation import DEFAULT_MAX_STEPS, play_episodes
from puffer_core.train.plan import RunPlan

__all__ = ["BEST", "EvaluationDuringTraining"]

BEST = "best.pt"
#: The eval env's seed, apart from the training envs' (seed + i).
SEED_OFFSET = 1_000_003


class EvaluationDuringTraining:
    """An ``on_update`` that evaluates every ``eval_seconds`` (see the module); ``close`` frees its env."""

    def __init__(self, plan: RunPlan, trainer: Any, directory: Path | None, logs: Any):
        self.plan, self.trainer, self.directory, self.logs = plan, trainer, directory, logs
        self.every = plan.config.eval_seconds
        self.last = time.monotonic()
        self.best: float | None = None
        self.envs: Any = None

    def __call__(self, row: dict[str, Any]) -> None:
        if self.every is None or time.monotonic() - self.last < self.every:
            return
        try:
            self.evaluate()
        except APIUsageError as exc:  # e.g. episodes that never end within the cap: said once, not again
            warnings.warn(f"evaluation during training stopped: {exc}", RuntimeWarning, stacklevel=2)
            self.every = None
        self.last = time.monotonic()

    def evaluate(self) -> float:
        """Play the episodes now; their mean return (``best.pt`` written when it is the best so far)."""
        config, trainer = self.plan.config, self.trainer
        if self.envs is None:
            self.envs = vector.make(self.plan.vector_env(), num_envs=1, seed=config.seed + SEED_OFFSET,
                                    **self.plan.env_kwargs)  # fmt: skip
        policy = trainer.policy
        policy.eval()
        try:
            name = self.plan.env_name
            result = play_episodes(self.envs, policy, config.eval_episodes, False, DEFAULT_MAX_STEPS, name)
        finally:
            policy.train()
        mean = sum(result.returns) / len(result.returns)
        length = sum(result.lengths) / len(result.lengths)
        self.logs.scalars({"eval/episodic_return": mean, "eval/episodic_length": length}, trainer.step)
        if self.best is None or mean > self.best:
            self.best = mean
            if self.directory is not None:
                checkpoints.save(self.directory, trainer.checkpoint(self.plan.env_name, self.plan.env_kwargs), BEST)
        return mean

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()
            self.envs = None
