"""The vector settings worth measuring: what autotune tries and ``puffer bench`` compares.

``settings_grid`` is Serial, and Multiprocessing with ``num_workers`` in {1, cores − 1,
cores, 2 × cores} (clipped to ``num_envs``), ``batch_size`` ``num_envs`` and, where valid,
``num_envs // 2`` (EnvPool-style: whichever workers finish first), each with the main
process stepping one share of the envs (``main_share``) and without; it holds every
setting ``puffer bench`` measures (``mp_settings``, ``main_share_settings``). For an env with
native batches (``EnvSpec.batch_creator``), ``settings_grid(..., native=True)`` adds Serial
and the Multiprocessing settings of ``mp_settings`` stepping them (``native_settings``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from puffer_core.errors import APIUsageError
from puffer_core.vector.checks import available_cpus, check_counts

__all__ = [
    "DEFAULT_NUM_ENVS",
    "STANDARD",
    "Setting",
    "default_num_envs",
    "main_share_settings",
    "mp_settings",
    "native_settings",
    "ray_grid",
    "settings_grid",
]

#: The standard bench set: env id → num_envs.
STANDARD: dict[str, int] = {"classic/cartpole": 16, "atari/breakout": 8, "nethack/score": 8}
#: Envs per setting when the env has no standard count.
DEFAULT_NUM_ENVS = 16


def mp_settings(num_envs: int, cpus: int | None = None) -> list[tuple[int, int]]:
    """(num_workers, batch_size) pairs worth measuring: 1 worker, one per core, two per
    core, each synchronous and (where valid) EnvPool-style with half the envs per batch."""
    cpus = cpus or available_cpus()
    out = []
    for workers in sorted({1, min(cpus, num_envs), min(2 * cpus, num_envs)}):
        for batch in (num_envs, num_envs // 2):
            if batch < 1 or (workers == 1 and batch != num_envs):
                continue
            try:
                check_counts(num_envs, workers, batch, "multiprocessing")
            except APIUsageError:
                continue
            if (workers, batch) not in out:
                out.append((workers, batch))
    return out


def main_share_settings(num_envs: int, cpus: int | None = None) -> list[tuple[int, int]]:
    """(num_workers, batch_size) pairs with the main process stepping one more share
    (``main_share``): one worker fewer than cores (the main process takes the last one) and
    as many as cores, each synchronous and, where valid, with half the envs per batch."""
    cpus = cpus or available_cpus()
    out = []
    for workers in sorted({max(1, min(cpus, num_envs) - 1), min(cpus, num_envs - 1)}):
        if workers < 1:
            continue
        for batch in (num_envs, num_envs // 2):
            try:
                check_counts(num_envs, workers + 1, batch, "multiprocessing")
            except APIUsageError:
                continue
            if batch >= 1 and (workers, batch) not in out:
                out.append((workers, batch))
    return out


@dataclass(frozen=True)
class Setting:
    """One vector setting: ``backend``, worker processes, envs per batch, whether the main
    process steps a share, and how many envs that share holds (None: an even share)."""

    backend: str
    num_workers: int
    batch_size: int
    main_share: bool = False
    main_envs: int | None = None
    #: the Ray backend's vector_kwargs (address, placement) as sorted pairs (hashable)
    ray: tuple[tuple[str, str], ...] = ()
    #: whether the envs step in their plugin's native batches
    native: bool = False

    @property
    def name(self) -> str:
        suffix = " native" if self.native else ""
        if self.backend == "serial":
            return "Serial" + suffix
        if self.backend == "ray":
            return f"Ray w={self.num_workers} b={self.batch_size}{suffix}"
        return f"Multiprocessing w={self.num_workers}{self.main_label} b={self.batch_size}{suffix}"

    @property
    def main_label(self) -> str:
        """ "+main" (an even share), "+main(7)" (7 envs) or ""."""
        if not self.main_share:
            return ""
        return "+main" if self.main_envs is None else f"+main({self.main_envs})"

    def make_kwargs(self, num_envs: int) -> dict[str, Any]:
        """The ``vector.make`` keyword arguments of this setting (the env and its kwargs aside)."""
        kwargs = self._make_kwargs(num_envs)
        if self.native:
            kwargs["vector_kwargs"] = {**kwargs.get("vector_kwargs", {}), "native": True}
        return kwargs

    def _make_kwargs(self, num_envs: int) -> dict[str, Any]:
        if self.backend == "serial":
            return {"num_envs": num_envs, "backend": "serial"}
        if self.backend == "ray":
            ray = {"num_envs": num_envs, "num_workers": self.num_workers, "batch_size": self.batch_size}
            return {**ray, "backend": "ray", **({"vector_kwargs": dict(self.ray)} if self.ray else {})}
        kwargs: dict[str, Any] = {
            "num_envs": num_envs,
            "num_workers": self.num_workers,
            "batch_size": self.batch_size,
            "backend": "multiprocessing",
        }
        if self.main_share:  # off is the default: the pasted call stays short
            kwargs["vector_kwargs"] = {"main_share": True if self.main_envs is None else self.main_envs}
        return kwargs


def default_num_envs(env: Any) -> int:
    """The env's count in the standard bench set (``STANDARD``), else ``DEFAULT_NUM_ENVS``."""
    return STANDARD.get(env, DEFAULT_NUM_ENVS) if isinstance(env, str) else DEFAULT_NUM_ENVS


