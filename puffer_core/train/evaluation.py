"""``puffer eval DIR``: play a saved policy and report its episode returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from puffer_core import vector
from puffer_core.env.postprocess import EPISODE_LENGTH, EPISODE_RETURN
from puffer_core.env.recording import Recording, plan_recording, published, receipted
from puffer_core.errors import APIUsageError
from puffer_core.specs.limits import MAX_EPISODES, check_int
from puffer_core.train import checkpoint as checkpoints
from puffer_core.train.plan import EvalPlan, plan_eval
from puffer_core.train.policy import Policy
from puffer_core.train.recurrent import step_flags, zero_where
from puffer_core.train.saved_data import short
from puffer_core.train.trainer import pick_device, spaces_of

__all__ = ["DEFAULT_MAX_STEPS", "EvalResult", "evaluate", "evaluate_plan", "play_episodes"]

#: a policy that never ends an episode must not hang `puffer eval`
DEFAULT_MAX_STEPS = 1_000_000


@dataclass
class EvalResult:
    """What ``evaluate`` played: the env id, each finished episode's return and length, and the
    file its recording was written to (None: none)."""

    env: str
    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    record: str | None = None

    @property
    def mean_return(self) -> float:
        return float(np.mean(self.returns)) if self.returns else float("nan")

    def to_json(self) -> dict[str, Any]:
        returns = np.array(self.returns, dtype=float)
        return {
            "env": self.env,
            "episodes": len(self.returns),
            "mean_return": self.mean_return,
            "std_return": float(returns.std()) if len(returns) else None,
            "min_return": float(returns.min()) if len(returns) else None,
            "max_return": float(returns.max()) if len(returns) else None,
            "mean_length": float(np.mean(self.lengths)) if self.lengths else None,
            "returns": self.returns,
            "lengths": self.lengths,
            **({"record": self.record} if self.record is not None else {}),
        }


def evaluate(
    run: str | Path,
    episodes: int = 10,
    *,
    seed: int = 12345,
    greedy: bool = False,
    env: Any = None,
    device: str | None = "cpu",
    max_steps: int = DEFAULT_MAX_STEPS,
    record: Any = None,
    env_kwargs: dict[str, Any] | None = None,
    overwrite: bool = False,
    saved_kwargs: str = "check",
) -> EvalResult:
    """Play the policy saved in ``run`` and return its episodes' returns and lengths.

    Args:
        run: a ``puffer train`` out directory (or its ``policy.pt``), read as data.
        episodes: finished agent episodes to play, one env at a time.
        seed: the env's seed.
        greedy: take the most likely action; by default actions are sampled from the policy's
            distribution, as in training (a greedy policy can repeat one move for good).
        env: replaces the saved env id (needed for runs trained on a creator).
        device: where the policy runs.
        max_steps: give up (APIUsageError) when the episodes have not ended by then.
        record: a path (.mp4, .gif, .cast) that gets the episodes played, or a ``Recording``
            already planned (``puffer_core.env.recording.plan_recording``).
        env_kwargs: override the saved env kwargs, key by key.
        overwrite: let ``record`` replace an existing file.
        saved_kwargs: the saved env kwargs: ``"check"`` (restored where the env's plugin
            declares them restorable, ``EnvSpec.restorable``, else refused), ``"trust"`` (as
            they are) or ``"drop"`` (left out).

    Returns:
        An ``EvalResult``: the env id, each episode's return and length, the file ``record``
        went to (``NAME-2.SUFFIX`` when ``NAME`` appeared during the run), ``mean_return``
        and ``to_json()``.

    Raises:
        UnsafeCheckpointError: the checkpoint would run code on load.
        APIUsageError: a checkpoint that does not check out or fit the env, saved env kwargs
            the env does not declare restorable, a bad argument.
    """
    check_int("episodes", episodes, 1, MAX_EPISODES)
    plan = plan_eval(run, env=env, env_kwargs=env_kwargs, saved_kwargs=saved_kwargs, load=checkpoints.load)
    return evaluate_plan(
        plan, episodes, seed=seed, greedy=greedy, device=device, max_steps=max_steps, record=record, overwrite=overwrite
    )


def evaluate_plan(
    plan: EvalPlan,
    episodes: int = 10,
    *,
    seed: int = 12345,
    greedy: bool = False,
    device: str | None = "cpu",
    max_steps: int = DEFAULT_MAX_STEPS,
    record: Any = None,
    overwrite: bool = False,
) -> EvalResult:
    """Play the policy of ``plan`` (``puffer_core.train.plan.plan_eval``); ``evaluate``'s Args,
    Returns and Raises hold."""
    check_int("episodes", episodes, 1, MAX_EPISODES)
    saved = plan.checkpoint
    if record is not None and not isinstance(record, Recording):
        record = plan_recording(plan.env, record, plan.env_kwargs, episodes, overwrite=overwrite)
    with receipted(record) as record:
        with vector.make(plan.vector_env(), num_envs=1, seed=seed, record=record, **plan.env_kwargs) as envs:
            if spaces_of(envs) != saved.spaces:
                raise APIUsageError(
                    f"{saved.env!r} no longer has the spaces the policy was trained on ({short(saved.spaces)})"
                )
            config = plan.config
            policy = Policy(envs.driver_env.obs_layout, envs.single_action_space, config.hidden_size, config.policy)
            policy.load_state_dict(saved.policy)
            policy.to(pick_device(device)).eval()
            result = play_episodes(envs, policy, episodes, greedy, max_steps, saved.env)
        result.record = published(record)  # once closed: NAME-2.SUFFIX where NAME appeared meanwhile
    return result


def play_episodes(envs: Any, policy: Policy, episodes: int, greedy: bool, max_steps: int, name: str) -> EvalResult:
    """Play until ``episodes`` episodes ended; a recurrent policy's state is carried from step to
    step and starts afresh where the trainer's would (``step_flags``)."""
    result = EvalResult(name)
    device = next(policy.parameters()).device
    rows = envs.num_envs
    state = policy.initial_state(rows, device)
    prev_ended = torch.zeros(rows, dtype=torch.bool, device=device)
    prev_valid = torch.zeros(rows, dtype=torch.bool, device=device)
    low, high = getattr(envs.single_action_space, "low", None), getattr(envs.single_action_space, "high", None)
    envs.async_reset()
    obs, _, _, _, _, _, masks = envs.recv()
    for _ in range(max_steps):
        valid, reset = step_flags(envs.autoreset_mode, torch.from_numpy(masks).to(device), prev_ended, prev_valid)
        with torch.no_grad():
            distribution, _, state = policy.act(
                torch.from_numpy(obs).to(device), None if state is None else zero_where(state, reset)
            )
            action = distribution.mode() if greedy else distribution.sample()
        actions = action.cpu().numpy()
        if low is not None and np.issubdtype(actions.dtype, np.floating):
            actions = np.clip(actions, low, high)
        envs.send(actions)
        obs, _, terminals, truncations, infos, _, masks = envs.recv()
        prev_ended, prev_valid = torch.from_numpy(terminals | truncations).to(device), valid
        for info in infos:
            if EPISODE_RETURN in info:
                result.returns.append(float(info[EPISODE_RETURN]))
                result.lengths.append(int(info[EPISODE_LENGTH]))
        if len(result.returns) >= episodes:
            del result.returns[episodes:], result.lengths[episodes:]
            return result
    raise APIUsageError(f"{name}: only {len(result.returns)} of {episodes} episodes ended within {max_steps:,} steps")
