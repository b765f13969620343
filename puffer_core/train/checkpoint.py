"""``DIR/policy.pt``: everything a run needs to be evaluated or resumed, written atomically,
read as data.

A checkpoint holds the env it was trained on (id and kwargs), the settings, the policy's
and the optimizer's weights, the step count, the curve so far and the flat spaces it was
built for, so that ``--resume`` on another env, or an env whose spaces changed, is refused
with a message instead of failing deep inside torch.

A checkpoint is data, not code: it is read with ``torch.load(weights_only=True)``, which
unpickles only tensors and plain values, so a file whose pickle would call a function (a
downloaded ``policy.pt`` that runs a command on load) is refused with one line naming what
it held. Before that, its zip is checked (:mod:`puffer_core.train.archive`: stored entries,
a bounded pickle), and torch maps the tensors' bytes from the file rather than reading them
(``mmap=True``). What it holds is then checked field by field
(:mod:`puffer_core.train.saved_data`: plain trees of bounded size, tensors only as weights,
their bytes no more than the policy's declared shapes account for), its settings by
``PPOConfig.validate``, before anything is built from it or printed.
"""

from __future__ import annotations

import os
import pickle
import re
import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from puffer_core.atomic import remove_stale_temporaries, replace_durably, temporary_beside
from puffer_core.errors import APIUsageError
from puffer_core.train.archive import MAX_ENTRIES, Archive, check_archive
from puffer_core.train.config import PPOConfig
from puffer_core.train.curve import MAX_STATE_VALUES, Curve
from puffer_core.train.saved_data import Shape, check_plain, short

__all__ = ["FILENAME", "FORMAT", "Checkpoint", "UnsafeCheckpointError", "load", "save"]

#: The layout written now; bump the number when the layout changes, and teach ``_upgrade``
#: to read the one before (or to say what to do instead). 2: the curve's bounded summary
#: (:mod:`puffer_core.train.curve`), where 1 kept every update and every episode.
FORMAT = "puffer-train/2"
#: The layout before the curve was bounded: read, its curve summarised.
LEGACY_CURVE_FORMAT = "puffer-train/1"
FILENAME = "policy.pt"
_FORMAT_PREFIX = "puffer-train/"


class UnsafeCheckpointError(APIUsageError):
    """A checkpoint's pickle holds something other than tensors and plain data (code)."""


@dataclass
class Checkpoint:
    env: str  # the env id (or a creator's qualified name: such runs resume only from Python)
    env_kwargs: dict[str, Any]
    config: dict[str, Any]
    policy: dict[str, Any]  # state dict
    optimizer: dict[str, Any] | None
    step: int
    seconds: float
    curve: dict[str, Any]
    spaces: dict[str, str]  # repr of the flat observation and action spaces
    extra: dict[str, Any] = field(default_factory=dict)

    def settings(self, source: str = "the checkpoint") -> PPOConfig:
        """The run's PPO settings, validated (unknown keys refused)."""
        return PPOConfig.from_saved(self.config, source)


def save(directory: str | Path, checkpoint: Checkpoint, name: str = FILENAME) -> Path:
    """Write ``DIR/policy.pt`` (or ``DIR/NAME``: ``best.pt``) through a uniquely named temporary file in ``DIR``,
    flushed, fsynced and renamed: a crash mid-save leaves the previous checkpoint in place."""
    path = Path(directory) / name
    remove_stale_temporaries(path)
    with temporary_beside(path) as tmp:
        with open(tmp, "wb") as f:
            torch.save({"format": FORMAT, **checkpoint.__dict__}, f)
            f.flush()
            os.fsync(f.fileno())
        replace_durably(tmp, path)
    return path


