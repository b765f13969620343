"""``VectorSettings``: what every backend is built from, checked once before anything starts.

``make`` checks its arguments into one (``VectorSettings.check``) and starts the backend on
it (``VectorEnv.from_settings``); a backend built directly (``Serial(...)``,
``Multiprocessing(...)``, ``Ray(...)``) checks the same through ``VectorEnv.__init__``. The
settings every backend shares (the env's factory and recording, the counts, ``seed``,
``autoreset``, ``on_fault``, ``check_actions``) are checked here; a backend's own
(``vector_kwargs``) are the fields of its ``Options``, a frozen dataclass whose every field
is made by ``option``: its default beside the check of a value given for it (bounds from
:mod:`puffer_core.specs.limits`). A bad value is one line naming it, the same on every path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple, TypeVar

from puffer_core.env.factory import EnvFactory, RecordingPlan
from puffer_core.errors import APIUsageError
from puffer_core.specs.limits import check_flag
from puffer_core.vector.autoreset import DISABLED, NEXT_STEP, check_autoreset, check_seed
from puffer_core.vector.checks import check_counts, check_timeout
from puffer_core.vector.faults import DEFAULT_MAX_RESTARTS, check_max_restarts, check_on_fault
from puffer_core.vector.memory_guard import check_memory

__all__ = [
    "MOVED_TO_MAKE",
    "RECORDING_CLOSE_GRACE",
    "BackendOptions",
    "Counts",
    "VectorSettings",
    "WorkerOptions",
    "check_bool",
    "option",
]

#: Seconds ``close`` gives workers to close their envs when env 0 records: its process
#: writes the video's end (a GIF's last frames) as env 0 closes.
RECORDING_CLOSE_GRACE = 60.0
#: ``make``'s own parameters that once rode in ``vector_kwargs``, and what each is
MOVED_TO_MAKE = {
    "record": "a path (.mp4, .gif or .cast) or a planned Recording",
    "check_actions": "True or False",
}
#: ``vector_kwargs`` only the Ray backend takes, and what each says (for another backend's error)
_RAY_ONLY = {
    "address": "the Ray cluster to connect to",
    "placement": "how Ray places the workers over a cluster's nodes",
    "actor_options": "Ray's options of each actor",
    "allow_unauthenticated_ray": "whether Ray may run without token authentication",
}

#: ``check(value, name)``: the checked value, or APIUsageError naming ``name``
Check = Callable[[Any, str], Any]
_Options = TypeVar("_Options", bound="BackendOptions")


def option(default: Any, check: Check) -> Any:
    """A field of a backend's ``Options``: its default, and the check of a value given for it."""
    return field(default=default, metadata={"check": check})


def check_bool(value: Any, name: str) -> bool:
    """True or False, nothing that merely looks like one (a typo like ``"no"`` must not pass)."""
    return check_flag(name, value)


class Counts(NamedTuple):
    """Checked counts in envs: envs, worker processes, envs per batch and envs per unit (a
    worker, or Multiprocessing's main share: the last unit)."""

    num_envs: int
    num_workers: int
    batch_size: int
    per_unit: tuple[int, ...]


@dataclass(frozen=True)
class BackendOptions:
    """The settings every backend takes in ``vector_kwargs``: ``native`` (step the env in its
    plugin's native batches, ``EnvSpec.batch_creator``, instead of one env at a time; Serial
    takes only this). A backend with more subclasses it, each field made by ``option``; the
    class is the backend's ``Options``."""

    native: bool = option(False, check_bool)

    def plan(self, num_envs: Any, num_workers: Any, batch_size: Any, backend: str) -> Counts:
        """The checked counts (``check_counts``); Multiprocessing adds its main share."""
        envs, workers, batch, counts = check_counts(num_envs, num_workers, batch_size, backend)
        return Counts(envs, workers, batch, tuple(counts))

    @classmethod
    def keys(cls) -> list[str]:
        """The keys this backend takes (in ``vector_kwargs``, or as keywords of its constructor)."""
        return sorted(f.name for f in fields(cls))

    @classmethod
    def checked(cls: type[_Options], given: Mapping[str, Any], backend: str, via_make: bool = False) -> _Options:
        """The options ``given`` (by ``make``'s ``vector_kwargs`` when ``via_make``, else as
        keywords of the constructor), each value checked, the rest their defaults."""
        checks = {f.name: f.metadata["check"] for f in fields(cls)}
        unknown = sorted(str(key) for key in given if key not in checks)
        if unknown:
            raise APIUsageError(_unknown_keys(unknown, checks, backend, via_make))
        name_of: Callable[[str], str] = (lambda key: f"vector_kwargs[{key!r}]") if via_make else str
        return cls(**{key: checks[key](value, name_of(key)) for key, value in given.items()})


def _unknown_keys(unknown: list[str], known: Mapping[str, Any], backend: str, via_make: bool) -> str:
    """The one-line error for keys ``backend`` does not take (``known``: those it does)."""
    ray_only = [key for key in unknown if key in _RAY_ONLY]
    named = ray_only or unknown
    given = ("vector_kwargs " if via_make else "") + ", ".join(map(repr, named))
    if ray_only:
        one = len(ray_only) == 1
        what = "; ".join(f"{key!r}: {_RAY_ONLY[key]}" for key in ray_only)
        return (
            f"{given} {'is a Ray setting' if one else 'are Ray settings'} ({what}) that the {backend} backend "
            f"does not take; use backend='ray', or drop {'it' if one else 'them'}"
        )
    takes = f"it takes: {', '.join(sorted(known))}" if known else "it takes none"
    return f"{given} not taken by the {backend} backend; {takes}"


