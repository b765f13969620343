"""The observation encoder (puffer_core.train.encoder): which leaves become embeddings, the
shapes it produces, and that ids read as categories teach what numbers cannot."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from optional import require

import puffer_core
from puffer_core.emulation import emulate

require("torch")
import torch  # noqa: E402

from puffer_core import train  # noqa: E402
from puffer_core.train.encoder import EMBEDDING_SIZE, Encoder, categories  # noqa: E402

INT64 = np.iinfo(np.int64)


@pytest.mark.parametrize(
    ("space", "expected"),
    [
        (spaces.Box(0, 5976, (21, 79), np.int16), (0, 5977)),  # NetHack's glyph ids
        (spaces.Box(-2, 5, (3,), np.int8), (-2, 8)),
        (spaces.Box(0, 255, (84, 84), np.uint8), None),  # a grey picture: intensities
        (spaces.Box(0, 255, (256,), np.uint8), None),  # text bytes
        (spaces.Box(INT64.min, INT64.max, (27,), np.int64), None),  # counters: numbers
        (spaces.Box(np.array([0, 0]), np.array([3, 9]), (2,), np.int64), None),  # a different range each
        (spaces.Box(0, 1, (2,), np.float32), None),
        (spaces.Box(0, 0, (2,), np.int32), None),  # one value: nothing to tell apart
    ],
)
def test_integer_leaves_with_few_values_are_categories(space, expected):
    assert categories(space) == expected


def encoder_for(space: spaces.Space) -> tuple[Encoder, object]:
    env = emulate(Constant(space))
    return Encoder(env.obs_layout), env


class Constant(gymnasium.Env):
    """An env with the given observation space (for its layout only)."""

    def __init__(self, space: spaces.Space):
        self.observation_space, self.action_space = space, spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, True, False, {}


def test_a_grid_of_ids_gets_an_embedding_and_a_cnn_and_counters_stay_numbers():
    space = spaces.Dict(
        {
            "map": spaces.Box(0, 5976, (21, 79), np.int16),
            "crop": spaces.Box(0, 5976, (9, 9), np.int16),
            "items": spaces.Box(0, 9, (3,), np.int8),
            "stats": spaces.Box(INT64.min, INT64.max, (27,), np.int64),
        }
    )
    encoder, env = encoder_for(space)
    leaves = {leaf.path[0]: leaf for leaf in encoder.leaves}
    assert {name: leaf.kind for name, leaf in leaves.items()} == {
        "crop": "categories",
        "items": "categories",
        "map": "categories",
        "stats": "integer",
    }
    assert leaves["map"].embedding.num_embeddings == 5977 and leaves["map"].grid and leaves["crop"].grid
    assert not leaves["items"].grid and leaves["items"].size == 3 * EMBEDDING_SIZE
    assert leaves["stats"].size == 27 and not encoder.has_image  # grids keep the MLP trunk
    rows = np.stack([env.flatten_observation(space.sample()) for _ in range(5)])
    features = encoder(torch.from_numpy(rows))
    assert features.shape == (5, encoder.size) and encoder.size == sum(leaf.size for leaf in encoder.leaves)
    features.sum().backward()
    assert leaves["map"].embedding.weight.grad.abs().sum() > 0  # the ids reach the embedding


def test_ids_are_looked_up_not_scaled():
    encoder, env = encoder_for(spaces.Box(0, 9, (1,), np.int64))
    rows = torch.from_numpy(np.stack([env.flatten_observation(np.array([i])) for i in range(10)]))
    with torch.no_grad():
        features = encoder(rows)
    table = encoder.leaves[0].embedding.weight
    torch.testing.assert_close(features, table)  # row i is id i's own vector


class ParityCue(gymnasium.Env):
    """One-step episodes: a 3x3 grid of ids 0-7; reward 1 for the action equal to the centre id's
    parity. The parity of an id is no smooth function of its value: a learner must tell ids apart."""

    observation_space = spaces.Box(0, 7, (3, 3), np.int8)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.grid = self.np_random.integers(0, 8, (3, 3)).astype(np.int8)
        return self.grid, {}

    def step(self, action):
        reward = float(action == self.grid[1, 1] % 2)
        return self.reset()[0], reward, True, False, {}


def test_a_policy_learns_what_the_ids_mean(tmp_path):
    curve = train.ppo(ParityCue, 16_384, out=tmp_path, seed=0, num_envs=16, rollout_steps=64)
    returns = [episode[1] for episode in curve.episodes[-500:]]
    assert np.mean(returns) >= 0.9, np.mean(returns)


def test_nethack_crop_and_stats_are_read_as_ids_and_numbers():
    require("nle")
    env = puffer_core.make("nethack/score", observation_keys=("glyphs_crop", "blstats"))
    policy = train.Policy(env.obs_layout, env.action_space, 32)
    kinds = {leaf.path[0]: (leaf.kind, getattr(leaf, "grid", False)) for leaf in policy.encoder.leaves}
    assert kinds == {"glyphs_crop": ("categories", True), "blstats": ("integer", False)}
    obs, _ = env.reset(seed=0)
    with torch.no_grad():
        distribution, value = policy(torch.from_numpy(obs[None]))
    assert distribution.sample().shape == (1,) and value.shape == (1,)
    env.close()
