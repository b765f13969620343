"""``NativeGroup``: envs that step many at once (an ``EnvSpec.batch_creator``), hosted where an
``EnvGroup`` would step them one by one, and ``make_group``, which picks one of the two.

A group's envs are cut into units, each one native batch (a gymnasium ``VectorEnv`` in
next-step autoreset) over consecutive envs: Serial makes one unit per batch, a
Multiprocessing worker, its main share and a Ray actor one unit of all their envs. A unit's
step is whole-array work: the actions of its rows decoded in one call, one ``step`` of the
native batch, its observations written into the rows in one copy, rewards and flags copied,
and the episode statistics (return, length) kept in arrays. The step after an episode's end
is the native batch's own reset (next-step autoreset, as an ``EnvGroup`` resets an ended env
on its next step): it pays nothing (the batch's contract) and is not counted in the length.

Seeds: ``reset`` gives a unit the seed of its first env when its envs' seeds run on from it
(``vector.make``'s seed S gives env i the seed S + i), which the native batch spreads over its
envs as its plugin documents (gymnasium's ``SyncVectorEnv``: seed + i, exactly the per-env
seeds; CartPole's numpy ``CartPoleVectorEnv``: one generator for the batch); other seeds go as
a list, one per env.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from puffer_core.env.flatten import ActionLayout, ObservationLayout
from puffer_core.env.postprocess import NOT_STATISTICS, episode_info
from puffer_core.errors import APIUsageError
from puffer_core.vector.autoreset import NEXT_STEP, NO_SEED, ResetPlan
from puffer_core.vector.calls import CallResult, EnvCall
from puffer_core.vector.env_group import EnvFault, EnvGroup

__all__ = ["NO_SINGLE_ENVS", "NativeGroup", "make_group", "native_spaces_problem"]

#: Why env calls (call, get_attr, set_attr, render) cannot reach native batches.
NO_SINGLE_ENVS = (
    "call, get_attr, set_attr and render reach single envs, and native batches have none; make the vector env "
    "with vector_kwargs={'native': False}"
)


def make_group(
    factory: Any,
    num_envs: int,
    agents_per_env: int,
    arrays: dict[str, np.ndarray],
    first_env: int = 0,
    prebuilt: Sequence[Any] = (),
    progress: Any = None,
    autoreset: str = NEXT_STEP,
    unit_size: int | None = None,
) -> EnvGroup | NativeGroup:
    """An ``EnvGroup``, or a ``NativeGroup`` when ``factory.native`` (units of ``unit_size`` envs,
    default all of them); the arguments are ``EnvGroup``'s."""
    if getattr(factory, "native", False):
        return NativeGroup(factory, num_envs, arrays, first_env, unit_size or num_envs, progress)
    return EnvGroup(factory, num_envs, agents_per_env, arrays, first_env, prebuilt, progress, autoreset)


def native_spaces_problem(batch: Any, observation_space: spaces.Space, action_space: spaces.Space) -> str | None:
    """Why ``batch`` (a native batch) does not step the env whose spaces are given, or None."""
    single_obs = getattr(batch, "single_observation_space", None)
    single_act = getattr(batch, "single_action_space", None)
    if single_obs != observation_space:
        return f"its single_observation_space is {single_obs}, the env's is {observation_space}"
    if single_act != action_space:
        return f"its single_action_space is {single_act}, the env's is {action_space}"
    mode = getattr(batch, "metadata", {}).get("autoreset_mode")
    if mode is not None and str(getattr(mode, "value", mode)) != "NextStep":
        return f"it resets in autoreset mode {mode}, and native batches need next-step autoreset"
    return None


class _Unit:
    """One native batch over the group's envs ``lo:hi`` (local indices), and its rows of the arrays."""

    def __init__(self, batch: Any, lo: int, hi: int, arrays: dict[str, np.ndarray]):
        self.batch, self.lo, self.hi = batch, lo, hi
        n = hi - lo
        self.returns = np.zeros(n, np.float64)
        #: steps of each env's episode; -1 after its end, so the native batch's reset step counts none
        self.lengths = np.zeros(n, np.int64)
        self.ended = np.zeros(n, bool)
        self.rows = {name: arrays[name][lo:hi] for name in ("observations", "rewards", "terminals", "truncations")}
        self.actions = arrays["actions"][lo:hi]


