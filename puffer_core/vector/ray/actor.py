"""The body of one Ray actor: an ``EnvGroup`` over its share of the envs.

Every ``reset`` / ``step`` returns the actor's rows (observations, rewards, terminals,
truncations, masks) plus its non-empty infos; ``ready`` says which incarnation answers,
whether its envs were built, and where it runs (:func:`.placement.where_am_i`).

Ray restarts a dead actor by running ``__init__`` again (``max_restarts``), also on another
node when its node died. A restarted actor's envs are new and not reset: until the main
process resets them, ``step`` answers ``"fresh"`` instead of stepping, so a restart the
main process did not see (the node died between two calls) is noticed, never stepped past.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np

from puffer_core.vector.autoreset import NEXT_STEP, ResetPlan
from puffer_core.vector.base import allocate_arrays
from puffer_core.vector.calls import CallResult, EnvCall, sendable
from puffer_core.vector.env_group import EnvFault, EnvGroup
from puffer_core.vector.native_group import NativeGroup, make_group
from puffer_core.vector.ray.placement import where_am_i

__all__ = ["FIELDS", "EnvActor"]

FIELDS = ("observations", "rewards", "terminals", "truncations", "masks")


class EnvActor:
    """One Ray actor's envs (decorated with ``ray.remote`` at run time)."""

    def __init__(
        self,
        factory: Any,
        first_env: int,
        num_envs: int,
        agents_per_env: int,
        obs_space: Any,
        action_shape: tuple,
        action_dtype: Any,
        autoreset: str = NEXT_STEP,
    ):
        # Tells a restarted actor from the one it replaces: ray.kill is asynchronous, and
        # the old actor may still answer calls made right after it.
        self.incarnation = uuid.uuid4().hex
        self.fault: dict | None = None
        self.fresh = True  # not reset since it was built
        self.progress = np.full(1, -1, np.int32)
        self.node = where_am_i()
        arrays = allocate_arrays(num_envs * agents_per_env, obs_space, action_shape, action_dtype)
        self.arrays = arrays
        try:
            self.group: EnvGroup | NativeGroup | None = make_group(
                factory,
                num_envs,
                agents_per_env,
                arrays,
                first_env=first_env,
                progress=memoryview(self.progress),
                autoreset=autoreset,
            )
        except EnvFault as fault:
            self.group = None
            self.fault = fault.to_dict()

    def ready(self) -> tuple[str, dict | None, dict]:
        """This actor's incarnation, the fault that stopped its envs being built (if any), and
        the node it runs on."""
        return self.incarnation, self.fault, self.node

    def where(self) -> int:
        """The local index of the env being stepped, -1 between envs."""
        return int(self.progress[0])

    def _result(self, infos: list) -> tuple:
        arrays = self.arrays
        return ("ok", tuple(arrays[name] for name in FIELDS), infos)

    def reset(self, plan: ResetPlan) -> tuple:
        try:
            result = self._result(self.group.reset(plan))
        except EnvFault as fault:
            return ("error", fault.to_dict(), None)
        self.fresh = False
        return result

    def step(self, actions: np.ndarray) -> tuple:
        if self.fresh:  # restarted by Ray behind the main process's back: it must reset us first
            return ("fresh", self.incarnation, None)
        self.group.actions[...] = actions
        try:
            return self._result(self.group.step())
        except EnvFault as fault:
            return ("error", fault.to_dict(), None)

    def call(self, indices: list[int], request: EnvCall) -> list[CallResult]:
        return sendable(self.group.call(indices, request))

    def close(self) -> None:
        if self.group is not None:
            self.group.close()
            self.group = None
