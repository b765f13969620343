"""Space trees ⇄ flat arrays: the layouts behind ``puffer_core.env.emulation``.

Observations: every leaf keeps its own dtype and shape inside one C-style aligned numpy
structured dtype, so unflattening is a set of zero-copy views (and the byte offsets also
line up for ``torch.Tensor.view(dtype)``, which refuses misaligned slices).

Actions: leaves are concatenated into one 1-D vector, integer (MultiDiscrete) when every
leaf is discrete, floating (Box) as soon as one leaf is a Box.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces

from puffer_core.errors import SpaceError

__all__ = ["ActionLayout", "ObservationLayout", "leaf_paths", "observation_dtype", "tree_from_dtype"]

# Largest integer float32 holds exactly; integer leaves beyond it push actions to float64.
_FLOAT32_EXACT = 2**24
_SUPPORTED = "Box, Discrete, MultiDiscrete, MultiBinary, Dict and Tuple"


def _unsupported(space: Any, path: str) -> SpaceError:
    kind = f"{type(space).__module__}.{type(space).__qualname__}"
    if kind.startswith("gymnasium.spaces."):
        kind = "gymnasium.spaces." + type(space).__qualname__
    return SpaceError(
        f"{path}: {kind} cannot be flattened into a fixed-size buffer; only {_SUPPORTED} can. "
        "Wrap the env to turn this part into one of those (e.g. pad a Sequence or encode a Text as "
        "a Box of uint8 codes), or drop it from the space."
    )


def _key_path(path: str, key: Any) -> str:
    return f"{path}[{key!r}]"


# ----------------------------------------------------------------------------- observations


def _alignment(dtype: np.dtype) -> int:
    """C alignment of a dtype we built (numpy reports 1 for unaligned structured dtypes)."""
    if dtype.names is not None:
        return max((_alignment(dtype.fields[n][0]) for n in dtype.names), default=1)
    if dtype.subdtype is not None:
        return _alignment(dtype.subdtype[0])
    return max(dtype.alignment, 1)


def _struct(fields: list[tuple[str, np.dtype]], metadata: dict) -> np.dtype:
    offset, align, offsets = 0, 1, []
    for _, dt in fields:
        a = _alignment(dt)
        offset = -(-offset // a) * a
        offsets.append(offset)
        offset += dt.itemsize
        align = max(align, a)
    itemsize = -(-offset // align) * align  # pad so every row of a batch stays aligned
    spec = {
        "names": [name for name, _ in fields],
        "formats": [dt for _, dt in fields],
        "offsets": offsets,
        "itemsize": itemsize,
    }
    return np.dtype(spec, metadata=metadata)


def _leaf_dtype(base: Any, shape: tuple[int, ...]) -> np.dtype:
    base = np.dtype(base)
    return np.dtype((base, shape)) if shape else base


def observation_dtype(space: spaces.Space, path: str = "obs") -> np.dtype:
    """The structured dtype of one observation of ``space``; leaves keep their own dtype.

    Discrete and MultiDiscrete leaves are stored in the space's own ``dtype`` (int64 unless
    the space says otherwise), MultiBinary as int8, so an unflattened value has the dtype a
    ``space.sample()`` has. A bare leaf gives a plain (or subarray) dtype, a Dict/Tuple a
    structured one whose metadata records which it was and the Dict's original keys.
    """
    if isinstance(space, spaces.Box):
        return _leaf_dtype(space.dtype, space.shape)
    if isinstance(space, spaces.Discrete):
        return _leaf_dtype(space.dtype, ())
    if isinstance(space, spaces.MultiDiscrete):
        return _leaf_dtype(space.dtype, space.nvec.shape)
    if isinstance(space, spaces.MultiBinary):
        return _leaf_dtype(space.dtype, space.shape)
    if isinstance(space, spaces.Dict):
        fields, seen = [], {}
        for key, sub in space.spaces.items():
            name = key if isinstance(key, str) else repr(key)
            if name in seen:
                raise SpaceError(
                    f"{_key_path(path, key)}: key collides with {_key_path(path, seen[name])} once both are "
                    "turned into field names; give the Dict distinct string keys"
                )
            seen[name] = key
            fields.append((name, observation_dtype(sub, _key_path(path, key))))
        return _struct(fields, {"puffer": "dict", "keys": tuple(space.spaces)})
    if isinstance(space, spaces.Tuple):
        fields = [(str(i), observation_dtype(sub, f"{path}[{i}]")) for i, sub in enumerate(space.spaces)]
        return _struct(fields, {"puffer": "tuple"})
    raise _unsupported(space, path)


def tree_from_dtype(dtype: np.dtype, offset: int = 0) -> tuple:
    """Nested description of a dtype: ``("leaf", byte_offset, base_dtype, shape)``,
    ``("dict", ((key, node), ...))`` or ``("tuple", (node, ...))``.

    Structured dtypes without our metadata are read as dicts keyed by field name.
    """
    dtype = np.dtype(dtype)
    if dtype.names is not None:
        meta = dtype.metadata or {}
        children = [tree_from_dtype(dtype.fields[n][0], offset + dtype.fields[n][1]) for n in dtype.names]
        if meta.get("puffer") == "tuple":
            return ("tuple", tuple(children))
        keys = meta.get("keys", dtype.names)
        return ("dict", tuple(zip(keys, children)))
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        if base.names is not None or base.subdtype is not None:
            raise SpaceError(f"dtype {dtype}: arrays of structures cannot be unflattened; use a Tuple of leaves")
        return ("leaf", offset, base, tuple(shape))
    return ("leaf", offset, dtype, ())


def leaf_paths(tree: tuple, prefix: tuple = ()) -> list[tuple[tuple, tuple]]:
    """``[(key path, leaf node), ...]`` in buffer order."""
    kind = tree[0]
    if kind == "leaf":
        return [(prefix, tree)]
    items = tree[1] if kind == "dict" else enumerate(tree[1])
    return [pair for key, child in items for pair in leaf_paths(child, (*prefix, key))]


def _format_path(root: str, keys: tuple) -> str:
    return root + "".join(f"[{k!r}]" for k in keys)


def _leaf_bounds(space: spaces.Space) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(space, spaces.Box):
        return space.low.ravel(), space.high.ravel()
    if isinstance(space, spaces.Discrete):
        return np.array([space.start]), np.array([space.start + space.n - 1])
    if isinstance(space, spaces.MultiDiscrete):
        return space.start.ravel(), (space.start + space.nvec - 1).ravel()
    size = math.prod(space.shape)  # MultiBinary
    return np.zeros(size, space.dtype), np.ones(size, space.dtype)


def _space_leaves(space: spaces.Space) -> list[spaces.Space]:
    if isinstance(space, spaces.Dict):
        return [leaf for sub in space.spaces.values() for leaf in _space_leaves(sub)]
    if isinstance(space, spaces.Tuple):
        return [leaf for sub in space.spaces for leaf in _space_leaves(sub)]
    return [space]


class ObservationLayout:
    """How one observation of ``space`` sits in a flat buffer, and the zero-copy views into it.

    ``space`` is the flat 1-D Box the emulator exposes: of the leaves' dtype when all leaves
    share one (length = number of elements), else of uint8 bytes (length = ``dtype.itemsize``,
    alignment padding included).
    """

    def __init__(self, space: spaces.Space, root: str = "obs"):
        self.original_space = space
        self.root = root
        self.dtype = observation_dtype(space, root)
        self.tree = tree_from_dtype(self.dtype)
        self.leaves = leaf_paths(self.tree)
        self.nbytes = self.dtype.itemsize
        leaf_dtypes = {node[2] for _, node in self.leaves}
        if len(leaf_dtypes) == 1:
            (flat,) = leaf_dtypes
            low, high = zip(*(_leaf_bounds(s) for s in _space_leaves(space)))
            low = np.concatenate(low).astype(flat)
            high = np.concatenate(high).astype(flat)
        else:
            flat = np.dtype(np.uint8)
            low = np.zeros(self.nbytes, np.uint8)
            high = np.full(self.nbytes, 255, np.uint8)
        #: True when the leaves mix dtypes, so the flat buffer holds raw bytes, not numbers.
        self.mixed_dtypes = len(leaf_dtypes) > 1
        self.flat_dtype = flat
        self.size = self.nbytes // flat.itemsize
        self.space = spaces.Box(low=low, high=high, shape=(self.size,), dtype=flat)
        #: A bare Box/Discrete/...: the whole buffer is that one leaf.
        self.single_leaf = self.tree[0] == "leaf"

    def _as_bytes(self, x: Any) -> np.ndarray:
        x = np.asarray(x)
        if x.ndim == 0 or x.shape[-1] * x.dtype.itemsize != self.nbytes:
            raise SpaceError(
                f"{self.root}: expected flat observations of shape (..., {self.size}) and dtype {self.flat_dtype}, "
                f"got shape {x.shape} and dtype {x.dtype}"
            )
        if x.shape[-1] > 1 and x.strides[-1] != x.dtype.itemsize:
            # A copy here would silently break zero-copy views (and lose writes through them).
            raise SpaceError(
                f"{self.root}: flat observations need a contiguous last axis (stride {x.dtype.itemsize}), got "
                f"strides {x.strides}; index rows rather than columns, or pass np.ascontiguousarray(x) (a copy)"
            )
        return x if x.dtype == np.uint8 else x.view(np.uint8)

    def unflatten(self, x: Any) -> Any:
        """Nested dict/tuple of views into ``x`` (shape ``(..., size)``); leading dims kept."""
        xb = self._as_bytes(x)
        return _build_views(self.tree, xb, xb.shape[:-1])

    def views(self, row: np.ndarray) -> list[np.ndarray]:
        """One writable view per leaf (buffer order) into a single flat row."""
        xb = self._as_bytes(row)
        return [_leaf_view(node, xb, xb.shape[:-1]) for _, node in self.leaves]

    def nest(self, leaves: list[Any]) -> Any:
        """Arrange per-leaf values (buffer order, as ``views`` returns them) as the observation tree."""
        it = iter(leaves)

        def build(node: tuple) -> Any:
            if node[0] == "leaf":
                return next(it)
            if node[0] == "dict":
                return {key: build(child) for key, child in node[1]}
            return tuple(build(child) for child in node[1])

        return build(self.tree)

    def writer(
        self, row: np.ndarray, views: list[np.ndarray] | None = None, skip_identical: bool = False
    ) -> Callable[[Any], None]:
        """A function ``write(obs)`` that copies a nested observation into ``row`` in place.

        Everything is resolved here, once: a single leaf becomes one ``dst[...] = obs``, a
        tree becomes generated straight-line code ``d0[...] = obs[k0]; d1[...] = obs[k1][k2]``
        (no per-step loop, no key-path walking). ``views`` (from ``self.views(row)``) lets the
        caller share the destination arrays; with ``skip_identical`` a leaf whose value *is*
        its destination array (an env that writes into the buffer itself) is not copied.
        """
        views = self.views(row) if views is None else views
        if self.single_leaf and not skip_identical:
            (dst,) = views

            def write(obs: Any) -> None:
                dst[...] = obs

            return write
        namespace: dict[str, Any] = {}
        lines = ["def write(obs):"]
        for i, ((keys, _), dst) in enumerate(zip(self.leaves, views)):
            namespace[f"d{i}"] = dst
            access = "obs"
            for j, key in enumerate(keys):
                namespace[f"k{i}_{j}"] = key
                access += f"[k{i}_{j}]"
            if skip_identical:
                lines.append(f"    v = {access}")
                lines.append(f"    if v is not d{i}: d{i}[...] = v")
            else:
                lines.append(f"    d{i}[...] = {access}")
        if len(lines) == 1:
            lines.append("    pass")
        exec("\n".join(lines), namespace)  # source built above from our own names only
        return namespace["write"]

    def flatten(self, obs: Any, out: np.ndarray | None = None) -> np.ndarray:
        """Copy a nested observation (or a batch of them, leading dims on every leaf) into a flat array."""
        values = self._values(obs)
        if out is None:
            lead = ()
            if values:
                first = np.asarray(values[0])
                lead = first.shape[: first.ndim - len(self.leaves[0][1][3])]
            out = np.zeros((*lead, self.size), self.flat_dtype)
        xb = self._as_bytes(out)
        lead = xb.shape[:-1]
        for (keys, node), value in zip(self.leaves, values):
            dst = _leaf_view(node, xb, lead)
            try:
                dst[...] = value
            except (ValueError, TypeError) as e:
                raise SpaceError(
                    f"{_format_path(self.root, keys)}: value of shape {np.shape(value)} does not fit the space's "
                    f"leaf of shape {node[3]} and dtype {node[2]} (batch dims {lead}): {e}"
                ) from None
        return out

    def _values(self, obs: Any) -> list[Any]:
        """Leaf values in buffer order; a missing key or index is reported with its path."""
        values = []
        for keys, _ in self.leaves:
            value = obs
            for depth, key in enumerate(keys):
                try:
                    value = value[key]
                except (KeyError, IndexError, TypeError):
                    where = _format_path(self.root, keys[: depth + 1])
                    raise SpaceError(
                        f"{where}: missing from the observation (got {type(value).__name__}); "
                        "the env returned something that does not match its observation_space"
                    ) from None
            values.append(value)
        return values

    def diagnose(self, obs: Any) -> SpaceError:
        """Best explanation of why ``obs`` could not be written (used after a fast write failed)."""
        try:
            self.flatten(obs)
        except SpaceError as e:
            return e
        return SpaceError(f"{self.root}: observation does not match the observation_space")


def _leaf_view(node: tuple, xb: np.ndarray, lead: tuple) -> np.ndarray:
    _, offset, base, shape = node
    nbytes = base.itemsize * math.prod(shape)
    return xb[..., offset : offset + nbytes].view(base).reshape(lead + shape)


def _build_views(node: tuple, xb: np.ndarray, lead: tuple) -> Any:
    kind = node[0]
    if kind == "leaf":
        return _leaf_view(node, xb, lead)
    if kind == "dict":
        return {key: _build_views(child, xb, lead) for key, child in node[1]}
    return tuple(_build_views(child, xb, lead) for child in node[1])


# ----------------------------------------------------------------------------- actions


class _ActionLeaf:
    """One leaf of an action tree and its slice of the flat action vector."""

    __slots__ = ("dtype", "high", "keys", "kind", "low", "nvec", "offset", "scalar", "shape", "size", "start")

    def __init__(self, keys: tuple, space: spaces.Space, offset: int):
        self.keys = keys
        self.offset = offset
        self.dtype = np.dtype(space.dtype)
        self.low = self.high = None
        self.scalar = isinstance(space, spaces.Discrete)  # sampled as a numpy scalar, not a 0-d array
        if isinstance(space, spaces.Box):
            self.kind = "box"
            self.shape = tuple(space.shape)
            self.low, self.high = space.low, space.high
            self.start = 0
            self.nvec = None
        elif isinstance(space, spaces.Discrete):
            self.kind = "discrete"
            self.shape = ()
            self.start = np.int64(space.start)
            self.nvec = np.array([space.n], np.int64)
        elif isinstance(space, spaces.MultiDiscrete):
            self.kind = "discrete"
            self.shape = tuple(space.nvec.shape)
            self.start = space.start.astype(np.int64).ravel()
            self.nvec = space.nvec.astype(np.int64).ravel()
        else:  # MultiBinary
            self.kind = "discrete"
            self.shape = tuple(space.shape)
            self.start = np.int64(0)
            self.nvec = np.full(math.prod(self.shape), 2, np.int64)
        self.size = math.prod(self.shape)

    @property
    def slice(self) -> slice:
        return slice(self.offset, self.offset + self.size)

    def needs_float64(self) -> bool:
        if self.kind == "discrete":
            return bool(self.size) and int(self.nvec.max()) - 1 > _FLOAT32_EXACT
        if self.dtype == np.float64:
            return True
        if self.dtype.kind in "iu" and self.size:
            reach = max(np.abs(self.low.astype(np.float64)).max(), np.abs(self.high.astype(np.float64)).max())
            return bool(reach > _FLOAT32_EXACT)
        return False


def _action_skeleton(space: spaces.Space, path: str, keys: tuple, leaves: list) -> tuple:
    if isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)):
        offset = leaves[-1].offset + leaves[-1].size if leaves else 0
        leaves.append(_ActionLeaf(keys, space, offset))
        return ("leaf", len(leaves) - 1)
    if isinstance(space, spaces.Dict):
        children = tuple(
            (k, _action_skeleton(s, _key_path(path, k), (*keys, k), leaves)) for k, s in space.spaces.items()
        )
        return ("dict", children)
    if isinstance(space, spaces.Tuple):
        children = tuple(_action_skeleton(s, f"{path}[{i}]", (*keys, i), leaves) for i, s in enumerate(space.spaces))
        return ("tuple", children)
    raise _unsupported(space, path)


class ActionLayout:
    """The flat action space of a space tree, and the exact conversions both ways.

    Rules:
    - a bare Discrete becomes ``Discrete(n)`` (start 0; ``start`` is added back on unflatten);
    - any other tree of only Discrete / MultiDiscrete / MultiBinary leaves becomes one
      ``MultiDiscrete`` (int64) of every element, each 0-based (``start`` subtracted);
    - a tree with at least one Box becomes one ``Box``: float64 if a leaf needs it (a float64
      Box, an integer Box reaching past 2**24, a discrete leaf with more than 2**24 values),
      else float32. Float Box leaves go through unchanged (no clipping); integer and bool Box
      leaves are rounded and clipped to their bounds; discrete leaves are encoded as their
      0-based index in ``[0, n-1]`` and rounded and clipped back on unflatten.
    """

    def __init__(self, space: spaces.Space, root: str = "action"):
        self.original_space = space
        self.root = root
        leaves: list[_ActionLeaf] = []
        self.tree = _action_skeleton(space, root, (), leaves)
        self.leaves = leaves
        self.size = sum(leaf.size for leaf in leaves)
        if isinstance(space, spaces.Discrete):
            self.mode = "discrete"
            self.space = spaces.Discrete(space.n)
            self.dtype = np.dtype(space.dtype)
        elif all(leaf.kind == "discrete" for leaf in leaves):
            self.mode = "multidiscrete"
            nvec = np.concatenate([leaf.nvec for leaf in leaves]) if leaves else np.zeros(0, np.int64)
            self.space = spaces.MultiDiscrete(nvec, dtype=np.int64)
            self.dtype = np.dtype(np.int64)
        else:
            self.mode = "box"
            self.dtype = np.dtype(np.float64 if any(leaf.needs_float64() for leaf in leaves) else np.float32)
            low = np.concatenate([self._leaf_low_high(leaf)[0] for leaf in leaves]).astype(self.dtype)
            high = np.concatenate([self._leaf_low_high(leaf)[1] for leaf in leaves]).astype(self.dtype)
            self.space = spaces.Box(low=low, high=high, shape=(self.size,), dtype=self.dtype)
        # A bare Box already flat and of the flat dtype needs no conversion at all.
        self.passthrough = (
            isinstance(space, spaces.Box) and len(space.shape) == 1 and np.dtype(space.dtype) == self.dtype
        )

    @staticmethod
    def _leaf_low_high(leaf: _ActionLeaf) -> tuple[np.ndarray, np.ndarray]:
        if leaf.kind == "box":
            return leaf.low.ravel().astype(np.float64), leaf.high.ravel().astype(np.float64)
        return np.zeros(leaf.size), (leaf.nvec - 1).astype(np.float64)

    # -- flatten

    def flatten(self, action: Any) -> Any:
        """Nested action (or batch, leading dims on every leaf) → flat action."""
        if self.mode == "discrete":
            leaf = self.leaves[0]
            return (np.asarray(action).astype(np.int64) - leaf.start)[()]
        values = [self._leaf_value(action, leaf) for leaf in self.leaves]
        lead: tuple = ()
        if values:
            first = values[0]
            lead = first.shape[: first.ndim - len(self.leaves[0].shape)]
        out = np.empty((*lead, self.size), self.dtype)
        for leaf, value in zip(self.leaves, values):
            if value.shape != lead + leaf.shape:
                raise SpaceError(
                    f"{_format_path(self.root, leaf.keys)}: expected shape {lead + leaf.shape} "
                    f"(batch dims {lead} + leaf shape {leaf.shape}), got {value.shape}"
                )
            flat = value.reshape((*lead, leaf.size))
            if leaf.kind == "discrete":
                flat = flat.astype(np.int64) - leaf.start
            out[..., leaf.slice] = flat
        return out

    def _leaf_value(self, action: Any, leaf: _ActionLeaf) -> np.ndarray:
        value = action
        for depth, key in enumerate(leaf.keys):
            try:
                value = value[key]
            except (KeyError, IndexError, TypeError):
                where = _format_path(self.root, leaf.keys[: depth + 1])
                raise SpaceError(f"{where}: missing from the action (got {type(value).__name__})") from None
        return np.asarray(value)

    # -- unflatten

    def unflatten(self, x: Any) -> Any:
        """Flat action (or batch, shape ``(..., size)``) → the nested action the env expects."""
        if self.mode == "discrete":
            leaf = self.leaves[0]
            return (np.asarray(x).astype(self.dtype) + leaf.start)[()]
        x = np.asarray(x)
        if x.ndim == 0 or x.shape[-1] != self.size:
            raise SpaceError(
                f"{self.root}: expected flat actions of shape (..., {self.size}) for {self.space}, got shape {x.shape}"
            )
        if self.passthrough:
            return x.astype(self.dtype, copy=False)
        lead = x.shape[:-1]
        return _build_action(self.tree, self.leaves, x, lead, self.mode)

    def fast_unflatten(self) -> Callable[[Any], Any]:
        """The cheapest converter for one action, for the emulator's hot path."""
        if self.mode == "discrete":
            start = int(self.leaves[0].start)
            if start == 0:
                return int
            return lambda a: int(a) + start
        if self.passthrough:
            dtype = self.dtype
            return lambda a: np.asarray(a, dtype)
        return self.unflatten


