"""What every vector backend shares: the API, env construction, argument checks, and the
``EnvGroup`` that steps a handful of emulated envs in place (Serial is one ``EnvGroup``;
every Multiprocessing worker and every Ray actor runs one).

Units
    ``make``'s ``num_envs`` and ``batch_size`` count environments. The attributes
    ``num_envs`` and ``batch_size`` of a vector env count *agent rows* (environments ×
    ``agents_per_env``); for single-agent envs both are the same.

Arrays
    ``recv`` returns views of the backend's own buffers (shared memory for
    Multiprocessing): they stay valid until the next ``send`` / ``step`` that touches the
    same rows. Copy what you keep longer.

Infos
    A list with one dict per *non-empty* info, in env order within a batch. Each is a
    shallow copy of the env's info plus ``"env_id"``: the agent row it came from (the same
    numbering as ``env_ids``; for single-agent envs that is the env index). Infos of
    multi-agent envs are split per agent and also carry ``"agent"`` (the agent's name).
    Episode statistics (``puffer_core.postprocess``) make infos empty on ordinary steps,
    so almost nothing crosses process boundaries.

Autoreset
    ``autoreset="next_step"`` (default), ``"same_step"`` or ``"disabled"``, as Gymnasium
    1.1+ names them (see :mod:`puffer_core.vector.autoreset`). ``reset(seed)`` seeds env
    ``i`` with ``seed + i`` (or takes one seed per env); later autoresets are unseeded, so
    every env's RNG just continues. Same seed and same actions → the same trajectories on
    every backend, and the same as Gymnasium's ``SyncVectorEnv`` in the same mode.

Calls
    ``call`` / ``get_attr`` / ``set_attr`` / ``render`` reach the envs wherever they run
    (see :mod:`puffer_core.vector.calls`).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import puffer_core
from puffer_core.emulation import Buffers, GymnasiumEmulator, PettingZooEmulator
from puffer_core.environments import emulate_with_stats
from puffer_core.errors import APIUsageError, PufferError, WorkerError
from puffer_core.limits import MAX_ENVS, MAX_SECONDS, MAX_WORKERS, check_int, check_number
from puffer_core.vector.actions import ActionCheck
from puffer_core.vector.autoreset import (
    DISABLED,
    NEXT_STEP,
    NO_SEED,
    SAME_STEP,
    ResetPlan,
    check_autoreset,
    check_seed,
    reset_plan,
)
from puffer_core.vector.calls import CallResult, EnvCall, raise_failures, run_call

__all__ = [
    "EnvFactory",
    "EnvFault",
    "EnvGroup",
    "VectorEnv",
    "action_buffer_spec",
    "batched_space",
    "check_counts",
    "check_seed",
    "probe_env",
    "split_envs",
]


# --------------------------------------------------------------------------- env building


def _is_emulator(env: Any) -> bool:
    return isinstance(env, (GymnasiumEmulator, PettingZooEmulator))


def _attach(emulator: Any, buf: Any) -> Any:
    """Make ``emulator`` write into ``buf``; returns the env to use (maybe a copying proxy)."""
    if buf is None or emulator.buf is buf:
        return emulator
    attach = getattr(emulator, "attach", None)  # both emulators offer it; their subclasses inherit it
    if callable(attach):
        attach(buf)
        return emulator
    return _CopyingEmulator(emulator, buf)  # an emulator-like object from elsewhere


class _CopyingEmulator:
    """Fallback for emulator subclasses we cannot rebind: copies their buffer into ours."""

    def __init__(self, inner: Any, buf: Any):
        self.inner = inner
        self.buf = buf
        for name in ("observation_space", "action_space", "num_agents", "possible_agents"):
            setattr(self, name, getattr(inner, name))

    def _copy(self) -> None:
        self.inner.buf.copy_into(self.buf)

    @property
    def done(self) -> bool:
        done = getattr(self.inner, "done", None)
        return bool((self.buf.terminals | self.buf.truncations).all()) if done is None else done

    def reset(self, seed: int | None = None, options: dict | None = None) -> Any:
        out = self.inner.reset(seed=seed) if options is None else self.inner.reset(seed=seed, options=options)
        self._copy()
        return out

    def step(self, action: Any) -> Any:
        out = getattr(self.inner, "step_in_place", self.inner.step)(action)
        self._copy()
        return out

    step_in_place = step  # what EnvGroup calls: it must reach our copy, not the inner buffer

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


class EnvFactory:
    """Builds one emulated env, writing into ``buf`` (a ``Buffers`` of views) if given.

    ``env`` is a registered env id (built with ``puffer_core.make``) or a creator called
    with ``env_kwargs``; whatever a creator returns that is not yet an emulator gets
    episode statistics and the matching emulator. Picklable when ``env`` is (spawned
    workers use cloudpickle, so lambdas work too).
    """

    def __init__(self, env: str | Callable[..., Any], env_kwargs: dict[str, Any] | None = None, recording: Any = None):
        if not isinstance(env, str) and not callable(env):
            raise APIUsageError(
                f"env must be a registered env id (str) or a zero-argument creator, got {type(env).__name__}; "
                "see `puffer envs` for ids"
            )
        self.env = env
        self.env_kwargs = dict(env_kwargs or {})
        #: A ``puffer_core.recording.Recording`` of env 0, or None.
        self.recording = recording

    @property
    def name(self) -> str:
        if isinstance(self.env, str):
            return self.env
        return getattr(self.env, "__qualname__", None) or getattr(self.env, "__name__", None) or repr(self.env)

    def __call__(self, buf: Any = None, index: int | None = None) -> Any:
        """The emulated env writing into ``buf``; env ``index`` 0 records when ``recording`` is set."""
        recording = self.recording if index == 0 else None
        kwargs = self.env_kwargs if recording is None else {**self.env_kwargs, **recording.env_kwargs}
        if isinstance(self.env, str):
            made = puffer_core.make(self.env, **kwargs)
        else:
            made = self.env(**kwargs)
        emulated = _is_emulator(made) or isinstance(made, _CopyingEmulator)
        # ... or an emulator-like object from elsewhere (e.g. a subclass)
        emulated = emulated or all(hasattr(made, name) for name in ("buf", "num_agents", "observation_space"))
        env = _attach(made, buf) if emulated else emulate_with_stats(made, buf)
        if recording is None:
            return env
        from puffer_core.recording import Recorder  # deferred: only a recording run needs it

        return Recorder(env, recording)


def probe_env(factory: EnvFactory) -> tuple[Any, Any]:
    """Build one env to learn spaces and agent count; returns (emulator, info dict).

    Errors of Puffer Core itself (unknown env id, missing package, bad space) propagate
    as they are; anything else the env raises becomes a WorkerError for env 0."""
    try:
        env = factory()
    except PufferError:
        raise
    except Exception as exc:
        fault = EnvFault(0, "construction (probe env in the main process)", exc)
        raise fault.to_worker_error(None, "vector.make") from exc
    num_agents = int(getattr(env, "num_agents", 1))
    info = {
        "observation_space": env.observation_space,
        "action_space": env.action_space,
        "agents_per_env": num_agents,
        "possible_agents": list(getattr(env, "possible_agents", ["agent_0"])),
    }
    return env, info


def action_buffer_spec(action_space: Any) -> tuple[tuple[int, ...], np.dtype]:
    """(per-row shape, dtype) of the action buffer for a flat action space."""
    from gymnasium import spaces

    if isinstance(action_space, spaces.Discrete):
        return (), np.dtype(np.int64)
    if isinstance(action_space, (spaces.MultiDiscrete, spaces.MultiBinary, spaces.Box)):
        return tuple(action_space.shape), np.dtype(action_space.dtype)
    raise APIUsageError(
        f"the vector backends take Discrete, MultiDiscrete, MultiBinary or Box action spaces, got {action_space}; "
        "wrap the env with puffer_core.emulation.emulate so its actions are flattened"
    )


def batched_space(space: Any, n: int) -> Any:
    try:
        from gymnasium.vector.utils import batch_space

        return batch_space(space, n)
    except Exception:
        return None


# --------------------------------------------------------------------------- arguments


def _fmt_choices(values: Sequence[int], limit: int = 8) -> str:
    values = list(dict.fromkeys(values))
    if len(values) > limit:
        head = ", ".join(str(v) for v in values[: limit - 2])
        return f"{head}, … or {values[-1]}"
    if len(values) == 1:
        return str(values[0])
    return ", ".join(str(v) for v in values[:-1]) + f" or {values[-1]}"


def available_cpus() -> int:
    """CPUs this process may run on (affinity-aware, so containers count right)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def split_envs(num_envs: int, num_workers: int) -> list[int]:
    """Env counts per worker: as even as possible, the first workers take the remainder."""
    base, extra = divmod(num_envs, num_workers)
    return [base + (1 if w < extra else 0) for w in range(num_workers)]


