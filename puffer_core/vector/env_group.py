"""``EnvGroup``: a few emulated envs stepped one after another in place, and ``EnvFault``,
what an env that raises becomes. Serial is one ``EnvGroup``; every Multiprocessing worker
and every Ray actor runs one."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from puffer_core.env.emulation import Buffers
from puffer_core.env.factory import EnvFactory, attach
from puffer_core.errors import APIUsageError, WorkerError
from puffer_core.vector.autoreset import NEXT_STEP, NO_SEED, SAME_STEP, ResetPlan, check_autoreset
from puffer_core.vector.calls import CallResult, EnvCall, run_call

__all__ = ["EnvFault", "EnvGroup", "env_fault_message"]


class EnvFault(Exception):
    """An env raised inside an EnvGroup; carries the global env index and traceback text."""

    def __init__(self, env_index: int, phase: str, exc: BaseException):
        self.env_index = env_index
        self.phase = phase
        self.exc_type = type(exc).__name__
        self.traceback = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        super().__init__(f"env {env_index} raised {self.exc_type} in {phase}: {exc}")

    def to_dict(self) -> dict:
        """What crosses a process boundary (the exception object itself may not pickle)."""
        return {
            "env_index": self.env_index,
            "phase": self.phase,
            "exc_type": self.exc_type,
            "traceback": self.traceback,
        }

    def to_worker_error(self, worker: int | None, backend: str) -> WorkerError:
        where = f"{backend}: worker {worker} " if worker is not None else f"{backend}: "
        message = env_fault_message(self.to_dict(), where)
        return WorkerError(message, worker=worker, env_index=self.env_index, cause=self.traceback)


def env_fault_message(report: dict, where: str) -> str:
    """``WHERE env N raised TYPE in PHASE; its traceback: …`` for an ``EnvFault.to_dict()`` report."""
    return (
        f"{where}env {report['env_index']} raised {report['exc_type']} in {report['phase']}; "
        f"its traceback:\n{report['traceback'].rstrip()}"
    )


class EnvGroup:
    """A few emulated envs stepped one after another, writing into the given arrays in place.

    ``arrays`` holds ``observations, rewards, terminals, truncations, masks, actions`` for
    exactly this group's rows. ``first_env`` is the global index of the group's first env
    (for error messages and call results). Exceptions from envs surface as ``EnvFault``.
    ``autoreset`` is one of :data:`puffer_core.vector.autoreset.AUTORESET_MODES`.
    """

    def __init__(
        self,
        factory: Callable[..., Any],
        num_envs: int,
        agents_per_env: int,
        arrays: dict[str, np.ndarray],
        first_env: int = 0,
        prebuilt: Sequence[Any] = (),
        progress: Any = None,
        autoreset: str = NEXT_STEP,
    ):
        self.num_envs = num_envs
        self.agents_per_env = agents_per_env
        self.first_env = first_env
        self.arrays = arrays
        self.actions = arrays["actions"]
        self.autoreset = check_autoreset(autoreset)
        #: index (within the group) of the env being stepped or built, for fault reports
        self.current = -1
        self._progress = progress  # optional writable 1-element int32 memoryview (shared memory)
        self.envs: list[Any] = []
        self.done = [False] * num_envs
        for i in range(num_envs):
            self._mark(i)
            try:
                env = self._build(factory, i, prebuilt[i] if i < len(prebuilt) else None)
            except Exception as exc:
                self.close()
                raise EnvFault(first_env + i, "construction", exc) from exc
            self.envs.append(env)
        self._mark(-1)
        self._discrete = self.actions.ndim == 1
        # The rows are our buffer: step the emulators without copying their observation out.
        self._steps = [getattr(env, "step_in_place", env.step) for env in self.envs]
        if self.autoreset == NEXT_STEP and agents_per_env == 1 and progress is None:
            self.step_one = self._step_one_next_step  # chosen once: its caller runs it per env

    def _build(self, factory: Callable[..., Any], i: int, prebuilt: Any) -> Any:
        a, arrays = self.agents_per_env, self.arrays
        rows = slice(i * a, (i + 1) * a)
        buf = Buffers(
            observations=arrays["observations"][rows],
            rewards=arrays["rewards"][rows],
            terminals=arrays["terminals"][rows],
            truncations=arrays["truncations"][rows],
            masks=arrays["masks"][rows],
        )
        if prebuilt is not None:
            env = attach(prebuilt, buf)
        elif isinstance(factory, EnvFactory):
            env = factory(buf, self.first_env + i)  # the global index: env 0 may record
        else:
            env = factory(buf)
        n = int(getattr(env, "num_agents", 1))
        if n != a:
            raise APIUsageError(
                f"env {self.first_env + i} has {n} agent slots but the first env had {a}; every env of a vector "
                "env must have the same possible_agents"
            )
        return env

    def _mark(self, i: int) -> None:
        self.current = i
        if self._progress is not None:
            self._progress[0] = i

    def reset(self, plan: ResetPlan | None = None) -> list:
        """Reset the envs ``plan`` selects (every env by default) with its seeds and options.

        ``plan`` is in this group's env indices (``ResetPlan.envs`` cuts one out)."""
        seeds, mask, options = (plan.seeds, plan.mask, plan.options) if plan is not None else (None, None, None)
        infos = []
        for i, env in enumerate(self.envs):
            if mask is not None and not mask[i]:
                continue
            self._mark(i)
            seed = None if seeds is None or seeds[i] == NO_SEED else int(seeds[i])
            try:
                _, info = env.reset(seed=seed) if options is None else env.reset(seed=seed, options=options)
            except Exception as exc:
                raise EnvFault(self.first_env + i, "reset", exc) from exc
            self.done[i] = bool(getattr(env, "done", False))
            if info:
                infos.append((self.first_env + i, info))
        self._mark(-1)
        return infos

    def step(self, lo: int = 0, hi: int | None = None) -> list:
        """Step envs ``lo:hi`` with their rows of ``arrays['actions']``, resetting ended envs
        as the autoreset mode says; returns their non-empty infos as (env index, info)."""
        hi = self.num_envs if hi is None else hi
        if self.autoreset == NEXT_STEP:
            infos = self._step_next_step(lo, hi) if self.agents_per_env == 1 else self._step_next_step_agents(lo, hi)
        else:
            infos = self._step_in_mode(lo, hi)
        if self._progress is not None:
            self._progress[0] = -1
        return infos

    def step_one(self, i: int) -> list:
        """``step(i, i + 1)``: for a caller that steps one env at a time and looks elsewhere
        in between (the main share of Multiprocessing's async batches). Groups in the default
        mode, one agent per env, replace it with ``_step_one_next_step`` (see ``__init__``)."""
        return self.step(i, i + 1)

    def _step_one_next_step(self, i: int) -> list:
        """``step_one`` without the loop and mode dispatch of ``step``."""
        done = self.done
        try:
            if done[i]:
                _, info = self.envs[i].reset()
                done[i] = False
            else:
                _, _, terminal, truncated, info = self._steps[i](
                    self.actions.item(i) if self._discrete else self.actions[i]
                )
                done[i] = bool(terminal or truncated)
        except Exception as exc:
            raise EnvFault(self.first_env + i, "reset" if done[i] else "step", exc) from exc
        return [(self.first_env + i, info)] if info else []

    def _step_next_step(self, lo: int, hi: int) -> list:
        """The default mode, single agent: the hot loop, kept free of per-step calls."""
        infos = []
        envs, steps, done, first, progress = self.envs, self._steps, self.done, self.first_env, self._progress
        actions = self.actions.tolist() if self._discrete else self.actions
        i = lo
        try:
            for i in range(lo, hi):
                if progress is not None:
                    progress[0] = i
                if done[i]:
                    _, info = envs[i].reset()
                    done[i] = False
                else:
                    _, _, terminal, truncated, info = steps[i](actions[i])
                    done[i] = bool(terminal or truncated)
                if info:
                    infos.append((first + i, info))
        except Exception as exc:
            raise EnvFault(first + i, "reset" if done[i] else "step", exc) from exc
        return infos

    def _step_next_step_agents(self, lo: int, hi: int) -> list:
        infos = []
        i = lo
        try:
            for i in range(lo, hi):
                self._mark(i)
                if self.done[i]:
                    _, info = self.envs[i].reset()
                    self.done[i] = bool(getattr(self.envs[i], "done", False))
                else:
                    self.done[i], info = self._step_env(i)
                if info:
                    infos.append((self.first_env + i, info))
        except Exception as exc:
            raise EnvFault(self.first_env + i, "reset" if self.done[i] else "step", exc) from exc
        return infos

    def _step_in_mode(self, lo: int, hi: int) -> list:
        """``same_step`` and ``disabled``: step every env; same-step resets the ones that end."""
        infos = []
        same_step = self.autoreset == SAME_STEP
        i, phase = lo, "step"
        try:
            for i in range(lo, hi):
                self._mark(i)
                phase = "step"
                self.done[i], info = self._step_env(i)
                if same_step and self.done[i]:
                    phase = "reset"
                    info = self._reset_within_step(i, info)
                if info:
                    infos.append((self.first_env + i, info))
        except Exception as exc:
            raise EnvFault(self.first_env + i, phase, exc) from exc
        return infos

    def _step_env(self, i: int) -> tuple[bool, dict]:
        """Step env ``i`` with its action rows; (whether its episode ended, its info)."""
        env, step, a = self.envs[i], self._steps[i], self.agents_per_env
        if a == 1:
            action = self.actions[i].item() if self._discrete else self.actions[i]
            _, _, terminal, truncated, info = step(action)
            return bool(terminal or truncated), info
        _, _, terminals, truncations, info = step(self.actions[i * a : (i + 1) * a])
        flag = getattr(env, "done", None)
        return (bool((terminals | truncations).all()) if flag is None else bool(flag)), info

    def _reset_within_step(self, i: int, final_info: dict) -> dict:
        """Same-step autoreset of env ``i``: keep the final step's reward and flags in its
        rows, put the reset observation there, and the last observation in the info."""
        a, arrays = self.agents_per_env, self.arrays
        rows = slice(i * a, (i + 1) * a)
        final_obs = arrays["observations"][rows].copy()
        kept = {name: arrays[name][rows].copy() for name in ("rewards", "terminals", "truncations")}
        env = self.envs[i]
        _, reset_info = env.reset()
        self.done[i] = bool(getattr(env, "done", False))
        for name, values in kept.items():
            arrays[name][rows] = values
        if a == 1:
            return {**reset_info, "final_observation": final_obs[0], "final_info": final_info}
        return _final_agent_infos(list(env.possible_agents), final_obs, final_info, reset_info)

    def call(self, indices: Sequence[int], request: EnvCall) -> list[CallResult]:
        """Run ``request`` on the envs at local ``indices`` (see :mod:`puffer_core.vector.calls`)."""
        return run_call(self.envs, indices, self.first_env, request)

    def close(self) -> None:
        envs, self.envs = self.envs, []
        for env in envs:
            try:
                env.close()
            except Exception:
                pass


def _final_agent_infos(agents: list, final_obs: np.ndarray, final_info: dict, reset_info: dict) -> dict:
    """A multi-agent env's same-step info: every agent's slot gets its final observation and
    final info beside its reset info; entries not keyed by agent stay at the top."""
    out = {key: value for key, value in reset_info.items() if key not in agents}
    loose_final = {key: value for key, value in final_info.items() if key not in agents}
    if loose_final:
        out["final_info"] = loose_final
    for slot, agent in enumerate(agents):
        entry = dict(reset_info.get(agent) or {})
        entry["final_observation"] = final_obs[slot]
        entry["final_info"] = dict(final_info.get(agent) or {})
        out[agent] = entry
    return out
