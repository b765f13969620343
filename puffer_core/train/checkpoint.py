"""``DIR/policy.pt``: everything a run needs to be evaluated or resumed, written atomically.

A checkpoint holds the env it was trained on (id and kwargs), the settings, the policy's
and the optimizer's weights, the step count, the curve so far and the flat spaces it was
built for, so that ``--resume`` on another env, or an env whose spaces changed, is refused
with a message instead of failing deep inside torch.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from puffer_core.errors import APIUsageError
from puffer_core.train.curve import write_atomically

__all__ = ["FORMAT", "Checkpoint", "load", "save"]

FORMAT = "puffer-train/1"
FILENAME = "policy.pt"


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


def save(directory: Path, checkpoint: Checkpoint) -> Path:
    buffer = io.BytesIO()
    torch.save({"format": FORMAT, **checkpoint.__dict__}, buffer)
    path = Path(directory) / FILENAME
    write_atomically(path, buffer.getvalue())
    return path


def load(directory: str | Path) -> Checkpoint:
    """The checkpoint in ``directory`` (or the file itself); APIUsageError saying what is wrong."""
    path = Path(directory)
    if path.is_dir():
        path = path / FILENAME
    if not path.exists():
        raise APIUsageError(f"{path} does not exist: give the --out directory of a `puffer train` run")
    try:
        data = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise APIUsageError(f"{path} is not a readable checkpoint ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise APIUsageError(f"{path} is not a puffer train checkpoint (format {found!r}, expected {FORMAT!r})")
    data.pop("format")
    return Checkpoint(**data)