def check_counts(
    num_envs: Any, num_workers: Any, batch_size: Any, backend: str, cpu_count: int | None = None
) -> tuple[int, int, int, list[int]]:
    """Validate and default (num_envs, num_workers, batch_size) in env units.

    Returns (num_envs, num_workers, batch_size, envs per worker). A combination that cannot
    work raises APIUsageError that proposes values that do.
    """
    num_envs = check_int("num_envs", num_envs, 1, MAX_ENVS)
    cpus = cpu_count or available_cpus()
    if backend == "serial":
        if num_workers is not None:
            check_int("num_workers", num_workers, 1, MAX_WORKERS)  # accepted and ignored: Serial has one "worker"
        num_workers = 1
    elif num_workers is None:
        num_workers = min(num_envs, cpus)
    else:
        num_workers = check_int("num_workers", num_workers, 1, MAX_WORKERS)
        if num_workers > num_envs:
            raise APIUsageError(
                f"num_workers {num_workers} is more than num_envs {num_envs}: every worker needs at least one env; "
                f"use num_workers ≤ {num_envs} (e.g. {min(num_envs, cpus)}) or num_envs ≥ {num_workers}"
            )
    if batch_size is None:
        batch_size = num_envs
    batch_size = check_int("batch_size", batch_size, 1, MAX_ENVS)
    if batch_size > num_envs:
        raise APIUsageError(
            f"batch_size {batch_size} is more than num_envs {num_envs}; use a batch_size ≤ {num_envs} "
            f"(it counts environments, like num_envs)"
        )
    counts = split_envs(num_envs, num_workers)
    if batch_size == num_envs:
        return num_envs, num_workers, batch_size, counts

    if backend == "serial":
        if num_envs % batch_size:
            divisors = [d for d in range(1, num_envs + 1) if num_envs % d == 0]
            raise APIUsageError(
                f"batch_size {batch_size} must divide num_envs {num_envs} on the serial backend (envs are stepped "
                f"in fixed groups of batch_size): try {_fmt_choices(divisors)}"
            )
        return num_envs, num_workers, batch_size, counts

    # Batches are made of whole workers, so all workers must hold the same number of envs.
    if num_envs % num_workers:
        workers_ok = [w for w in range(1, num_envs + 1) if num_envs % w == 0 and batch_size % (num_envs // w) == 0]
        raise APIUsageError(
            f"batch_size {batch_size} < num_envs {num_envs} needs the envs split evenly over workers, but "
            f"{num_envs} envs do not split evenly over {num_workers} workers; try num_workers "
            f"{_fmt_choices(workers_ok)} (with batch_size {batch_size}), or batch_size {num_envs}"
        )
    per_worker = num_envs // num_workers
    if batch_size % per_worker:
        batches_ok = list(range(per_worker, num_envs + 1, per_worker))
        workers_ok = [w for w in range(1, num_envs + 1) if num_envs % w == 0 and batch_size % (num_envs // w) == 0]
        raise APIUsageError(
            f"batch_size {batch_size} must be a multiple of the per-worker env count {per_worker} "
            f"({num_envs} envs over {num_workers} workers), since batches are made of whole workers: "
            f"try batch_size {_fmt_choices(batches_ok)}, or keep batch_size {batch_size} with num_workers "
            f"{_fmt_choices(workers_ok)}"
        )
    return num_envs, num_workers, batch_size, counts


def check_timeout(timeout: Any, name: str = "timeout") -> float:
    """A worker's silence limit in seconds: positive, finite and at most a week."""
    return check_number(f"{name} (seconds)", timeout, 0, MAX_SECONDS, low_open=True)


# --------------------------------------------------------------------------- stepping


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


def format_infos(raw: list, agents_per_env: int, possible_agents: Sequence[Any]) -> list[dict]:
    """(env_index, info) pairs → the public list of dicts tagged with ``env_id`` (agent row)."""
    out = []
    if agents_per_env == 1:
        for env_index, info in raw:
            entry = dict(info)
            entry["env_id"] = env_index
            out.append(entry)
        return out
    slot = {agent: i for i, agent in enumerate(possible_agents)}
    for env_index, info in raw:
        base = env_index * agents_per_env
        loose = {}
        for key, value in info.items():
            if key in slot and isinstance(value, dict):
                if value:
                    entry = dict(value)
                    entry["env_id"] = base + slot[key]
                    entry["agent"] = key
                    out.append(entry)
            else:
                loose[key] = value
        if loose:
            loose["env_id"] = base
            out.append(loose)
    return out


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
            env = _attach(prebuilt, buf)
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


# --------------------------------------------------------------------------- the API


class VectorEnv:
    """The API every backend implements. Subclasses set the attributes and implement
    ``async_reset``, ``send``, ``recv`` and ``close``."""

    backend: str = "base"
    single_observation_space: Any
    single_action_space: Any
    observation_space: Any = None
    action_space: Any = None
    #: agent rows (environments × agents_per_env)
    num_envs: int
    num_workers: int
    #: agent rows per recv
    batch_size: int
    agents_per_env: int = 1
    possible_agents: list
    #: an emulator built in the main process for its layouts (``unflatten_observation`` …)
    driver_env: Any = None
    #: "next_step", "same_step" or "disabled" (see :mod:`puffer_core.vector.autoreset`)
    autoreset_mode: str = NEXT_STEP
    #: check actions' dtype and range in send() (:mod:`puffer_core.vector.actions`);
    #: ``vector.make(..., vector_kwargs={"check_actions": False})`` leaves only the shape check
    check_actions: bool = True

    _closed: bool = False
    _state: str = "new"
    _seed: int | None = None

    # The async pair and close are backend specific.
    def _init_workers(self, factory: EnvFactory, envs: int, workers: int, batch: int, counts: list[int]) -> None:
        """Probe one env for the spaces, then lay its rows out over ``workers`` (MP and Ray)."""
        driver, spec = probe_env(factory)
        try:
            driver.close()  # only its layouts are kept (unflatten_observation)
        except Exception:
            pass
        self.driver_env = driver
        a = spec["agents_per_env"]
        self.agents_per_env = a
        self.possible_agents = spec["possible_agents"]
        self.single_observation_space = spec["observation_space"]
        self.single_action_space = spec["action_space"]
        self._action_shape, self._action_dtype = action_buffer_spec(self.single_action_space)
        self.num_envs = envs * a
        self.num_workers = workers
        self.batch_size = batch * a
        self.observation_space = batched_space(self.single_observation_space, self.batch_size)
        self.action_space = batched_space(self.single_action_space, self.batch_size)
        self._workers_per_batch = workers if batch == envs else batch // counts[0]
        self._env_counts = counts
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(int)
        self._first_env = starts[:-1].tolist()
        self._row_bounds = [(int(starts[w]) * a, int(starts[w + 1]) * a) for w in range(workers)]
        self._env_ids = [np.arange(lo, hi) for lo, hi in self._row_bounds]
        self._all_ids = np.arange(self.num_envs)

    def _envs_of(self, w: int) -> range:
        """The envs worker ``w`` steps (MP and Ray)."""
        return range(self._first_env[w], self._first_env[w] + self._env_counts[w])

    def _batch_rows(self, batch: list[int]) -> tuple[Any, np.ndarray]:
        """(rows, env ids) of a batch of workers (MP and Ray): a slice when they are
        contiguous, so the arrays handed out are views; else the row indices."""
        lo, hi = self._row_bounds[batch[0]][0], self._row_bounds[batch[-1]][1]
        if hi - lo == self.batch_size:
            rows = slice(lo, hi)
            return rows, self._all_ids[rows]
        rows = np.concatenate([self._env_ids[w] for w in batch])
        return rows, rows

    def _batch_infos(self, batch: list[int]) -> list:
        """The infos a batch's workers gathered since their last batch (MP and Ray), formatted; cleared."""
        infos: list = []
        for w in batch:
            if self._infos[w]:
                infos.extend(self._infos[w])
                self._infos[w] = []
        return format_infos(infos, self.agents_per_env, self.possible_agents) if infos else infos

    def _count_fault(self, fault: Any, w: int) -> None:
        """Log a fault against worker ``w``'s envs (``on_fault="restart"``); one too many in a
        row closes the vector env and raises the log's WorkerError."""
        try:
            self._fault_log.record(fault, self._envs_of(w))
        except WorkerError:
            self.close()
            raise

    def _check_open(self) -> None:
        if self._closed:
            raise APIUsageError(f"this {type(self).__name__} vector env is closed")

    def _check_recv(self, holding: bool) -> None:
        """recv() comes after a reset, once per send(); ``holding``: the last batch is not acted on yet."""
        self._check_open()
        if self._state == "new":
            raise APIUsageError("recv() before async_reset(); call reset() or async_reset() first")
        if holding:
            raise APIUsageError("recv() called twice without send(); send actions for the last batch first")

    def _check_send(self, holding: bool) -> None:
        """send() acts on the batch the last recv() returned."""
        self._check_open()
        if not holding:
            raise APIUsageError(
                "send() without a batch to act on; call reset()/async_reset() and recv() first"
                if self._state == "new"
                else "send() called twice without recv(); call recv() to get the next batch first"
            )

    def _init_autoreset(self, autoreset: Any, batch_size_envs: int, num_envs_envs: int) -> None:
        self.autoreset_mode = check_autoreset(autoreset)
        if self.autoreset_mode == DISABLED and batch_size_envs != num_envs_envs:
            raise APIUsageError(
                f"autoreset='disabled' needs batch_size == num_envs ({num_envs_envs}), got batch_size "
                f"{batch_size_envs}: the caller resets ended envs with reset(options={{'reset_mask': mask}}), "
                "which acts on every env at once; use autoreset='next_step' with async batches"
            )

    def async_reset(self, seed: Any = None, options: dict | None = None) -> None:
        raise NotImplementedError

    def send(self, actions: Any) -> None:
        raise NotImplementedError

    def recv(self) -> tuple:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def _call(self, indices: list[int], request: EnvCall) -> list[CallResult]:
        """Run ``request`` on the envs at global env ``indices``; one result per index."""
        raise NotImplementedError

    @property
    def _env_count(self) -> int:
        """Environments (not agent rows)."""
        return self.num_envs // self.agents_per_env

    def _plan_reset(self, seed: Any, options: Any) -> ResetPlan:
        """Validate a reset's seed and options; the first reset falls back to make's seed."""
        if seed is None and self._state == "new":
            seed = self._seed
        plan = reset_plan(seed, options, self._env_count, self.agents_per_env)
        if plan.mask is not None:
            if self._state == "new":
                raise APIUsageError("the first reset resets every env; call reset() without a reset_mask first")
            if self.batch_size != self.num_envs:
                raise APIUsageError(
                    f"options['reset_mask'] needs batch_size == num_envs ({self.num_envs}), got {self.batch_size}: "
                    "with async batches some rows are still in flight"
                )
        return plan

    def _check_not_ended(self, terminals: np.ndarray, truncations: np.ndarray) -> None:
        """``autoreset="disabled"``: refuse to step envs that ended and were not reset."""
        ended = (terminals | truncations).reshape(-1, self.agents_per_env).all(axis=1)
        if ended.any():
            which = np.flatnonzero(ended).tolist()
            raise APIUsageError(
                f"autoreset='disabled': env(s) {_fmt_choices(which, limit=6).replace(' or ', ' and ')} ended and "
                "must be reset before they step again; call reset(options={'reset_mask': terminals | truncations})"
            )

    # The synchronous API on top.
    def _require_full_batch(self, what: str) -> None:
        if self.batch_size != self.num_envs:
            raise APIUsageError(
                f"{what}() steps every env at once, but this vector env returns batches of {self.batch_size} of "
                f"{self.num_envs} rows; use async_reset()/recv()/send() with batch_size < num_envs"
            )

    def reset(self, seed: Any = None, options: dict | None = None) -> tuple[np.ndarray, list]:
        """Reset every env (or those of ``options["reset_mask"]``); ``seed``: None, an int
        (env ``i`` gets ``seed + i``) or one seed per env. Returns (observations, infos)."""
        self._require_full_batch("reset")
        self.async_reset(seed, options)
        obs, _, _, _, infos, _, _ = self.recv()
        return obs, infos

    def step(self, actions: Any) -> tuple:
        self._require_full_batch("step")
        self.send(actions)
        obs, rewards, terminals, truncations, infos, _, _ = self.recv()
        return obs, rewards, terminals, truncations, infos

    # Reaching into the envs, wherever they run.
    def call(self, name: Any, *args: Any, env_indices: Any = None, **kwargs: Any) -> tuple:
        """``name(*args, **kwargs)`` on each env (all, or ``env_indices``): a method's result,
        or an attribute's value; ``name`` may also be a picklable ``fn(env, *args, **kwargs)``."""
        request = EnvCall("call", name, args, kwargs)
        return tuple(raise_failures(self._call(self._indices(env_indices), request), request))

    def get_attr(self, name: str, env_indices: Any = None) -> tuple:
        """The attribute ``name`` of each env (looked up through its wrappers)."""
        request = EnvCall("get", name)
        return tuple(raise_failures(self._call(self._indices(env_indices), request), request))

    def set_attr(self, name: str, values: Any, env_indices: Any = None) -> None:
        """Set ``name`` on each env: ``values`` is a list with one value per env, or one value for all."""
        indices = self._indices(env_indices)
        if not isinstance(values, (list, tuple)):
            values = [values] * len(indices)
        if len(values) != len(indices):
            raise APIUsageError(f"set_attr({name!r}) got {len(values)} values for {len(indices)} envs")
        request = EnvCall("set", name, values=list(values))
        raise_failures(self._call(indices, request), request)

    def render(self) -> tuple:
        """Each env's ``render()`` (frames for ``render_mode="rgb_array"``, text for "ansi")."""
        return self.call("render")

    def _indices(self, env_indices: Any) -> list[int]:
        self._check_usable()
        count = self._env_count
        if env_indices is None:
            return list(range(count))
        if isinstance(env_indices, (int, np.integer)):
            env_indices = [env_indices]
        indices = [int(i) for i in env_indices]
        bad = [i for i in indices if not 0 <= i < count]
        if bad:
            raise APIUsageError(f"env index {bad[0]} is out of range: this vector env has envs 0–{count - 1}")
        return indices

    def _check_usable(self) -> None:
        if self._closed:
            raise APIUsageError(f"this {type(self).__name__} vector env is closed")

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def stats(self) -> dict:
        """Faults and restarts so far; backends that restart workers (``on_fault="restart"``) count them."""
        from puffer_core.vector.faults import FaultLog  # faults imports this module's neighbours

        return FaultLog().as_dict()

    def unflatten_observation(self, x: Any) -> Any:
        """Nested zero-copy views of flat observations (see the emulator's method)."""
        return self.driver_env.unflatten_observation(x)

    def __enter__(self) -> VectorEnv:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return (
            f"<{type(self).__name__} num_envs={getattr(self, 'num_envs', '?')} "
            f"num_workers={getattr(self, 'num_workers', '?')} batch_size={getattr(self, 'batch_size', '?')} {state}>"
        )

    def _check_actions(self, actions: Any, rows: int) -> np.ndarray:
        check = self.__dict__.get("_action_check")
        if check is None:  # built on first use: every backend knows its action space by then
            check = ActionCheck(self.single_action_space, *action_buffer_spec(self.single_action_space))
            self.__dict__["_action_check"] = check
        actions = check.shaped(actions, rows)
        if self.check_actions:
            check(actions, self)
        return actions

    _action_shape: tuple = ()


def allocate_arrays(rows: int, observation_space: Any, action_shape: tuple, action_dtype: Any) -> dict:
    return {
        "observations": np.zeros((rows, *observation_space.shape), observation_space.dtype),
        "rewards": np.zeros(rows, np.float32),
        "terminals": np.zeros(rows, bool),
        "truncations": np.zeros(rows, bool),
        "masks": np.zeros(rows, bool),
        "actions": np.zeros((rows, *action_shape), action_dtype),
    }


def slice_arrays(arrays: dict, start: int, stop: int) -> dict:
    return {name: array[start:stop] for name, array in arrays.items()}
