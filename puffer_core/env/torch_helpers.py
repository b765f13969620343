"""Unflatten a batch of flat observations held in a torch tensor, on its device, without a copy.

Needs the ``torch`` extra (``pip install puffer-core[torch]``); torch is imported here
only, so ``import puffer_core`` never pays for it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from puffer_core.env.flatten import tree_from_dtype
from puffer_core.errors import APIUsageError, MissingDependencyError, SpaceError

__all__ = ["torch_dtype", "unflatten"]

try:
    import torch
except ImportError as e:  # pragma: no cover - exercised only where torch is absent
    raise MissingDependencyError(
        "puffer_core.env.torch_helpers needs torch; install it with `pip install puffer-core[torch]` "
        "(or `pip install torch`)"
    ) from e

_TORCH_DTYPES = {
    np.dtype(np.bool_): torch.bool,
    np.dtype(np.int8): torch.int8,
    np.dtype(np.int16): torch.int16,
    np.dtype(np.int32): torch.int32,
    np.dtype(np.int64): torch.int64,
    np.dtype(np.uint8): torch.uint8,
    np.dtype(np.uint16): torch.uint16,
    np.dtype(np.uint32): torch.uint32,
    np.dtype(np.uint64): torch.uint64,
    np.dtype(np.float16): torch.float16,
    np.dtype(np.float32): torch.float32,
    np.dtype(np.float64): torch.float64,
}


def torch_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype of a numpy leaf dtype (native byte order only)."""
    dtype = np.dtype(dtype)
    try:
        return _TORCH_DTYPES[dtype]
    except KeyError:
        raise SpaceError(
            f"numpy dtype {dtype} has no torch equivalent (torch has no big-endian or object dtypes); "
            "give the env a native-endian numeric observation space"
        ) from None


def _structured_dtype(layout: Any) -> np.dtype:
    dtype = getattr(layout, "obs_dtype", layout)
    try:
        return np.dtype(dtype)
    except TypeError:
        raise APIUsageError(
            f"unflatten needs an emulator (with .obs_dtype) or the numpy dtype of one observation, got {layout!r}"
        ) from None


def unflatten(tensor: torch.Tensor, layout: Any) -> Any:
    """Nested dict/tuple of tensors viewing ``tensor`` (shape ``(..., N)``; uint8 bytes or the
    emulator's uniform dtype). Leading dims are kept; nothing is copied, on any device.

    ``layout`` is an emulator (``GymnasiumEmulator``/``PettingZooEmulator``) or its ``obs_dtype``.
    """
    dtype = _structured_dtype(layout)
    if tensor.ndim == 0:
        raise SpaceError("unflatten needs a tensor of shape (..., N), got a 0-d tensor")
    if tensor.stride(-1) != 1:
        raise SpaceError(
            f"unflatten needs the last dim contiguous (stride 1), got strides {tensor.stride()}; "
            "index rows, not columns, or call .contiguous() first (which copies)"
        )
    nbytes = tensor.shape[-1] * tensor.element_size()
    if nbytes != dtype.itemsize:
        raise SpaceError(
            f"each flat observation holds {dtype.itemsize} bytes, but the tensor's last dim is "
            f"{tensor.shape[-1]} x {tensor.dtype} = {nbytes} bytes"
        )
    raw = tensor if tensor.dtype == torch.uint8 else tensor.view(torch.uint8)
    return _build(tree_from_dtype(dtype), raw, tuple(raw.shape[:-1]))


def _build(node: tuple, raw: torch.Tensor, lead: tuple) -> Any:
    kind = node[0]
    if kind == "leaf":
        _, offset, base, shape = node
        size = base.itemsize * math.prod(shape)
        # Offsets are aligned to each leaf's itemsize (see _flatten), as view(dtype) requires.
        return raw[..., offset : offset + size].view(torch_dtype(base)).view(lead + shape)
    if kind == "dict":
        return {key: _build(child, raw, lead) for key, child in node[1]}
    return tuple(_build(child, raw, lead) for child in node[1])