def load(directory: str | Path) -> Checkpoint:
    """The checkpoint in ``directory`` (or the file itself), read as data.

    Raises:
        UnsafeCheckpointError: the file's pickle would run code (names what it held).
        APIUsageError: no such file, not a checkpoint, a layout this version cannot read, or
            fields and settings that do not check out.
    """
    path = Path(directory)
    if path.is_dir():
        path = path / FILENAME
    if not path.exists():
        raise APIUsageError(f"{path} does not exist: give the --out directory of a `puffer train` run")
    archive = check_archive(path)
    data = _read(path)
    if not isinstance(data, dict) or not isinstance(data.get("format"), str):
        found = type(data).__name__ if not isinstance(data, dict) else "no format"
        raise APIUsageError(f"{path} is not a puffer train checkpoint ({found}); give a policy.pt `puffer train` wrote")
    data = _upgrade(path, data, archive)
    checkpoint = _checked(path, data, archive)
    checkpoint.settings(str(path))
    return checkpoint


def _read(path: Path) -> Any:
    try:
        with warnings.catch_warnings():  # torch warns of pickle protocols; the outcome is what matters
            warnings.simplefilter("ignore")
            # mmap: the tensors' bytes stay in the file until used, so their sizes are checked
            # against the policy's shapes (_check_tensors) before any of them is in memory.
            return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except pickle.UnpicklingError as exc:
        held = re.search(r"GLOBAL ([\w.]+)", str(exc))
        what = f"a reference to {held.group(1)}" if held else "pickle instructions that are not plain data"
        raise UnsafeCheckpointError(
            f"{path} holds {what}, which would run code on load: refused (a checkpoint holds only tensors and plain "
            "data; do not load this file)"
        ) from None
    except Exception as exc:
        raise APIUsageError(f"{path} is not a readable checkpoint ({type(exc).__name__}: {exc})") from None


def _upgrade(path: Path, data: dict[str, Any], archive: Archive) -> dict[str, Any]:
    """``data`` in today's layout, from any layout this version can read."""
    written = data.pop("format")
    if written == FORMAT:
        return data
    if written == LEGACY_CURVE_FORMAT:
        if "curve" in data:  # else the missing field is named with the others
            data["curve"] = _summarised_curve(path, data["curve"], archive)
        return data
    if not written.startswith(_FORMAT_PREFIX):
        raise APIUsageError(f"{path} is not a puffer train checkpoint (format {short(written)}, expected {FORMAT!r})")
    version, current = written[len(_FORMAT_PREFIX) :], FORMAT[len(_FORMAT_PREFIX) :]
    if version.isdigit() and int(version) > int(current):
        raise APIUsageError(
            f"{path} was written by a newer puffer-core (format {short(written)}; this one reads {FORMAT!r}): "
            "upgrade puffer-core to use it"
        )
    raise APIUsageError(
        f"{path} has an old layout ({short(written)}) this puffer-core cannot read: retrain, or evaluate it with the "
        "puffer-core version that wrote it"
    )


def _summarised_curve(path: Path, curve: Any, archive: Archive) -> dict[str, Any]:
    """A format-1 curve (every row and episode; as large as its pickle allows), checked as plain
    data that size, in today's bounded form."""
    if not isinstance(curve, dict):
        raise APIUsageError(f"{path}: field 'curve' is a {type(curve).__name__}, not a checkpoint's")
    # A tree's every value costs at least a byte of pickle: more values than that means shared ones.
    check_plain(curve, f"{path}: curve", Shape(max_nodes=archive.pickle_bytes + 1024, max_depth=3, max_text=256))
    try:
        return Curve.from_legacy(curve).to_state()
    except APIUsageError as exc:
        raise APIUsageError(f"{path}: {exc}") from None


#: What each field of a checkpoint must be (after weights_only loading, only plain types remain).
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "env": (str,),
    "env_kwargs": (dict,),
    "config": (dict,),
    "policy": (dict,),
    "optimizer": (dict, type(None)),
    "step": (int,),
    "seconds": (int, float),
    "curve": (dict,),
    "spaces": (dict,),
    "extra": (dict,),
}