class NativeGroup:
    """``num_envs`` envs in native batches of ``unit_size``, writing into ``arrays`` in place
    (the rows of exactly this group, as ``EnvGroup``'s); exceptions surface as ``EnvFault``
    naming the unit's first env."""

    agents_per_env = 1

    def __init__(
        self,
        factory: Any,
        num_envs: int,
        arrays: dict[str, np.ndarray],
        first_env: int = 0,
        unit_size: int | None = None,
        progress: Any = None,
    ):
        unit_size = unit_size or num_envs
        if num_envs % unit_size:
            raise APIUsageError(f"native batches of {unit_size} envs cannot split {num_envs} envs evenly")
        self.num_envs, self.first_env, self.arrays = num_envs, first_env, arrays
        self.actions = arrays["actions"]
        self.current = -1
        self._progress = progress
        self.units: list[_Unit] = []
        self._by_start: dict[int, _Unit] = {}
        for lo in range(0, num_envs, unit_size):
            self._mark(lo)
            try:
                batch = factory.batch(unit_size)
            except Exception as exc:
                self.close()
                raise EnvFault(first_env + lo, "construction", exc) from exc
            unit = _Unit(batch, lo, lo + unit_size, arrays)
            self.units.append(unit)
            self._by_start[lo] = unit
        self._mark(-1)
        batch = self.units[0].batch
        self.obs_layout = ObservationLayout(batch.single_observation_space)
        self.action_layout = ActionLayout(batch.single_action_space)
        self._decode = _action_decoder(self.action_layout)
        for unit in self.units:
            unit.write_obs = _observation_writer(self.obs_layout, unit.rows["observations"])
        arrays["masks"][:num_envs] = True  # one agent per env, always live

    def _mark(self, i: int) -> None:
        self.current = i
        if self._progress is not None:
            self._progress[0] = i

    # ------------------------------------------------------------------ reset
    def reset(self, plan: ResetPlan | None = None) -> list:
        """Reset the units ``plan`` selects (a unit resets whole: a mask must cover whole units)."""
        seeds, mask, options = (plan.seeds, plan.mask, plan.options) if plan is not None else (None, None, None)
        infos: list = []
        for unit in self.units:
            if mask is not None:
                chosen = np.asarray(mask[unit.lo : unit.hi], bool)
                if not chosen.any():
                    continue
                if not chosen.all():
                    raise APIUsageError(
                        f"native batches reset whole: envs {self.first_env + unit.lo}–{self.first_env + unit.hi - 1} "
                        "are one batch, and the reset asked for some of them; use vector_kwargs={'native': False}"
                    )
            seed = _unit_seed(None if seeds is None else seeds[unit.lo : unit.hi])
            self._mark(unit.lo)
            try:
                obs, info = unit.batch.reset(seed=seed, options=options)
            except Exception as exc:
                raise EnvFault(self.first_env + unit.lo, "reset", exc) from exc
            self._write_reset(unit, obs)
            infos += self._reset_infos(unit, info)
        self._mark(-1)
        return infos

    def _write_reset(self, unit: _Unit, obs: Any) -> None:
        unit.write_obs(obs)
        unit.rows["rewards"][...] = 0.0
        unit.rows["terminals"][...] = False
        unit.rows["truncations"][...] = False
        unit.returns[:] = 0.0
        unit.lengths[:] = 0
        unit.ended[:] = False

    def _reset_infos(self, unit: _Unit, info: Any) -> list:
        return [(self.first_env + unit.lo + i, entry) for i, entry in _per_env(info, unit.hi - unit.lo) if entry]

    # ------------------------------------------------------------------- step
    def step(self, lo: int = 0, hi: int | None = None) -> list:
        """Step the units that start in ``lo:hi`` with their rows of ``arrays['actions']``."""
        hi = self.num_envs if hi is None else hi
        infos: list = []
        for unit in self.units:
            if lo <= unit.lo < hi:
                infos += self._step_unit(unit)
        if self._progress is not None:
            self._progress[0] = -1
        return infos

    def step_one(self, i: int) -> list:
        """For a caller that steps one env at a time (Multiprocessing's main share): the unit that
        starts at env ``i`` steps whole; the other envs of a unit have stepped with it."""
        unit = self._by_start.get(i)
        return [] if unit is None else self._step_unit(unit)

    def _step_unit(self, unit: _Unit) -> list:
        """One step of ``unit``: whole-array work, no loop over its envs but over those that ended."""
        self._mark(unit.lo)
        try:
            obs, rewards, terminals, truncations, info = unit.batch.step(self._decode(unit.actions))
        except Exception as exc:
            raise EnvFault(self.first_env + unit.lo, "step", exc) from exc
        rows = unit.rows
        unit.write_obs(obs)
        rows["rewards"][...] = rewards
        rows["terminals"][...] = terminals
        rows["truncations"][...] = truncations
        # A reset step pays nothing (next-step autoreset) and takes the length from -1 to 0.
        unit.returns += rewards
        unit.lengths += 1
        ended = np.logical_or(terminals, truncations, out=unit.ended)
        if not ended.any():
            return []  # as EpisodeStats: an info waits for its episode's end
        entries = dict(_per_env(info, unit.hi - unit.lo))
        infos = []
        for i in np.flatnonzero(ended).tolist():
            stats = episode_info(entries.get(i, {}), unit.returns[i], int(unit.lengths[i]))
            infos.append((self.first_env + unit.lo + i, stats))
        unit.returns[ended] = 0.0
        unit.lengths[ended] = -1
        return infos

    # ------------------------------------------------------------ calls, close
    def call(self, indices: Sequence[int], request: EnvCall) -> list[CallResult]:
        """Refused: the vector env refuses calls before they reach a group; this says the same."""
        raise APIUsageError(NO_SINGLE_ENVS)

    def close(self) -> None:
        units, self.units = self.units, []
        for unit in units:
            try:
                unit.batch.close()
            except Exception:  # closing is best effort, as EnvGroup's
                pass