def _decode_leaf(leaf: _ActionLeaf, segment: np.ndarray, lead: tuple, mode: str) -> Any:
    if leaf.kind == "box":
        if leaf.dtype.kind == "f":
            value = segment.astype(leaf.dtype)
        else:  # integer / bool Box stored as floats: nearest valid value
            low = leaf.low.ravel().astype(np.float64)
            high = leaf.high.ravel().astype(np.float64)
            value = np.clip(np.rint(segment), low, high).astype(leaf.dtype)
    elif mode == "box":  # discrete leaf encoded as a float index
        value = np.clip(np.rint(segment), 0, leaf.nvec - 1).astype(np.int64) + leaf.start
        value = value.astype(leaf.dtype)
    else:
        value = (segment.astype(np.int64) + leaf.start).astype(leaf.dtype)
    value = value.reshape(lead + leaf.shape)
    return value[()] if leaf.scalar and not lead else value


def _build_action(node: tuple, leaves: list[_ActionLeaf], x: np.ndarray, lead: tuple, mode: str) -> Any:
    kind = node[0]
    if kind == "leaf":
        leaf = leaves[node[1]]
        return _decode_leaf(leaf, x[..., leaf.slice], lead, mode)
    if kind == "dict":
        return {key: _build_action(child, leaves, x, lead, mode) for key, child in node[1]}
    return tuple(_build_action(child, leaves, x, lead, mode) for child in node[1])
