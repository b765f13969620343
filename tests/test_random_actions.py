"""Random flat actions (puffer_core.env.random_actions): in the space, masks respected, drawn ahead."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from puffer_core import vector
from puffer_core.env.random_actions import masked_random_actions, random_action_batches, random_actions

SPACES = [
    spaces.Discrete(3, start=-1),
    spaces.MultiDiscrete([2, 5]),
    spaces.MultiBinary(4),
    spaces.Box(-2.0, 3.0, shape=(2,), dtype=np.float32),
    spaces.Box(0, 9, shape=(3,), dtype=np.int16),
    spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float64),
]


@pytest.mark.parametrize("space", SPACES, ids=lambda space: type(space).__name__)
def test_random_actions_lie_in_their_space(space):
    actions = random_actions(space, 200, np.random.default_rng(0))
    assert len(actions) == 200
    assert all(space.contains(np.asarray(a, dtype=space.dtype)) for a in actions)


def test_random_action_batches_are_drawn_ahead_in_batch_shape_and_repeat_with_the_seed():
    space = spaces.MultiDiscrete([2, 5])
    batches = random_action_batches(space, rows=3, count=4, seed=7)
    assert batches.shape == (4, 3, 2)
    np.testing.assert_array_equal(batches, random_action_batches(space, rows=3, count=4, seed=7))


def test_random_actions_refuse_a_space_an_emulator_never_has():
    with pytest.raises(TypeError, match="cannot sample"):
        random_actions(spaces.Dict({"a": spaces.Discrete(2)}), 1, np.random.default_rng(0))


def test_masked_random_actions_pick_only_allowed_moves():
    rng = np.random.default_rng(0)
    with vector.make("pettingzoo/chess", num_envs=2, seed=0) as envs:
        sample = masked_random_actions(envs)
        assert sample is not None
        obs, _ = envs.reset(seed=0)
        for _ in range(30):
            masks = envs.unflatten_observation(obs)["action_mask"]
            actions = sample(obs, rng)
            for mask, action in zip(masks, actions):
                assert not mask.any() or mask[action], "an action outside the mask"
            obs, *_ = envs.step(actions)
    with vector.make("pettingzoo/pistonball", num_envs=1) as envs:  # no action mask: None
        assert masked_random_actions(envs) is None