#: How large each field's data may be (the optimizer's depends on the policy).
_SHAPES: dict[str, Shape] = {
    "env_kwargs": Shape(max_nodes=10_000, max_depth=8),
    "config": Shape(max_nodes=256, max_depth=1, max_text=256),
    "spaces": Shape(max_nodes=16, max_depth=1, max_text=65_536),
    "curve": Shape(max_nodes=MAX_STATE_VALUES, max_depth=4, max_text=256),  # bounded, however long the run
    "extra": Shape(max_nodes=1_000, max_depth=8),  # nothing writes it: small, plain
    "policy": Shape(max_nodes=MAX_ENTRIES, max_depth=1, max_text=1024, leaves=(torch.Tensor,)),
}
#: A creator's name stands where an env id would (a run trained on a creator): printable, short.
MAX_ENV_NAME = 256
#: Env kwarg names: what a creator's keyword arguments can be called.
MAX_KWARG_NAME = 64


def _checked(path: Path, data: dict[str, Any], archive: Archive) -> Checkpoint:
    names = [f.name for f in fields(Checkpoint)]
    unknown = sorted(short(key) for key in data if key not in names)
    missing = [name for name in names if name not in data and name != "extra"]
    if unknown or missing:
        problem = f"unknown fields [{', '.join(unknown[:5])}]" if unknown else f"missing fields {missing}"
        raise APIUsageError(f"{path} is not a checkpoint this puffer-core wrote ({problem}); retrain with this version")
    for name, types in _FIELD_TYPES.items():
        if name in data and (isinstance(data[name], bool) or not isinstance(data[name], types)):
            raise APIUsageError(f"{path}: field {name!r} is a {type(data[name]).__name__}, not a checkpoint's")
    env = data["env"]
    if len(env) > MAX_ENV_NAME or not env.isprintable():
        raise APIUsageError(f"{path}: its env {short(env)} is not an env id or a creator's name: refused")
    _check_fields(path, data)
    try:
        Curve.from_state(data["curve"])  # the curve.csv and --resume will use: checked now, named
    except APIUsageError as exc:
        raise APIUsageError(f"{path}: {exc}") from None
    bad_keys = [
        key
        for key in data["env_kwargs"]
        if not (isinstance(key, str) and key.isidentifier() and len(key) <= MAX_KWARG_NAME)
    ]
    if bad_keys:
        raise APIUsageError(f"{path}: env kwarg names must be Python identifiers, got {short(bad_keys[0])}")
    tensors = [key for key, value in data["policy"].items() if not isinstance(value, torch.Tensor)]
    if tensors:
        raise APIUsageError(f"{path}: the policy's {short(tensors[0])} is not a tensor")
    _check_tensors(path, data, archive)
    return Checkpoint(**data)


def _check_fields(path: Path, data: dict[str, Any]) -> None:
    """Each field a plain tree of its own bounded shape (tensors only in the policy and optimizer)."""
    shapes = dict(_SHAPES)
    weights = len(data["policy"]) if isinstance(data["policy"], dict) else 0
    shapes["optimizer"] = Shape(max_nodes=64 * (weights + 16), max_depth=4, max_text=256, leaves=(torch.Tensor,))
    for name, shape in shapes.items():
        if name in data:
            check_plain(data[name], f"{path}: {name}", shape)


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in ``value``, a plain tree (checked: bounded, no shared parts)."""
    if isinstance(value, torch.Tensor):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return [tensor for item in items for tensor in _tensors(item)]


def _check_tensors(path: Path, data: dict[str, Any], archive: Archive) -> None:
    """The optimizer's tensors mirror the policy's, and the file holds no more tensor bytes than
    those account for: a policy, Adam's two moments of it and a step count per tensor."""
    policy = list(data["policy"].values())
    shapes = {tuple(tensor.shape) for tensor in policy}
    for tensor in _tensors(data["optimizer"]):
        if tensor.dim() and tuple(tensor.shape) not in shapes:
            raise APIUsageError(
                f"{path}: the optimizer holds a tensor of shape {short(tuple(tensor.shape))}, which no weight of the "
                "policy has: refused"
            )
    declared = sum(tensor.numel() * tensor.element_size() for tensor in policy)
    allowed = 3 * declared + 4096 * (len(policy) + 1)
    if archive.tensor_bytes > allowed:
        raise APIUsageError(
            f"{path} holds {archive.tensor_bytes:,} bytes of tensors where its policy's weights account for at most "
            f"{allowed:,} (the weights and the optimizer's state): refused"
        )
