"""The observation encoder: flat observation rows → one feature vector per row.

The encoder views each leaf of the original observation space through
``puffer_core.env.torch_helpers.unflatten`` (no copy) and reads it by what it is:

* **Discrete** and small **MultiDiscrete** leaves: one-hots.
* **Pictures** (3-D uint8, both sides ≥ 32): Nature DQN's CNN.
* **Categories**: an integer Box whose bounds are the same everywhere and span at most
  ``MAX_CATEGORIES`` values (NetHack's glyph ids, colours, a board's piece codes) holds ids,
  not quantities: each id gets a learned embedding (``nn.Embedding``). A 2-D grid of them
  (a map, a crop of it) then goes through a small CNN that halves the grid until at most
  ``GRID_CELLS`` cells are left; other shapes are flattened. Bytes over their whole range
  (0–255: pixels, text) stay numbers.
* **Other integers** (counters, scores, NetHack's bottom-line stats): ``symlog``, since they
  span many orders of magnitude.
* **Floats** and **MultiBinary** as they are.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from puffer_core.env.torch_helpers import unflatten
from puffer_core.errors import SpaceError

__all__ = ["EMBEDDING_SIZE", "GRID_CELLS", "MAX_CATEGORIES", "MAX_ONE_HOT", "Encoder", "categories", "layer"]

#: MultiDiscrete leaves with more categories than this in all are read as numbers instead of one-hots.
MAX_ONE_HOT = 4096
#: Integer leaves with at most this many values are categories (NetHack's ~6k glyph ids are).
MAX_CATEGORIES = 65_536
#: Features per category id, and channels of the grid CNN: small, so it runs on a CPU.
EMBEDDING_SIZE = 16
#: The grid CNN halves its grid (stride 2) until at most this many cells are left.
GRID_CELLS = 32


def layer(module: nn.Module, std: float = math.sqrt(2), bias: float = 0.0) -> nn.Module:
    """CleanRL's initialisation: orthogonal weights, constant bias."""
    nn.init.orthogonal_(module.weight, std)
    nn.init.constant_(module.bias, bias)
    return module


def _symlog(x: torch.Tensor) -> torch.Tensor:
    return torch.sign(x) * torch.log1p(torch.abs(x))


def _space_at(space: spaces.Space, path: tuple) -> spaces.Space:
    for key in path:
        space = space[key]
    return space


def _is_image(space: spaces.Space) -> bool:
    return (
        isinstance(space, spaces.Box)
        and len(space.shape) == 3
        and space.dtype == np.uint8
        and sorted(space.shape)[1] >= 32  # the two larger dims are the picture's sides
    )


def categories(space: spaces.Space) -> tuple[int, int] | None:
    """(lowest id, number of ids) when ``space`` is an integer Box of categories, else None."""
    if not isinstance(space, spaces.Box) or not np.issubdtype(space.dtype, np.integer) or space.low.size == 0:
        return None
    low, high = int(space.low.min()), int(space.high.max())
    if low != int(space.low.max()) or high != int(space.high.min()):
        return None  # bounds that differ per element: separate quantities, not one vocabulary
    if space.dtype == np.uint8 and (low, high) == (0, 255):
        return None  # bytes over their whole range: pixels and text, read as numbers
    count = high - low + 1
    return (low, count) if 2 <= count <= MAX_CATEGORIES else None


def _grid_cnn(rows: int, columns: int) -> tuple[nn.Module, int]:
    """Convolutions over an embedded grid and their output size: at least two 3×3 layers, each
    halving the grid while it has more than ``GRID_CELLS`` cells."""
    convs: list[nn.Module] = []
    while len(convs) < 4 or rows * columns > GRID_CELLS:  # two modules (conv, ReLU) per layer
        stride = 2 if rows * columns > GRID_CELLS else 1
        convs += [layer(nn.Conv2d(EMBEDDING_SIZE, EMBEDDING_SIZE, 3, stride=stride, padding=1)), nn.ReLU()]
        if stride == 2:  # a 3x3 kernel, padding 1: ceil(n / 2) cells each way
            rows, columns = (rows + 1) // 2, (columns + 1) // 2
    return nn.Sequential(*convs, nn.Flatten()), EMBEDDING_SIZE * rows * columns


