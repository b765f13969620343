"""Making the envs: the raw path (make_raw) and the emulated one (puffer_core.make)."""

from __future__ import annotations

import numpy as np
import puffer_core
import pytest
from puffer_core import make_raw
from puffer_core.testing import get_plugins


def test_butterfly_parallel_env_through_make_raw():
    env = make_raw("pettingzoo/pistonball", n_pistons=5)
    try:
        assert not hasattr(env, "agent_iter")  # already the Parallel API
        obs, _infos = env.reset(seed=1)
        assert sorted(obs) == sorted(env.possible_agents) and len(obs) == 5
        actions = {agent: env.action_space(agent).sample() for agent in env.agents}
        obs, rewards, terms, truncs, _infos = env.step(actions)
        assert set(rewards) == set(terms) == set(truncs) == set(env.possible_agents)
    finally:
        env.close()


def test_classic_aec_env_is_converted_to_turn_based_parallel():
    spec = get_plugins().get_spec("pettingzoo/connect_four")
    raw = spec.creator(**spec.kwargs)
    assert spec.api == "pettingzoo-aec" and hasattr(raw, "agent_iter")
    assert raw.metadata["is_parallelizable"] is False  # so aec_to_parallel would refuse it
    raw.close()

    env = make_raw("pettingzoo/connect_four")
    try:
        assert not hasattr(env, "agent_iter")
        obs, _infos = env.reset(seed=0)
        assert set(obs) == {"player_0", "player_1"}
        assert obs["player_0"]["action_mask"].sum() == 7 and obs["player_1"]["action_mask"].sum() == 0
        # Only the player to move acts; the other's action is ignored.
        obs, rewards, terms, _truncs, _infos = env.step({"player_0": 3, "player_1": 0})
        assert obs["player_1"]["action_mask"].sum() == 7 and obs["player_0"]["action_mask"].sum() == 0
        assert not any(terms.values()) and set(rewards.values()) == {0}
    finally:
        env.close()


def test_pistonball_emulated_with_one_slot_per_piston():
    env = puffer_core.make("pettingzoo/pistonball")
    try:
        assert type(env).__name__ == "PettingZooEmulator"
        assert env.num_agents == 20
        obs, _infos = env.reset(seed=0)
        assert obs.shape[0] == 20 and obs.dtype == np.uint8
        assert env.mask.all()
        assert env.unflatten_observation(obs).shape == (20, 457, 120, 3)
        actions = np.stack([env.single_action_space.sample() for _ in range(20)])
        obs, rewards, terms, truncs, _infos = env.step(actions)
        assert rewards.shape == terms.shape == truncs.shape == (20,)
        assert env.mask.all() and not terms.any()
    finally:
        env.close()


def _first_legal(mask_row: np.ndarray) -> int:
    return int(np.flatnonzero(mask_row)[0])


def test_connect_four_emulated_plays_a_full_game_from_the_action_masks():
    env = puffer_core.make("pettingzoo/connect_four")
    try:
        assert env.num_agents == 2 and env.possible_agents == ["player_0", "player_1"]
        obs, _ = env.reset(seed=0)
        masks = env.unflatten_observation(obs)["action_mask"]
        assert masks.shape == (2, 7)
        assert masks[0].all() and not masks[1].any()  # player_0 moves first
        mover, moves, episode_infos = 0, 0, {}
        terms = np.zeros(2, bool)
        while not terms.all():
            assert moves < 42, "a connect four game cannot last longer"
            actions = np.zeros(2, dtype=np.int64)
            actions[mover] = _first_legal(masks[mover])
            obs, rewards, terms, truncs, infos = env.step(actions)
            moves += 1
            episode_infos.update(infos)
            masks = env.unflatten_observation(obs)["action_mask"]
            if not terms.all():
                mover = 1 - mover
                assert masks[mover].any() and not masks[1 - mover].any(), "turns alternate"
        assert not truncs.any()
        assert sorted(rewards.tolist()) in ([-1.0, 1.0], [0.0, 0.0])
        # Episode statistics arrive in each agent's info at the end.
        assert {info["episode_length"] for info in episode_infos.values()} == {moves}
    finally:
        env.close()


@pytest.mark.parametrize(
    "env_id",
    [
        "pettingzoo/chess",
        "pettingzoo/leduc_holdem",
        "pettingzoo/tictactoe",
        "pettingzoo/rps",
        "pettingzoo/cooperative_pong",
        "pettingzoo/knights_archers_zombies",
    ],
)
def test_other_envs_emulate_and_step(env_id):
    env = puffer_core.make(env_id)
    try:
        obs, _ = env.reset(seed=3)
        assert obs.shape[0] == env.num_agents == len(env.possible_agents) and env.mask.all()
        nested = env.unflatten_observation(obs)
        for _ in range(5):
            if isinstance(nested, dict) and "action_mask" in nested:
                actions = np.array([_first_legal(m) if m.any() else 0 for m in nested["action_mask"]])
            else:
                actions = np.array([env.single_action_space.sample() for _ in range(env.num_agents)])
            obs, rewards, terms, truncs, _infos = env.step(actions)
            if (terms | truncs).all():
                break
            nested = env.unflatten_observation(obs)
        assert rewards.shape == (env.num_agents,)
    finally:
        env.close()


def test_illegal_moves_end_the_game_without_printing_or_leaking(capsys):
    from pettingzoo.utils.env_logger import EnvLogger

    from puffer_plugin_pettingzoo.wrappers import PettingZooEnvWarning

    env = puffer_core.make("pettingzoo/connect_four")
    env.reset(seed=0)
    queued = len(EnvLogger.mqueue)
    with pytest.warns(PettingZooEnvWarning, match="Illegal move"):
        for _ in range(6):  # both players fill column 0 (player_0 moves on even turns)
            env.step(np.zeros(2, dtype=np.int64))
        _obs, rewards, terms, _truncs, _infos = env.step(np.zeros(2, dtype=np.int64))  # column 0 is full
    assert terms.all() and rewards.tolist() == [-1.0, 0.0]
    assert capsys.readouterr().out == ""
    assert len(EnvLogger.mqueue) == queued
    env.close()