def _action_decoder(layout: ActionLayout) -> Callable[[np.ndarray], Any]:
    """Flat action rows → the batch of actions the native batch takes (no copy where none is needed)."""
    if layout.mode == "discrete" and int(layout.leaves[0].start) == 0:
        dtype = layout.dtype
        return lambda rows: rows if rows.dtype == dtype else rows.astype(dtype)
    return layout.unflatten


def _observation_writer(layout: ObservationLayout, rows: np.ndarray) -> Callable[[Any], None]:
    """``write(obs)``: a batch of observations into ``rows`` (one copy for a single leaf)."""
    if layout.single_leaf:
        (dst,) = layout.views(rows)  # rows as the leaf's dtype and shape, batch dimension first

        def write(obs: Any) -> None:
            np.copyto(dst, obs, casting="same_kind")

        return write
    return lambda obs: layout.flatten(obs, out=rows)


def _unit_seed(seeds: np.ndarray | None) -> int | list[int | None] | None:
    """A unit's ``reset(seed=...)``: its first env's seed when the envs' seeds run on from it
    (gymnasium's convention: env i gets seed + i), else one seed per env (or None) as a list."""
    if seeds is None or (seeds == NO_SEED).all():
        return None
    if (seeds != NO_SEED).all() and (np.diff(seeds) == 1).all():
        return int(seeds[0])
    return [None if s == NO_SEED else int(s) for s in seeds.tolist()]


def _per_env(info: Any, n: int) -> list[tuple[int, dict]]:
    """A gymnasium vector info (a dict of arrays, each with its ``_key`` mask) as one dict per env."""
    if not isinstance(info, dict) or not info:
        return []
    out: dict[int, dict] = {}
    for key, values in info.items():
        if key.startswith("_") or key in NOT_STATISTICS:  # e.g. ALE's env_id, the index in its batch
            continue
        mask = info.get(f"_{key}")
        if isinstance(values, dict):
            continue  # a nested vector info (e.g. final_info): the episode's end reports its own
        values = np.asarray(values)
        if values.shape[:1] != (n,):
            continue
        for i in range(n) if mask is None else np.flatnonzero(mask).tolist():
            out.setdefault(i, {})[key] = values[i]
    return sorted(out.items())