@dataclass(frozen=True)
class WorkerOptions(BackendOptions):
    """The settings of the backends with workers (Multiprocessing, Ray): ``timeout`` (seconds
    a worker may stay silent on one command), ``startup_timeout`` (building its envs gets
    ``max(timeout, startup_timeout)``) and ``max_restarts`` (``on_fault="restart"``: faults in
    a row an env may have before the vector env raises)."""

    timeout: float = option(60.0, check_timeout)
    startup_timeout: float = option(120.0, check_timeout)
    max_restarts: int = option(DEFAULT_MAX_RESTARTS, check_max_restarts)


@dataclass(frozen=True)
class VectorSettings:
    """A vector env's settings, every one checked: what a backend starts from.

    Counts are in envs (``num_envs``, ``batch_size``; the vector env's own attributes count
    agent rows); ``counts`` holds the envs of each unit; ``options`` the backend's own."""

    backend: str
    factory: EnvFactory
    num_envs: int
    num_workers: int
    batch_size: int
    counts: tuple[int, ...]
    seed: int | None
    autoreset: str
    on_fault: str
    options: BackendOptions
    check_actions: bool = True

    @classmethod
    def check(
        cls,
        backend: str,
        options: BackendOptions,
        env: Any,
        num_envs: Any = 1,
        num_workers: Any = None,
        batch_size: Any = None,
        seed: Any = None,
        env_kwargs: Mapping[str, Any] | None = None,
        autoreset: Any = NEXT_STEP,
        on_fault: Any = "raise",
        record: Any = None,
        check_actions: Any = True,
    ) -> VectorSettings:
        """The settings of a ``backend`` vector env (its ``options`` checked already), or
        APIUsageError naming the first that cannot work; a recording is planned last (it
        builds the env once, to see that it renders)."""
        on_fault = check_on_fault(on_fault, backend)
        check_actions = check_flag("check_actions", check_actions)
        seed = check_seed(seed)
        counts = options.plan(num_envs, num_workers, batch_size, backend)
        autoreset = check_autoreset(autoreset)
        if autoreset == DISABLED and counts.batch_size != counts.num_envs:
            raise APIUsageError(
                f"autoreset='disabled' needs batch_size == num_envs ({counts.num_envs}), got batch_size "
                f"{counts.batch_size}: the caller resets ended envs with reset(options={{'reset_mask': mask}}), "
                "which acts on every env at once; use autoreset='next_step' with async batches"
            )
        if isinstance(env, EnvFactory):  # one handed to a backend built directly: it has its recording
            if record is not None:
                raise APIUsageError("record goes with an env id or creator, not an EnvFactory (it has its recording)")
            factory = env
        else:
            recording = None if options.native else _recording(env, record, env_kwargs)
            factory = EnvFactory(env, env_kwargs, recording, options.native)
        if factory.native:
            _check_native(factory, autoreset, record)
        check_memory(factory, counts.num_envs)  # many envs: measured, and refused when they would not fit
        return cls(
            backend=backend,
            factory=factory,
            num_envs=counts.num_envs,
            num_workers=counts.num_workers,
            batch_size=counts.batch_size,
            counts=counts.per_unit,
            seed=seed,
            autoreset=autoreset,
            on_fault=on_fault,
            options=options,
            check_actions=check_actions,
        )

    @property
    def records(self) -> bool:
        """Whether env 0 records."""
        return self.factory.recording is not None

    def close_grace(self, usual: float) -> float:
        """Seconds ``close`` gives the workers to close their envs: ``usual``, or
        ``RECORDING_CLOSE_GRACE`` when env 0 records."""
        return RECORDING_CLOSE_GRACE if self.records else usual


def _check_native(factory: EnvFactory, autoreset: str, record: Any) -> None:
    """What native batches cannot do, refused before anything starts, each in one line."""
    if factory.batch_spec() is None:
        raise APIUsageError(
            f"{factory.name} has no native batches (its plugin declares no batch_creator): drop native; "
            '`puffer envs` names the plugins with native batches, `puffer envs --json` each env\'s "native"'
        )
    if autoreset != NEXT_STEP:
        raise APIUsageError(
            f"native batches reset an ended env on its next step: autoreset={autoreset!r} needs "
            "vector_kwargs={'native': False}"
        )
    if record is not None or factory.recording is not None:
        raise APIUsageError("native batches have no env 0 of their own to record; record with native=False")


def _recording(env: Any, record: Any, env_kwargs: Mapping[str, Any] | None) -> RecordingPlan | None:
    """``make``'s ``record``: a path (planned here, in the main process) or a planned ``Recording``."""
    if record is None:
        return None
    from puffer_core.env.recording import Recording, plan_recording  # deferred: only a recording run needs it

    if isinstance(record, Recording):
        return record
    if not isinstance(record, (str, os.PathLike)):
        raise APIUsageError(f"record must be {MOVED_TO_MAKE['record']}, got {record!r}")
    return plan_recording(env, record, env_kwargs)
