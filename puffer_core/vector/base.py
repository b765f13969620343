"""``VectorEnv``: the API every vector backend implements, and the layout of its rows.

Envs are built by ``puffer_core.env.factory.EnvFactory``, stepped by
``puffer_core.vector.env_group.EnvGroup``; counts are checked by
``puffer_core.vector.checks``.

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
    Episode statistics (``puffer_core.env.postprocess``) make infos empty on ordinary steps,
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

import inspect
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, ClassVar, TypeVar, cast

import numpy as np

from puffer_core.env.factory import EnvFactory
from puffer_core.errors import APIUsageError, PufferError, WorkerError
from puffer_core.vector.actions import ActionCheck
from puffer_core.vector.autoreset import NEXT_STEP, ResetPlan, reset_plan
from puffer_core.vector.calls import CallResult, EnvCall, raise_failures
from puffer_core.vector.checks import format_choices
from puffer_core.vector.env_group import EnvFault
from puffer_core.vector.faults import FaultLog
from puffer_core.vector.native_group import NO_SINGLE_ENVS, native_spaces_problem
from puffer_core.vector.vector_settings import BackendOptions, VectorSettings, WorkerOptions

__all__ = [
    "VectorEnv",
    "action_buffer_spec",
    "allocate_arrays",
    "batched_space",
    "check_native_batch",
    "format_infos",
    "probe_env",
    "slice_arrays",
]


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


def check_native_batch(factory: EnvFactory, env: Any) -> None:
    """A native batch of one env steps what ``env`` (the probe, one env made alone) steps: the
    same single-agent spaces, next-step autoreset; else APIUsageError saying what differs (the
    caller closes ``env``)."""
    name = factory.name
    if int(getattr(env, "num_agents", 1)) != 1:
        raise APIUsageError(f"native batches host single-agent envs; {name} has {env.num_agents} agent slots")
    try:
        batch = factory.batch(1)
    except PufferError:
        raise
    except Exception as exc:
        fault = EnvFault(0, "construction (a native batch in the main process)", exc)
        raise fault.to_worker_error(None, "vector.make") from exc
    try:
        problem = native_spaces_problem(batch, env.obs_layout.original_space, env.action_layout.original_space)
    finally:
        batch.close()
    if problem is not None:
        raise APIUsageError(f"{name}'s native batch does not step the env it makes alone: {problem}")


def action_buffer_spec(action_space: Any) -> tuple[tuple[int, ...], np.dtype]:
    """(per-row shape, dtype) of the action buffer for a flat action space."""
    from gymnasium import spaces

    if isinstance(action_space, spaces.Discrete):
        return (), np.dtype(np.int64)
    if isinstance(action_space, (spaces.MultiDiscrete, spaces.MultiBinary, spaces.Box)):
        return tuple(action_space.shape), np.dtype(action_space.dtype)
    raise APIUsageError(
        f"the vector backends take Discrete, MultiDiscrete, MultiBinary or Box action spaces, got {action_space}; "
        "wrap the env with puffer_core.env.emulation.emulate so its actions are flattened"
    )


def batched_space(space: Any, n: int) -> Any:
    try:
        from gymnasium.vector.utils import batch_space

        return batch_space(space, n)
    except Exception:
        return None


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


_Env = TypeVar("_Env", bound="VectorEnv")


def _signature(options: type[BackendOptions]) -> inspect.Signature:
    """A backend's constructor as callers see it: ``VectorEnv.__init__``'s parameters, then
    its ``Options`` as keywords with their defaults."""
    common = list(inspect.signature(VectorEnv.__init__).parameters.values())[1:-1]  # no self, no **options
    keyword = inspect.Parameter.KEYWORD_ONLY
    own = [inspect.Parameter(f.name, keyword, default=f.default, annotation=f.type) for f in fields(options)]
    return inspect.Signature([*common, *own])


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
    #: ``vector.make(..., check_actions=False)`` leaves only the shape check
    check_actions: bool = True
    #: the checked settings it was made with
    settings: VectorSettings

    _closed: bool = False
    _state: str = "new"
    _seed: int | None = None
    #: the backend's own settings (``vector_kwargs``, or keywords of its constructor): their
    #: defaults and checks (see :mod:`puffer_core.vector.vector_settings`)
    Options: ClassVar[type[BackendOptions]] = BackendOptions

    def __init__(
        self,
        env: str | Callable[..., Any] | EnvFactory,
        num_envs: int = 1,
        num_workers: int | None = None,
        batch_size: int | None = None,
        seed: int | None = None,
        env_kwargs: dict | None = None,
        autoreset: str = NEXT_STEP,
        on_fault: str = "raise",
        **options: Any,
    ):
        """``num_envs`` copies of ``env`` (``make``'s parameters, and the backend's ``Options``
        as keywords), every setting checked before anything starts."""
        self._closed = True  # until started: close() is a no-op
        checked = self.Options.checked(options, type(self).__name__)
        common = (env, num_envs, num_workers, batch_size, seed, env_kwargs, autoreset, on_fault)
        self._open(VectorSettings.check(self.backend, checked, *common))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.__signature__ = _signature(cls.Options)  # what help() and inspect show: the real keywords

    @classmethod
    def from_settings(cls: type[_Env], settings: VectorSettings) -> _Env:
        """A vector env started on ``settings`` (checked already: ``make``'s way in)."""
        if settings.backend != cls.backend or type(settings.options) is not cls.Options:
            raise APIUsageError(f"these settings are the {settings.backend} backend's, not {cls.__name__}'s")
        envs = cls.__new__(cls)
        envs._closed = True
        envs._open(settings)
        return envs

    def _open(self, settings: VectorSettings) -> None:
        """Start the backend on checked ``settings`` (each backend's own start-up)."""
        raise NotImplementedError

    def _take_settings(self, settings: VectorSettings) -> Any:
        """Keep what every backend keeps of ``settings``; probe one env for the spaces and set
        the counts in agent rows. Returns that env (the caller keeps it, or closes it)."""
        self.settings = settings
        self.autoreset_mode, self._seed, self._on_fault = settings.autoreset, settings.seed, settings.on_fault
        self.check_actions = settings.check_actions
        env, spec = probe_env(settings.factory)
        if settings.factory.native:
            try:
                check_native_batch(settings.factory, env)
            except BaseException:
                env.close()
                raise
        a = spec["agents_per_env"]
        self.agents_per_env = a
        self.possible_agents = spec["possible_agents"]
        self.single_observation_space = spec["observation_space"]
        self.single_action_space = spec["action_space"]
        self._action_shape, self._action_dtype = action_buffer_spec(self.single_action_space)
        self.num_envs = settings.num_envs * a
        self.num_workers = settings.num_workers
        self.batch_size = settings.batch_size * a
        self.observation_space = batched_space(self.single_observation_space, self.batch_size)
        self.action_space = batched_space(self.single_action_space, self.batch_size)
        return env

    def _init_workers(self, settings: VectorSettings) -> None:
        """``_take_settings``, then lay the rows out over the units (MP and Ray: the workers and
        Multiprocessing's main share), with the workers' timeouts and fault log."""
        driver = self._take_settings(settings)
        try:
            driver.close()  # only its layouts are kept (unflatten_observation)
        except Exception:
            pass
        self.driver_env = driver
        options = cast(WorkerOptions, settings.options)
        self.timeout, self._startup_timeout = options.timeout, options.startup_timeout
        self._fault_log = FaultLog(options.max_restarts)
        self._started = False  # until every unit is built: a fault then raises, whatever on_fault says
        counts, a, units = list(settings.counts), self.agents_per_env, len(settings.counts)
        envs, batch = settings.num_envs, settings.batch_size
        self._workers_per_batch = units if batch == envs else batch // counts[0]
        self._env_counts = counts
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(int)
        self._first_env = starts[:-1].tolist()
        self._row_bounds = [(int(starts[w]) * a, int(starts[w + 1]) * a) for w in range(units)]
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
                f"autoreset='disabled': env(s) {format_choices(which, limit=6).replace(' or ', ' and ')} ended and "
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
        if self.settings.factory.native:  # refused here, before a worker is asked
            raise APIUsageError(NO_SINGLE_ENVS)
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
