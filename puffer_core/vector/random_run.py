"""The main job behind `puffer run`: an env vectorized, random actions, steps/second and episode statistics."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

import numpy as np

from puffer_core.env.factory import env_name
from puffer_core.env.postprocess import EPISODE_RETURN, NOT_STATISTICS
from puffer_core.env.random_actions import masked_random_actions, random_actions
from puffer_core.errors import APIUsageError
from puffer_core.vector.backends import make

__all__ = ["RunResult", "run_random"]

#: Numeric info keys that say where an info came from rather than how an episode went.


#: How many episode returns a run keeps when it is not limited by episodes.
RETURNS_KEPT = 10_000


@dataclass
class RunResult:
    env_id: str
    backend: str
    num_envs: int
    num_workers: int
    batch_size: int
    steps: int
    seconds: float
    episodes: int = 0
    #: mean of every numeric episode statistic (episode_return, episode_length, score, …)
    episode_means: dict[str, float] = field(default_factory=dict)
    #: the returns of the first episodes to end, in the order they ended: every one up to
    #: ``episodes`` when that was the limit, else up to ``RETURNS_KEPT`` (a long run's list stays bounded)
    episode_returns: list[float] = field(default_factory=list)
    #: agent slots per env (PettingZoo's possible agents; 1 for a single-agent env):
    #: ``num_envs`` counts slots, ``num_envs // agents_per_env`` envs
    agents_per_env: int = 1
    #: where each worker ran (the Ray backend's ``envs.placement``: worker, envs, node_id,
    #: host, address); None on the backends that run on this machine only
    placement: list[dict[str, Any]] | None = None
    #: whether the envs stepped in their plugin's native batches (``vector_kwargs={"native": True}``)
    native: bool = False
    #: whether Ctrl-C ended it before its steps or episodes (``run_random(..., interruptible=True)``)
    interrupted: bool = False

    @property
    def sps(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else float("inf")

    def to_json(self) -> dict[str, Any]:
        return {
            "env": self.env_id,
            "backend": self.backend,
            "num_envs": self.num_envs,
            "num_workers": self.num_workers,
            "agents_per_env": self.agents_per_env,
            "batch_size": self.batch_size,
            "steps": self.steps,
            "seconds": round(self.seconds, 4),
            "steps_per_second": round(self.sps, 1),
            "episodes": self.episodes,
            "episode_means": {k: round(v, 4) for k, v in self.episode_means.items()},
            "placement": self.placement,
            "native": self.native,
            "interrupted": self.interrupted,
        }


def _episode_infos(infos: Any) -> Iterable[dict]:
    """Episode-end info dicts from a vector env's infos, whatever nesting they come in."""
    if isinstance(infos, dict):
        if EPISODE_RETURN in infos:
            yield infos
            return
        for value in infos.values():
            yield from _episode_infos(value)
    elif isinstance(infos, (list, tuple)):
        for item in infos:
            yield from _episode_infos(item)


class _RandomActions:
    """A batch of random actions per step: among the allowed ones where the observations carry
    an action mask, else drawn ahead in chunks (sampling per step would dominate cheap envs)."""

    def __init__(self, envs: Any, rng: np.random.Generator):
        self.space, self.rows, self.rng = envs.single_action_space, envs.batch_size, rng
        self.sample_allowed = masked_random_actions(envs)
        self.chunk = random_actions(self.space, self.rows * 64, rng)
        self.cursor = 0

    def next(self, obs: Any) -> Any:
        if self.sample_allowed is not None:
            return self.sample_allowed(obs, self.rng)
        if self.cursor + self.rows > len(self.chunk):
            self.chunk = random_actions(self.space, self.rows * 64, self.rng)
            self.cursor = 0
        self.cursor += self.rows
        return self.chunk[self.cursor - self.rows : self.cursor]


def run_random(
    env_id: str,
    steps: int | None = 10_000,
    num_envs: int = 1,
    seed: int | None = 0,
    backend: str = "serial",
    num_workers: int | None = None,
    batch_size: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    record: Any = None,
    episodes: int | None = None,
    vector_kwargs: dict[str, Any] | None = None,
    interruptible: bool = False,
    **env_kwargs: Any,
) -> RunResult:
    """Step ``env_id`` with uniformly random actions for at least ``steps`` agent steps, or
    (``episodes``) until at least that many episodes ended, whichever comes first (None: no
    such limit; one of the two must be given); ``record`` (a path or
    ``puffer_core.env.recording.Recording``) records env 0, and ``vector_kwargs`` go to
    ``vector.make`` (e.g. the Ray backend's ``address`` and ``placement``). Where the
    observations carry an action mask (``masked_random_actions``), the actions are drawn
    among the allowed ones. ``interruptible``: Ctrl-C ends the run early and returns what ran
    (``RunResult.interrupted``) instead of raising KeyboardInterrupt."""
    if steps is None and episodes is None:
        raise APIUsageError("run_random needs steps or episodes (or both): when to stop")
    rng = np.random.default_rng(seed)
    totals: dict[str, float] = defaultdict(float)
    returns: list[float] = []
    keep = episodes if episodes is not None else RETURNS_KEPT
    ended = done_steps = 0
    with make(
        env_id,
        num_envs=num_envs,
        num_workers=num_workers,
        batch_size=batch_size,
        backend=backend,
        seed=seed,
        vector_kwargs=vector_kwargs,
        record=record,
        **env_kwargs,
    ) as envs:
        actions = _RandomActions(envs, rng)
        start = time.perf_counter()
        envs.async_reset(seed)
        interrupted = False
        try:
            while (steps is None or done_steps < steps) and (episodes is None or ended < episodes):
                obs, _rew, _term, _trunc, infos, env_ids, masks = envs.recv()
                live = int(np.count_nonzero(masks)) if masks is not None else len(env_ids)
                done_steps += live
                ended += _tally(infos, returns, totals, keep)
                envs.send(actions.next(obs))
                if on_progress is not None:
                    on_progress(live)
        except KeyboardInterrupt:
            if not interruptible:
                raise
            interrupted = True
        seconds = time.perf_counter() - start
        result = RunResult(
            env_id=env_name(env_id),  # an id, or a creator's name (a resolved spec's creator: its id)
            backend=backend,
            num_envs=envs.num_envs,
            num_workers=envs.num_workers,
            batch_size=envs.batch_size,
            steps=done_steps,
            seconds=seconds,
            agents_per_env=envs.agents_per_env,
            placement=_placement(envs),
            native=bool((vector_kwargs or {}).get("native")),
            interrupted=interrupted,
        )
    result.episodes = ended
    result.episode_returns = returns
    result.episode_means = {key: total / ended for key, total in sorted(totals.items())} if ended else {}
    return result


def _tally(infos: Any, returns: list[float], totals: dict[str, float], keep: int) -> int:
    """Each episode that ended in ``infos``: its return onto ``returns`` (while it holds fewer
    than ``keep``), its numeric statistics added to ``totals``; how many ended."""
    ended = 0
    for info in _episode_infos(infos):
        ended += 1
        if len(returns) < keep:
            returns.append(float(info[EPISODE_RETURN]))
        for key, value in info.items():
            if key not in NOT_STATISTICS and isinstance(value, (Real, np.number)) and not isinstance(value, bool):
                totals[key] += float(value)
    return ended


def _placement(envs: Any) -> list[dict[str, Any]] | None:
    """Where each worker of ``envs`` ran, as plain data, if the backend says (Ray's ``placement``)."""
    placement = getattr(envs, "placement", None)
    if placement is None:
        return None
    return [{**entry, "envs": [int(env) for env in entry.get("envs", [])]} for entry in placement]
