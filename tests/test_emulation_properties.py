"""Property tests: random nested spaces survive flatten → unflatten exactly, zero-copy."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from hypothesis import assume, given, settings, strategies as st

from puffer_core.emulation import ActionLayout, ObservationLayout

SETTINGS = settings(max_examples=60, deadline=None)

DTYPES = [
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64,
]  # fmt: skip
shapes = st.lists(st.integers(1, 3), max_size=3).map(tuple)


@st.composite
def boxes(draw):
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = draw(shapes)
    if dtype == np.bool_:
        return spaces.Box(0, 1, shape, dtype)
    if dtype.kind == "f":
        low = draw(st.integers(-100, 0))
        return spaces.Box(low, low + draw(st.integers(1, 100)), shape, dtype)
    info = np.iinfo(dtype)
    low = draw(st.integers(max(int(info.min), -1000), 0))
    return spaces.Box(low, min(int(info.max), low + draw(st.integers(1, 2000))), shape, dtype)


discretes = st.builds(lambda n, start: spaces.Discrete(n, start=start), st.integers(1, 10), st.integers(-5, 5))


@st.composite
def multidiscretes(draw):
    shape = draw(st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple))
    nvec = draw(st.lists(st.integers(1, 6), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
    start = draw(st.lists(st.integers(-3, 3), min_size=len(nvec), max_size=len(nvec)))
    return spaces.MultiDiscrete(np.reshape(nvec, shape), start=np.reshape(start, shape))


multibinaries = st.one_of(st.integers(1, 4), st.lists(st.integers(1, 3), min_size=1, max_size=2)).map(
    spaces.MultiBinary
)
discrete_leaves = st.one_of(discretes, multidiscretes(), multibinaries)
any_leaves = st.one_of(boxes(), discrete_leaves)
keys = st.text(alphabet="abcxyz_", min_size=1, max_size=4)


def trees(leaves, depth: int = 3):
    """Leaves, Dicts and Tuples nested up to ``depth`` levels."""
    if depth == 0:
        return leaves
    children = trees(leaves, depth - 1)
    return st.one_of(
        leaves,
        st.dictionaries(keys, children, min_size=1, max_size=3).map(spaces.Dict),
        st.lists(children, min_size=1, max_size=3).map(spaces.Tuple),
    )


seeds = st.integers(0, 2**32 - 1)


def samples(space, seed, count):
    """Valid samples only: gymnasium's Box.sample can leave its own bounds at the edge of a
    small integer dtype (Box(-128, -127, (), int8) samples -126), which is no observation."""
    space.seed(seed)
    drawn = [space.sample() for _ in range(count)]
    assume(all(space.contains(x) for x in drawn))
    return drawn


def flat_leaves(tree):
    if isinstance(tree, dict):
        return [x for v in tree.values() for x in flat_leaves(v)]
    if isinstance(tree, tuple):
        return [x for v in tree for x in flat_leaves(v)]
    return [tree]


def assert_same(got, expected, exact_types=False):
    """Same structure, and every leaf has the same dtype, shape and values (and, with
    ``exact_types``, arrays wherever ``sample()`` gives arrays)."""
    if isinstance(expected, dict):
        assert isinstance(got, dict) and list(got) == list(expected)
        for key in expected:
            assert_same(got[key], expected[key], exact_types)
    elif isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same(g, e, exact_types)
    else:
        if exact_types and isinstance(expected, np.ndarray):
            assert isinstance(got, np.ndarray), type(got)
        got, expected = np.asarray(got), np.asarray(expected)
        assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
        assert got.shape == expected.shape, (got.shape, expected.shape)
        np.testing.assert_array_equal(got, expected)


def stack(trees_, lead):
    """Stack same-structured nested values into one batched tree of shape ``lead + leaf``."""
    first = trees_[0]
    if isinstance(first, dict):
        return {k: stack([t[k] for t in trees_], lead) for k in first}
    if isinstance(first, tuple):
        return tuple(stack([t[i] for t in trees_], lead) for i in range(len(first)))
    arrays = [np.asarray(t) for t in trees_]
    return np.stack(arrays).reshape(lead + arrays[0].shape)


# ----------------------------------------------------------------------------- observations


@SETTINGS
@given(trees(any_leaves), seeds)
def test_observation_roundtrip_is_exact_and_zero_copy(space, seed):
    layout = ObservationLayout(space)
    (sample,) = samples(space, seed, 1)
    flat = layout.flatten(sample)
    assert flat.shape == layout.space.shape and flat.dtype == layout.space.dtype
    assert layout.space.contains(flat), "flat bounds must cover every valid observation"
    views = layout.unflatten(flat)
    assert_same(views, sample)
    for leaf in flat_leaves(views):
        assert np.shares_memory(leaf, flat)


@SETTINGS
@given(trees(any_leaves), seeds, st.sampled_from([(4,), (2, 3)]))
def test_observation_batches_keep_leading_dims(space, seed, lead):
    layout = ObservationLayout(space)
    batch = samples(space, seed, int(np.prod(lead)))
    flat = np.stack([layout.flatten(s) for s in batch]).reshape(lead + layout.space.shape)
    views = layout.unflatten(flat)
    assert_same(views, stack(batch, lead))
    for leaf in flat_leaves(views):
        assert np.shares_memory(leaf, flat)
    np.testing.assert_array_equal(layout.flatten(stack(batch, lead)), flat)


@SETTINGS
@given(trees(any_leaves), seeds)
def test_writer_fills_one_row_of_a_shared_buffer_in_place(space, seed):
    layout = ObservationLayout(space)
    shared = np.zeros((3, layout.size), layout.flat_dtype)
    write = layout.writer(shared[1])
    first, second = samples(space, seed, 2)
    for sample in (first, second):  # the second write must overwrite the first completely
        write(sample)
        np.testing.assert_array_equal(shared[1], layout.flatten(sample))
    assert not shared[0].any() and not shared[2].any()
    assert_same(layout.unflatten(shared[1]), second)


# ----------------------------------------------------------------------------- actions


@SETTINGS
@given(trees(any_leaves), seeds)
def test_action_roundtrip_is_exact(space, seed):
    layout = ActionLayout(space)
    (sample,) = samples(space, seed, 1)
    flat = layout.flatten(sample)
    assert layout.space.contains(flat), f"{flat!r} not in {layout.space}"
    assert_same(layout.unflatten(flat), sample, exact_types=True)
    assert space.contains(layout.unflatten(flat))


@SETTINGS
@given(boxes(), trees(discrete_leaves, depth=2), seeds)
def test_mixed_discrete_and_continuous_actions_roundtrip(box, discrete_tree, seed):
    space = spaces.Tuple((discrete_tree, box))
    layout = ActionLayout(space)
    assert isinstance(layout.space, spaces.Box)
    for sample in samples(space, seed, 3):
        flat = layout.flatten(sample)
        assert layout.space.contains(flat)
        assert_same(layout.unflatten(flat), sample, exact_types=True)


@SETTINGS
@given(trees(discrete_leaves), seeds)
def test_all_discrete_flat_actions_map_back_exactly(space, seed):
    layout = ActionLayout(space)
    assert isinstance(layout.space, (spaces.Discrete, spaces.MultiDiscrete))
    layout.space.seed(seed)
    flat = layout.space.sample()
    nested = layout.unflatten(flat)
    assert space.contains(nested)
    np.testing.assert_array_equal(layout.flatten(nested), flat)


@SETTINGS
@given(trees(any_leaves), seeds, st.sampled_from([(3,), (2, 2)]))
def test_action_batches_keep_leading_dims(space, seed, lead):
    layout = ActionLayout(space)
    batch = samples(space, seed, int(np.prod(lead)))
    flat = layout.flatten(stack(batch, lead))
    rows = np.stack([np.asarray(layout.flatten(s)) for s in batch])
    np.testing.assert_array_equal(flat, rows.reshape(lead + rows.shape[1:]))
    assert_same(layout.unflatten(flat), stack(batch, lead))
