"""``EnvFactory``: builds one emulated env, writing into the rows a vector backend hands it.

Every backend builds its envs through one (Serial in the main process, each
Multiprocessing worker and Ray actor in its own); env 0 is wrapped by the recording
when a run records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from puffer_core.env.emulation import GymnasiumEmulator, PettingZooEmulator
from puffer_core.env.environments import emulate_with_stats, make_batch_from_spec, make_from_spec
from puffer_core.errors import APIUsageError
from puffer_core.plugins import get_plugins
from puffer_core.plugins.gymnasium_ids import is_gymnasium_id
from puffer_core.specs.declarations import EnvSpec

__all__ = ["EnvFactory", "RecordingPlan", "attach", "env_name", "has_native_batches"]


def env_name(env: Any) -> str:
    """An env id as it is; a creator's qualified name (what messages and a checkpoint call it)."""
    if isinstance(env, str):
        return env
    return getattr(env, "__qualname__", None) or getattr(env, "__name__", None) or repr(env)


class RecordingPlan(Protocol):
    """What ``EnvFactory`` needs of a recording of env 0 (``puffer_core.env.recording.Recording``,
    a layer above, so it is handed in, not imported): the creator kwargs that make the env
    render, and ``wrap``, which returns the env recording itself."""

    @property
    def env_kwargs(self) -> Mapping[str, Any]: ...

    def wrap(self, env: Any) -> Any: ...


def _is_emulator(env: Any) -> bool:
    return isinstance(env, (GymnasiumEmulator, PettingZooEmulator))


def attach(emulator: Any, buf: Any) -> Any:
    """Make ``emulator`` write into ``buf``; returns the env to use (maybe a copying proxy)."""
    if buf is None or emulator.buf is buf:
        return emulator
    rebind = getattr(emulator, "attach", None)  # both emulators offer it; their subclasses inherit it
    if callable(rebind):
        rebind(buf)
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

    def __init__(
        self,
        env: str | Callable[..., Any],
        env_kwargs: Mapping[str, Any] | None = None,
        recording: RecordingPlan | None = None,
        native: bool = False,
    ):
        if not isinstance(env, str) and not callable(env):
            raise APIUsageError(
                f"env must be a registered env id (str) or a zero-argument creator, got {type(env).__name__}; "
                "see `puffer envs` for ids"
            )
        self.env = env
        self.env_kwargs = dict(env_kwargs or {})
        #: env 0's recording (a ``RecordingPlan``), or None
        self.recording = recording
        #: whether the backends step these envs in native batches (``batch``), not one by one
        self.native = native

    #: the spec of ``env`` once this process looked it up (a class default: a factory unpickled
    #: or copied without ``__init__`` starts without one)
    _looked_up: EnvSpec | None = None

    def _spec(self) -> EnvSpec:
        """The env id's spec, looked up once per process: each env built after the first skips
        the lookup (not pickled: a worker looks it up in its own plugins, whose creators need
        not pickle)."""
        if self._looked_up is None:
            self._looked_up = get_plugins().get_spec(self.env)
        return self._looked_up

    def __getstate__(self) -> dict[str, Any]:
        # A gymnasium id's spec travels (its creator carries the registration, which a user's
        # gymnasium.register may not make in the worker); a plugin's is looked up there again.
        spec = self._spec() if isinstance(self.env, str) and is_gymnasium_id(self.env) else None
        return {**self.__dict__, "_looked_up": spec}

    @property
    def name(self) -> str:
        return env_name(self.env)

    def batch_spec(self) -> EnvSpec | None:
        """The spec whose ``batch_creator`` makes this env's native batches (None: the env has none)."""
        spec = getattr(self.env, "spec", None) if not isinstance(self.env, str) else self._spec()
        return spec if isinstance(spec, EnvSpec) and spec.batch_creator is not None else None

    def batch(self, num_envs: int) -> Any:
        """A native batch of ``num_envs`` of these envs (the spec's ``batch_creator``, with the env kwargs)."""
        spec = self.batch_spec()
        if spec is None:
            raise APIUsageError(f"{self.name} has no native batches: its plugin declares no batch_creator")
        return make_batch_from_spec(spec, num_envs, **self.env_kwargs)

    def __call__(self, buf: Any = None, index: int | None = None) -> Any:
        """The emulated env writing into ``buf``; env ``index`` 0 records when ``recording`` is set."""
        recording = self.recording if index == 0 else None
        kwargs = self.env_kwargs if recording is None else {**self.env_kwargs, **recording.env_kwargs}
        if isinstance(self.env, str):
            made = make_from_spec(self._spec(), **kwargs)
        else:
            made = self.env(**kwargs)
        emulated = _is_emulator(made) or isinstance(made, _CopyingEmulator)
        # ... or an emulator-like object from elsewhere (e.g. a subclass)
        emulated = emulated or all(hasattr(made, name) for name in ("buf", "num_agents", "observation_space"))
        env = attach(made, buf) if emulated else emulate_with_stats(made, buf)
        return env if recording is None else recording.wrap(env)


def has_native_batches(env: Any) -> bool:
    """Whether ``env`` (an id, or a creator of a spec's env) declares native batches (a batch_creator)."""
    return (isinstance(env, str) or callable(env)) and EnvFactory(env).batch_spec() is not None