def native_settings(num_envs: int, cpus: int | None = None) -> list[Setting]:
    """Serial and the Multiprocessing settings of ``mp_settings``, stepping native batches."""
    serial = Setting("serial", 1, num_envs, native=True)
    return [serial] + [Setting("multiprocessing", w, b, native=True) for w, b in mp_settings(num_envs, cpus)]


def settings_grid(num_envs: int, cpus: int | None = None, native: bool = False) -> list[Setting]:
    """Serial, then every valid Multiprocessing setting of the grid (see the module docstring);
    with ``native``, the ``native_settings`` too."""
    cpus = cpus or available_cpus()
    if native:
        return settings_grid(num_envs, cpus) + native_settings(num_envs, cpus)
    grid = [Setting("serial", 1, num_envs)]
    grid += [Setting("multiprocessing", w, b) for w, b in mp_settings(num_envs, cpus)]
    grid += [Setting("multiprocessing", w, b, main_share=True) for w, b in main_share_settings(num_envs, cpus)]
    workers = sorted({min(max(1, w), num_envs) for w in (1, cpus - 1, cpus, 2 * cpus)})
    for main_share in (False, True):
        for w in workers:
            for batch in dict.fromkeys((num_envs, num_envs // 2)):
                setting = Setting("multiprocessing", w, batch, main_share)
                if setting not in grid and _valid(setting, num_envs):
                    grid.append(setting)
    # The main process also receives, sends and runs the caller's code, so an even share
    # can make the workers wait for it: the same full-batch settings with one env less for it.
    for setting in [s for s in grid if s.main_share and s.batch_size == num_envs]:
        even = num_envs // (setting.num_workers + 1)
        lighter = Setting("multiprocessing", setting.num_workers, num_envs, True, even - 1)
        if even >= 2 and _valid(lighter, num_envs):
            grid.append(lighter)
    return grid


def ray_grid(num_envs: int, cpus: int | None = None, vector_kwargs: dict[str, Any] | None = None) -> list[Setting]:
    """Serial, then the Ray backend at Multiprocessing's worker and batch settings
    (``mp_settings``), each with ``vector_kwargs`` (the cluster's address, the placement)."""
    ray = tuple(sorted((vector_kwargs or {}).items()))
    return [Setting("serial", 1, num_envs)] + [Setting("ray", w, b, ray=ray) for w, b in mp_settings(num_envs, cpus)]


def _valid(setting: Setting, num_envs: int) -> bool:
    """Whether Multiprocessing accepts the setting (the main share counts as one more unit)."""
    units = setting.num_workers + int(setting.main_share)
    if setting.batch_size < 1 or (setting.main_share and num_envs < 2):
        return False
    if setting.main_envs is not None:  # a count: full batches, room for the workers
        return setting.batch_size == num_envs and 1 <= setting.main_envs <= num_envs - setting.num_workers
    try:
        check_counts(num_envs, units, setting.batch_size, "multiprocessing")
    except APIUsageError:
        return False
    return True
