"""Action spaces over DeepMind Lab's 7 integer action components.

Everything here is keyed by the component *names* of ``Lab.action_spec()`` and turned
into a 1-D ``np.intc`` array in the order ``action_spec()`` gives at runtime, so a
component can never land in another's slot (shimmy's ``DmLabCompatibilityV0`` sorts
the names alphabetically and sends MOVE_BACK_FORWARD where JUMP belongs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["ACTION_NAMES", "IMPALA_ACTION_SET", "ActionMap", "DiscreteActions", "FullActions", "make_action_map"]

LOOK_LR = "LOOK_LEFT_RIGHT_PIXELS_PER_FRAME"
LOOK_DU = "LOOK_DOWN_UP_PIXELS_PER_FRAME"
STRAFE = "STRAFE_LEFT_RIGHT"
MOVE = "MOVE_BACK_FORWARD"
FIRE = "FIRE"
JUMP = "JUMP"
CROUCH = "CROUCH"

#: The components as DeepMind Lab documents them, in its ``action_spec()`` order.
ACTION_NAMES = (LOOK_LR, LOOK_DU, STRAFE, MOVE, FIRE, JUMP, CROUCH)

#: The 9 discrete actions of IMPALA (Espeholt et al., 2018), also used by SEED RL and most
#: DMLab-30 work since: a look step of 20 pixels per frame.
IMPALA_ACTION_SET: dict[str, dict[str, int]] = {
    "forward": {MOVE: 1},
    "backward": {MOVE: -1},
    "strafe_left": {STRAFE: -1},
    "strafe_right": {STRAFE: 1},
    "look_left": {LOOK_LR: -20},
    "look_right": {LOOK_LR: 20},
    "forward_look_left": {LOOK_LR: -20, MOVE: 1},
    "forward_look_right": {LOOK_LR: 20, MOVE: 1},
    "fire": {FIRE: 1},
}


def _spec_index(action_spec: Sequence[Mapping[str, Any]]) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
    names = [str(entry["name"]) for entry in action_spec]
    low = np.array([int(entry["min"]) for entry in action_spec], dtype=np.int64)
    high = np.array([int(entry["max"]) for entry in action_spec], dtype=np.int64)
    return {name: i for i, name in enumerate(names)}, low, high


class ActionMap:
    """Maps an agent's action to the ``np.intc`` array ``Lab.step`` takes."""

    space: spaces.Space
    #: One name per value of a Discrete space (None for the full space).
    labels: tuple[str, ...] | None = None

    def to_lab(self, action: Any) -> np.ndarray:
        raise NotImplementedError


class DiscreteActions(ActionMap):
    """A fixed set of named component combinations as ``Discrete(len(set))``."""

    def __init__(self, action_set: Mapping[str, Mapping[str, int]], action_spec: Sequence[Mapping[str, Any]]):
        index, low, high = _spec_index(action_spec)
        if not action_set:
            raise ValueError("the action set is empty; give at least one action")
        table = np.zeros((len(action_set), len(index)), dtype=np.intc)
        for row, (label, components) in enumerate(action_set.items()):
            for name, value in components.items():
                if name not in index:
                    raise ValueError(
                        f"action {label!r} sets {name!r}, which this Lab's action_spec() does not have "
                        f"(it has {', '.join(index)})"
                    )
                i = index[name]
                if not low[i] <= int(value) <= high[i]:
                    raise ValueError(f"action {label!r} sets {name}={value}, outside [{low[i]}, {high[i]}]")
                table[row, i] = int(value)
        table.setflags(write=False)
        self.table = table
        self.labels = tuple(action_set)
        self.space = spaces.Discrete(len(table))

    def to_lab(self, action: Any) -> np.ndarray:
        index = int(action)
        if not 0 <= index < len(self.table):
            raise ValueError(f"action {action!r} is not in Discrete({len(self.table)})")
        return self.table[index]


class FullActions(ActionMap):
    """All 7 components as ``MultiDiscrete(max - min + 1)``: component ``i`` sends ``a[i] + min[i]``."""

    def __init__(self, action_spec: Sequence[Mapping[str, Any]]):
        _index, low, high = _spec_index(action_spec)
        self.low = low.astype(np.intc)
        self.space = spaces.MultiDiscrete(high - low + 1)

    def to_lab(self, action: Any) -> np.ndarray:
        values = np.asarray(action)
        if values.shape != self.low.shape:
            raise ValueError(f"action must have shape {self.low.shape}, got {values.shape}")
        if np.any(values < 0) or np.any(values >= self.space.nvec):
            raise ValueError(f"action {values.tolist()} is outside {self.space}")
        return (values + self.low).astype(np.intc)


def _as_named_set(action_set: Any) -> dict[str, dict[str, int]]:
    """A custom set given as {label: {component: value}} or as a list of 7-value rows."""
    if isinstance(action_set, Mapping):
        return {str(label): dict(components) for label, components in action_set.items()}
    named = {}
    for row, values in enumerate(action_set):
        values = list(values)
        if len(values) != len(ACTION_NAMES):
            raise ValueError(f"action_set row {row} has {len(values)} values; give {len(ACTION_NAMES)}")
        named[f"action_{row}"] = {name: int(v) for name, v in zip(ACTION_NAMES, values) if v}
    return named


def make_action_map(action_set: Any, action_spec: Sequence[Mapping[str, Any]]) -> ActionMap:
    """``"impala"`` (default, Discrete(9)), ``"full"`` (MultiDiscrete over all 7), or a custom set.

    A custom set is ``{label: {component_name: value}}`` or a list of 7-value rows in
    DeepMind Lab's documented component order (``ACTION_NAMES``).
    """
    if isinstance(action_set, str):
        if action_set == "impala":
            return DiscreteActions(IMPALA_ACTION_SET, action_spec)
        if action_set == "full":
            return FullActions(action_spec)
        raise ValueError(f"action_set {action_set!r} is not one of 'impala', 'full' or a custom set")
    return DiscreteActions(_as_named_set(action_set), action_spec)