class _Leaf(nn.Module):
    """Features of one observation leaf."""

    def __init__(self, path: tuple, space: spaces.Space):
        super().__init__()
        self.path = path
        self.shape = tuple(space.shape)
        self.kind, self.size = "float", int(np.prod(space.shape, dtype=np.int64))
        ids = categories(space)
        if isinstance(space, spaces.Discrete):
            self.kind, self.n, self.start, self.size = "discrete", int(space.n), int(space.start), int(space.n)
        elif isinstance(space, spaces.MultiDiscrete) and int(space.nvec.sum()) <= MAX_ONE_HOT:
            nvec = space.nvec.reshape(-1).astype(np.int64)
            self.kind, self.size = "multidiscrete", int(nvec.sum())
            self.register_buffer("offsets", torch.as_tensor(np.concatenate([[0], np.cumsum(nvec)[:-1]])))
            self.register_buffer("starts", torch.as_tensor(space.start.reshape(-1).astype(np.int64)))
        elif _is_image(space):
            self._picture(space)
        elif ids is not None:
            self.kind, (self.low, self.n) = "categories", ids
            self.embedding = nn.Embedding(self.n, EMBEDDING_SIZE)
            self.grid = len(self.shape) == 2 and min(self.shape) >= 3
            if self.grid:
                self.cnn, self.size = _grid_cnn(*self.shape)
            else:
                self.size = EMBEDDING_SIZE * self.size
        elif isinstance(space, spaces.MultiDiscrete) or (
            isinstance(space, spaces.Box) and np.issubdtype(space.dtype, np.integer)
        ):
            self.kind = "integer"
        elif not isinstance(space, (spaces.Box, spaces.MultiBinary)):
            raise SpaceError(f"the trainer cannot read observation leaf {path} of space {space}")

    def _picture(self, space: spaces.Box) -> None:
        self.kind = "image"
        self.channels_last = space.shape[-1] < space.shape[0]
        channels = space.shape[-1] if self.channels_last else space.shape[0]
        self.cnn = nn.Sequential(
            layer(nn.Conv2d(channels, 32, 8, stride=4)),
            nn.ReLU(),
            layer(nn.Conv2d(32, 64, 4, stride=2)),
            nn.ReLU(),
            layer(nn.Conv2d(64, 64, 3, stride=1)),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            sample = torch.zeros(1, channels, *self._picture_shape(space.shape))
            self.size = int(self.cnn(sample).shape[1])

    def _picture_shape(self, shape: tuple) -> tuple:
        return shape[:2] if self.channels_last else shape[1:]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch = x.shape[0]
        if self.kind == "discrete":
            index = (x.reshape(batch).long() - self.start).clamp(0, self.n - 1)
            return nn.functional.one_hot(index, self.n).float()
        if self.kind == "multidiscrete":
            index = (x.reshape(batch, -1).long() - self.starts).clamp(min=0) + self.offsets
            out = torch.zeros(batch, self.size, device=x.device)
            return out.scatter_(1, index.clamp(max=self.size - 1), 1.0)
        if self.kind == "image":
            pictures = x.reshape(batch, *self.shape)  # a bare image arrives as flat rows
            pictures = pictures.permute(0, 3, 1, 2) if self.channels_last else pictures
            return self.cnn(pictures.float() / 255.0)
        if self.kind == "categories":
            ids = (x.reshape(batch, *self.shape).long() - self.low).clamp(0, self.n - 1)
            embedded = self.embedding(ids)
            if self.grid:  # (batch, rows, columns, features) → channels first for the CNN
                return self.cnn(embedded.permute(0, 3, 1, 2))
            return embedded.reshape(batch, -1)
        if self.kind == "integer":
            return _symlog(x.reshape(batch, -1).float())
        return x.reshape(batch, -1).float()


class Encoder(nn.Module):
    """Flat observation rows → one feature vector per row (see the module docstring).

    Args:
        layout: The emulator's observation layout (``env.obs_layout``): the original space
            and where each leaf lies in the flat row.
    """

    def __init__(self, layout: Any):
        super().__init__()
        self.obs_dtype = layout.dtype
        self.leaves = nn.ModuleList(_Leaf(path, _space_at(layout.original_space, path)) for path, _ in layout.leaves)
        self.single = layout.single_leaf
        self.size = sum(leaf.size for leaf in self.leaves)
        self.has_image = any(leaf.kind == "image" for leaf in self.leaves)

    def forward(self, flat: torch.Tensor) -> torch.Tensor:
        if self.single:
            return self.leaves[0](flat)
        tree = unflatten(flat, self.obs_dtype)
        parts = []
        for leaf in self.leaves:
            value = tree
            for key in leaf.path:
                value = value[key]
            parts.append(leaf(value))
        return torch.cat(parts, dim=1)
