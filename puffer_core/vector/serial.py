"""Serial: every env in this process, one after another. The reference backend."""

from __future__ import annotations

from typing import Any

import numpy as np

from puffer_core.vector.autoreset import DISABLED
from puffer_core.vector.base import VectorEnv, allocate_arrays, format_infos
from puffer_core.vector.calls import CallResult, EnvCall
from puffer_core.vector.env_group import EnvFault
from puffer_core.vector.native_group import make_group
from puffer_core.vector.vector_settings import VectorSettings

__all__ = ["Serial"]


class Serial(VectorEnv):
    """``num_envs`` envs stepped in this process.

    With ``batch_size < num_envs`` the envs are stepped in fixed consecutive groups of
    ``batch_size`` envs, round robin: ``recv`` returns group g, ``send`` steps group g.
    ``autoreset`` is "next_step" (default), "same_step" or "disabled".
    """

    backend = "serial"

    def _open(self, settings: VectorSettings) -> None:
        first = self._take_settings(settings)
        factory, envs, batch = settings.factory, settings.num_envs, settings.batch_size
        self._envs_per_batch = batch
        self.arrays = allocate_arrays(
            self.num_envs, self.single_observation_space, self._action_shape, self._action_dtype
        )
        try:
            # A recording env 0 is built anew (with its render kwargs), native batches make their
            # own envs (one batch per group of batch_size); the probe is reused otherwise.
            prebuilt = [first] if factory.recording is None and not factory.native else []
            if not prebuilt:
                first.close()  # its layouts stay (unflatten_observation)
            self.group = make_group(
                factory,
                envs,
                self.agents_per_env,
                self.arrays,
                prebuilt=prebuilt,
                autoreset=self.autoreset_mode,
                unit_size=batch,
            )
        except EnvFault as fault:
            raise fault.to_worker_error(None, "Serial") from fault
        self.driver_env = first if factory.native else self.group.envs[0]
        self._num_groups = envs // batch
        self._group_views = self._views_of_groups()
        self._cursor = 0
        self._state = "new"  # new → (async_reset) → ready → (recv) → held → (send) → ready …
        self._pending_infos: list = []
        self._closed = False

    # ---------------------------------------------------------------- async API
    def async_reset(self, seed: Any = None, options: dict | None = None) -> None:
        self._check_open()
        plan = self._plan_reset(seed, options)
        try:
            infos = self.group.reset(plan)
        except EnvFault as fault:
            raise fault.to_worker_error(None, "Serial") from fault
        self._pending_infos = [[] for _ in range(self._num_groups)]
        for env_index, info in infos:
            self._pending_infos[env_index // self._envs_per_batch].append((env_index, info))
        self._cursor = 0
        self._state = "ready"

    def recv(self) -> tuple:
        self._check_recv(holding=self._state == "held")
        self._state = "held"
        g = self._cursor
        pending = self._pending_infos[g]
        infos = format_infos(pending, self.agents_per_env, self.possible_agents) if pending else []
        self._pending_infos[g] = []
        obs, rew, term, trunc, env_ids, masks = self._group_views[g]
        return obs, rew, term, trunc, infos, env_ids, masks

    def _views_of_groups(self) -> list[tuple]:
        """Each group's (observations, rewards, terminals, truncations, env ids, masks), made
        once at open: slicing six arrays on every ``recv`` costs more than a CartPole step."""
        rows, arrays = self.batch_size, self.arrays
        views = []
        for g in range(self._num_groups):
            lo, hi = g * rows, (g + 1) * rows
            fields = (arrays[name][lo:hi] for name in ("observations", "rewards", "terminals", "truncations"))
            views.append((*fields, np.arange(lo, hi), arrays["masks"][lo:hi]))
        return views

    def send(self, actions: Any) -> None:
        self._check_send(holding=self._state == "held")
        actions = self._check_actions(actions, self.batch_size)
        g = self._cursor
        rows = self.batch_size
        if self.autoreset_mode == DISABLED:  # disabled needs full batches: g is 0
            self._check_not_ended(self.arrays["terminals"], self.arrays["truncations"])
        self.arrays["actions"][g * rows : (g + 1) * rows] = actions
        try:
            infos = self.group.step(g * self._envs_per_batch, (g + 1) * self._envs_per_batch)
        except EnvFault as fault:
            raise fault.to_worker_error(None, "Serial") from fault
        self._pending_infos[g] = infos
        self._cursor = (g + 1) % self._num_groups
        self._state = "ready"

    def _call(self, indices: list[int], request: EnvCall) -> list[CallResult]:
        return self.group.call(indices, request)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        group = getattr(self, "group", None)
        if group is not None:
            group.close()
