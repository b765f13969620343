"""puffer run's random rollout (puffer_core.cli.rollout): random actions respect action masks."""

from __future__ import annotations

import warnings

import numpy as np

from puffer_core import vector
from puffer_core.cli.rollout import masked_random_actions, run_random


def test_puffer_run_draws_random_actions_among_the_allowed_ones():
    # An illegal move ends a PettingZoo board game at once (with a warning): random play that
    # ignored the action mask would finish every game on its first or second move.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_random("pettingzoo/tictactoe", steps=2000, num_envs=2, seed=0)
    assert not [w for w in caught if "Illegal move" in str(w.message)]
    assert result.episodes >= 100
    # A game of tic-tac-toe takes 5 to 9 moves, and every agent has a row at each of them.
    assert 5 <= result.episode_means["episode_length"] <= 9


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
