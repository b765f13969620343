"""What a sweep searches: ``--param`` specs read and checked before any trial runs.

``NAME=LO:HI`` is a uniform range, ``NAME=LO:HI:log`` a log-uniform one (0 < LO), both of
whole numbers when the PPO setting is an integer (``num_envs=8:64``); ``NAME=A,B,…`` picks
among values (``anneal_lr=true,false``, ``policy=mlp,lstm``), each read as JSON when it is
JSON, else kept as text. Imports neither torch nor optuna: a bad spec fails at once.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from puffer_core.errors import APIUsageError
from puffer_core.specs.suggest import did_you_mean
from puffer_core.train.config import SETTING_ALIASES, PPOConfig

__all__ = ["Param", "check_params", "parse_param"]

#: Settings a sweep does not search: the sweep itself sets them.
NOT_SEARCHED = {"steps": "every trial trains the sweep's --steps"}


def _field_types() -> dict[str, str]:
    """PPO setting → its annotation as written (``"int"``, ``"float | None"``, ``"bool"``…)."""
    return {field.name: str(field.type) for field in dataclasses.fields(PPOConfig)}


def _kind(annotation: str) -> str:
    """``int``, ``float`` or ``choice`` (bools and strings take a list of values, not a range)."""
    names = {part.strip() for part in annotation.split("|")} - {"None"}
    if names == {"int"}:
        return "int"
    if names <= {"int", "float"}:
        return "float"
    return "choice"


@dataclass(frozen=True)
class Param:
    """One searched setting: a range (``low``, ``high``, ``log``) or ``choices``."""

    name: str
    kind: str  # "int", "float" or "choice"
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()

    def spec(self) -> str:
        """The ``--param`` text this parameter reads back from."""
        if self.kind == "choice":
            return f"{self.name}=" + ",".join(_text(choice) for choice in self.choices)
        return f"{self.name}={_text(self.low)}:{_text(self.high)}" + (":log" if self.log else "")

    def distribution(self) -> Any:
        """The optuna distribution of this parameter."""
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        if self.kind == "choice":
            return CategoricalDistribution(self.choices)
        if self.kind == "int":
            return IntDistribution(int(self.low), int(self.high), log=self.log)
        return FloatDistribution(float(self.low), float(self.high), log=self.log)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _number(raw: str, kind: str, spec: str) -> float | int:
    try:
        number = float(raw)
    except ValueError:
        raise APIUsageError(f"--param {spec!r}: {raw!r} is not a number; give NAME=LO:HI[:log]") from None
    if not math.isfinite(number):
        raise APIUsageError(f"--param {spec!r}: the range needs finite ends, got {raw!r}")
    if kind == "int":
        if not number.is_integer():
            raise APIUsageError(f"--param {spec!r}: {spec.partition('=')[0]} is a whole number, got {raw!r}")
        return int(number)
    return number


def parse_param(spec: str) -> Param:
    """``spec`` (``NAME=LO:HI[:log]`` or ``NAME=A,B,…``) as a checked ``Param``.

    Raises:
        APIUsageError: a malformed spec, a setting PPO does not have (naming those it has), a
            range with low above high or a log range through 0, an end PPO would refuse.
    """
    name, sep, body = spec.partition("=")
    name = name.strip()
    if not sep or not name or not body:
        raise APIUsageError(f"--param {spec!r} is not NAME=LO:HI[:log] or NAME=A,B,…")
    types = _field_types()
    if name not in types:
        raise APIUsageError(
            f"--param {spec!r}: PPO has no setting {name!r}{did_you_mean(name, types, SETTING_ALIASES)}; "
            f"the settings are: {', '.join(types)}"
        )
    if name in NOT_SEARCHED:
        raise APIUsageError(f"--param {spec!r}: {name} is not searched ({NOT_SEARCHED[name]})")
    kind = _kind(types[name])
    if ":" in body:
        param = _range(name, kind, body, spec)
        ends: Iterable[Any] = (param.low, param.high)
    elif "," in body:
        choices = tuple(_value(raw.strip()) for raw in body.split(","))
        if len(set(map(json.dumps, choices))) != len(choices):
            raise APIUsageError(f"--param {spec!r} names a value twice")
        param = Param(name, "choice", choices=choices)
        ends = choices
    else:
        raise APIUsageError(
            f"--param {spec!r} is one value: give a range LO:HI[:log] or values A,B (a fixed value goes in --set)"
        )
    for value in ends:
        try:
            PPOConfig().replace(**{name: value}).validate()
        except APIUsageError as exc:
            raise APIUsageError(f"--param {spec!r}: {exc}") from None
    return param


def _range(name: str, kind: str, body: str, spec: str) -> Param:
    parts = body.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2].strip() != "log"):
        raise APIUsageError(f"--param {spec!r} is not NAME=LO:HI or NAME=LO:HI:log")
    if kind == "choice":
        raise APIUsageError(f"--param {spec!r}: {name} takes values, not a range; give them as {name}=A,B")
    low, high = (_number(raw.strip(), kind, spec) for raw in parts[:2])
    log = len(parts) == 3
    if low >= high:
        raise APIUsageError(
            f"--param {spec!r}: low {low} is not below high {high}; give LO < HI (a fixed value goes in --set)"
        )
    if log and low <= 0:
        raise APIUsageError(f"--param {spec!r}: a log range must lie above 0, and it starts at {low}")
    return Param(name, kind, low, high, log)


def check_params(specs: Sequence[str | Param], fixed: dict[str, Any]) -> list[Param]:
    """Every spec parsed; a setting searched twice, or also fixed by ``--set``, is refused."""
    if not specs:
        raise APIUsageError("a sweep needs at least one --param NAME=LO:HI[:log] to search")
    params = [spec if isinstance(spec, Param) else parse_param(spec) for spec in specs]
    seen: set[str] = set()
    for param in params:
        if param.name in seen:
            raise APIUsageError(f"--param {param.name} is given twice; give each setting one range")
        if param.name in fixed:
            raise APIUsageError(f"{param.name} is both searched (--param) and fixed (--set); drop one")
        seen.add(param.name)
    return params
