"""The multi-agent path end to end: `puffer run` and a 2-worker Multiprocessing run."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
from puffer_core import vector
from puffer_core.testing import random_actions


def test_puffer_run_pistonball_200_steps():
    result = subprocess.run(
        [sys.executable, "-m", "puffer_core.cli.main", "run", "pettingzoo/pistonball", "--steps", "200", "--json"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(result.stdout)
    assert report["env"] == "pettingzoo/pistonball"
    assert report["steps"] >= 200 and report["num_envs"] == 20  # one row per piston
    assert report["steps_per_second"] > 0


def test_puffer_run_turn_based_game_finishes_episodes():
    result = subprocess.run(
        [sys.executable, "-m", "puffer_core.cli.main", "run", "pettingzoo/connect_four", "--steps", "400", "--json"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(result.stdout)
    assert report["steps"] >= 400 and report["episodes"] > 0
    assert "episode_return" in report["episode_means"]


def test_two_worker_multiprocessing_run_keeps_agent_slots_and_masks():
    rng = np.random.default_rng(0)
    with vector.make(
        "pettingzoo/knights_archers_zombies", num_envs=2, num_workers=2, backend="multiprocessing", seed=0
    ) as envs:
        assert envs.agents_per_env == 4 and envs.num_envs == 8 and envs.num_workers == 2
        obs, _infos = envs.reset(seed=0)
        assert obs.shape[0] == 8
        finished = 0
        for _ in range(300):
            actions = random_actions(envs.single_action_space, envs.num_envs, rng)
            obs, rewards, terms, _truncs, infos = envs.step(actions)
            assert obs.shape[0] == rewards.shape[0] == terms.shape[0] == 8
            finished += sum("episode_return" in info for info in infos)
        assert finished > 0, "KAZ agents die or time out within 300 steps of random play"


def test_multiprocessing_turn_based_game_exposes_action_masks():
    with vector.make("pettingzoo/tictactoe", num_envs=2, num_workers=2, backend="multiprocessing", seed=1) as envs:
        obs, _ = envs.reset(seed=1)
        masks = envs.unflatten_observation(obs)["action_mask"]
        assert masks.shape == (4, 9)
        # Rows 0 and 2 are player_1 of each env, to move first; rows 1 and 3 wait.
        assert masks[[0, 2]].all() and not masks[[1, 3]].any()
        actions = np.array([int(np.flatnonzero(m)[0]) if m.any() else 0 for m in masks])
        obs, *_ = envs.step(actions)
        masks = envs.unflatten_observation(obs)["action_mask"]
        assert not masks[[0, 2]].any() and masks[[1, 3]].sum(axis=1).tolist() == [8, 8]
