"""The torch helper: nested tensors viewing a flat batch, no copy."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from gymnasium import spaces
from optional import require

torch = require("torch")

from puffer_core.emulation import GymnasiumEmulator, ObservationLayout  # noqa: E402
from puffer_core.env.torch_helpers import unflatten  # noqa: E402
from puffer_core.errors import SpaceError  # noqa: E402

MIXED = spaces.Dict(
    {
        "image": spaces.Box(0, 255, (3, 4, 2), np.uint8),
        "stats": spaces.Tuple((spaces.Discrete(7, start=2), spaces.Box(-5, 5, (3,), np.float32))),
        "flags": spaces.MultiBinary(3),
        "wide": spaces.Box(0, 2**40, (2,), np.int64),
        "half": spaces.Box(-1, 1, (), np.float16),
        "ok": spaces.Box(0, 1, (2,), bool),
    }
)


def _inside(tensor, source) -> bool:
    """True when every byte ``tensor`` can address lies inside ``source``'s storage."""
    start = source.untyped_storage().data_ptr()
    end = start + source.untyped_storage().nbytes()
    first = tensor.data_ptr()
    span = sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride())) + 1
    return start <= first and first + span * tensor.element_size() <= end


def _leaves(tree):
    if isinstance(tree, dict):
        return [x for v in tree.values() for x in _leaves(v)]
    if isinstance(tree, tuple):
        return [x for v in tree for x in _leaves(v)]
    return [tree]


def test_mixed_batch_unflattens_to_views_with_numpy_values():
    layout = ObservationLayout(MIXED)
    MIXED.seed(0)
    samples = [MIXED.sample() for _ in range(6)]
    flat = np.stack([layout.flatten(s) for s in samples]).reshape(2, 3, -1)
    source = torch.from_numpy(flat)
    nested = unflatten(source, layout.dtype)
    expected = layout.unflatten(flat)
    assert isinstance(nested, dict) and isinstance(nested["stats"], tuple)
    for got, want in zip(_leaves(nested), _leaves(expected)):
        assert tuple(got.shape) == want.shape
        np.testing.assert_array_equal(got.numpy(), want)
        assert _inside(got, source)
    assert nested["stats"][0].dtype == torch.int64 and nested["ok"].dtype == torch.bool
    assert nested["half"].dtype == torch.float16 and nested["wide"].dtype == torch.int64
    # Writing through the view changes the source: no copy was made.
    nested["stats"][1][1, 2, 0] = 123.0
    assert layout.unflatten(flat)["stats"][1][1, 2, 0] == 123.0


def test_emulator_is_accepted_and_uniform_dtype_tensors_work():
    class Env:
        observation_space = spaces.Dict({"a": spaces.Box(0, 1, (2,), np.float32), "b": spaces.Box(0, 1, (3,))})
        action_space = spaces.Discrete(2)

        def step(self, action):
            raise AssertionError("not stepped")

    emu = GymnasiumEmulator(Env())
    assert emu.observation_space.dtype == np.float32
    source = torch.arange(20, dtype=torch.float32).reshape(4, 5)
    nested = unflatten(source, emu)
    assert nested["a"].shape == (4, 2) and nested["b"].shape == (4, 3)
    assert nested["b"][1].tolist() == [7.0, 8.0, 9.0]
    assert all(_inside(t, source) for t in nested.values())


def test_a_single_row_and_a_bare_leaf():
    layout = ObservationLayout(spaces.Box(0, 255, (2, 3), np.uint8))
    source = torch.arange(6, dtype=torch.uint8)
    view = unflatten(source, layout.dtype)
    assert view.shape == (2, 3) and view.data_ptr() == source.data_ptr()
    scalar = unflatten(torch.zeros(8, dtype=torch.uint8), ObservationLayout(spaces.Discrete(3)).dtype)
    assert scalar.shape == () and scalar.dtype == torch.int64


def test_wrong_width_or_strided_rows_are_refused():
    dtype = ObservationLayout(MIXED).dtype
    with pytest.raises(SpaceError, match=f"holds {dtype.itemsize} bytes"):
        unflatten(torch.zeros(2, dtype.itemsize + 1, dtype=torch.uint8), dtype)
    wide = torch.zeros(dtype.itemsize, 2, dtype=torch.uint8).t()
    with pytest.raises(SpaceError, match="contiguous"):
        unflatten(wide, dtype)


def test_torch_is_not_imported_by_the_core():
    import subprocess

    code = "import puffer_core, puffer_core.emulation, puffer_core.postprocess, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_works_on_any_device_without_touching_host_memory():
    # Meta tensors have a device but no data: any host round-trip (.numpy(), .cpu()) would fail.
    dtype = ObservationLayout(MIXED).dtype
    source = torch.empty(5, dtype.itemsize, dtype=torch.uint8, device="meta")
    nested = unflatten(source, dtype)
    assert all(t.device.type == "meta" for t in _leaves(nested))
    assert nested["image"].shape == (5, 3, 4, 2) and nested["stats"][1].dtype == torch.float32
