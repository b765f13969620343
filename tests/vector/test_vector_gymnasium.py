"""``to_gymnasium``: Puffer vector envs as ``gymnasium.vector.VectorEnv``, used the way
Gymnasium-based training scripts (CleanRL's) use them."""

from __future__ import annotations

import functools

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from puffer_core import vector
from puffer_core.errors import APIUsageError
from puffer_core.testing import CountingEnv, TinyParallelEnv

MP = "multiprocessing"


def cleanrl_style_rollout(envs: gymnasium.vector.VectorEnv, steps: int, seed: int) -> dict:
    """The environment side of CleanRL's ppo.py, written for gymnasium.vector 1.x: episode
    statistics from Gymnasium's own vector RecordEpisodeStatistics, actions sampled from
    ``envs.action_space``, ``final_obs`` for truncation bootstrapping in same-step mode."""
    envs = gymnasium.wrappers.vector.RecordEpisodeStatistics(envs)
    assert isinstance(envs.single_action_space, gymnasium.spaces.Discrete), "only discrete action space is supported"
    envs.action_space.seed(seed)
    next_obs, _ = envs.reset(seed=seed)
    obs = np.zeros((steps, *envs.observation_space.shape), envs.single_observation_space.dtype)
    returns, puffer_returns, finals = [], [], 0
    for step in range(steps):
        obs[step] = next_obs
        action = envs.action_space.sample()
        next_obs, reward, terminations, truncations, infos = envs.step(action)
        next_done = np.logical_or(terminations, truncations)
        if "episode" in infos:
            returns += infos["episode"]["r"][infos["_episode"]].tolist()
        if "episode_return" in infos:  # Puffer's own statistics, top-level or under final_info
            puffer_returns += infos["episode_return"][infos["_episode_return"]].tolist()
        if "final_info" in infos:
            puffer_returns += infos["final_info"]["episode_return"][infos["final_info"]["_episode_return"]].tolist()
        if "final_obs" in infos:
            for i in np.flatnonzero(infos["_final_obs"]):
                assert next_done[i] and infos["final_obs"][i].shape == envs.single_observation_space.shape
                finals += 1
    envs.close()
    return {"returns": returns, "puffer_returns": puffer_returns, "finals": finals, "obs": obs}


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
@pytest.mark.parametrize("backend", ["serial", MP])
def test_a_cleanrl_style_loop_runs_unchanged(backend, mode):
    workers = None if backend == "serial" else 2
    envs = vector.to_gymnasium(
        vector.make("classic/cartpole", num_envs=4, num_workers=workers, backend=backend, autoreset=mode)
    )
    assert isinstance(envs, gymnasium.vector.VectorEnv)
    assert envs.metadata["autoreset_mode"] == AutoresetMode[mode.upper()]
    out = cleanrl_style_rollout(envs, 300, seed=1)
    assert len(out["returns"]) >= 20
    assert len(out["returns"]) == len(out["puffer_returns"])
    if mode == "next_step":
        # Gymnasium 1.2's vector RecordEpisodeStatistics assumes next-step autoreset (it drops
        # the reward of the step after an episode's end), so only then do its returns match.
        assert sorted(out["returns"]) == pytest.approx(sorted(out["puffer_returns"]))
    assert (out["finals"] == len(out["returns"])) if mode == "same_step" else out["finals"] == 0
    assert envs.closed and envs.unwrapped.envs.closed


def test_spaces_and_sizes_are_gymnasiums():
    with vector.make("classic/probe_dict", num_envs=3) as puffer:
        envs = vector.to_gymnasium(puffer)
        assert envs.num_envs == 3
        assert envs.single_observation_space == puffer.single_observation_space
        assert envs.observation_space.shape == (3, *puffer.single_observation_space.shape)
        assert envs.action_space == gymnasium.vector.utils.batch_space(puffer.single_action_space, 3)
        obs, infos = envs.reset(seed=0)
        assert obs in envs.observation_space and infos == {}
        obs, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())
        assert rewards.shape == terminations.shape == truncations.shape == (3,)


def test_zero_copy_unless_asked():
    with vector.make("classic/cartpole", num_envs=2, num_workers=2, backend=MP) as puffer:
        envs = vector.to_gymnasium(puffer)
        first, _ = envs.reset(seed=0)
        second, *_ = envs.step(np.zeros(2, int))
        assert np.shares_memory(first, second)  # the backend's buffer, handed out as it is
        copying = vector.to_gymnasium(puffer, copy=True)
        third, *_ = copying.step(np.zeros(2, int))
        assert not np.shares_memory(third, second)
        np.testing.assert_array_equal(third, second)


def test_same_step_infos_follow_gymnasium():
    creator = functools.partial(CountingEnv, episode_length=2)
    envs = vector.to_gymnasium(vector.make(creator, num_envs=3, autoreset="same_step"))
    envs.reset(seed=0)
    envs.step(np.array([0, 1, 2]))
    obs, rewards, terminations, truncations, infos = envs.step(np.array([2, 1, 0]))
    assert terminations.all()
    assert infos["_final_obs"].tolist() == [True] * 3
    assert infos["final_obs"].dtype == object  # as Gymnasium's vector envs store it
    np.testing.assert_array_equal([ob[2] for ob in infos["final_obs"]], [2, 2, 2])  # action sums
    np.testing.assert_array_equal(infos["final_info"]["episode_length"], [2, 2, 2])
    assert infos["final_info"]["_episode_return"].all()
    np.testing.assert_array_equal(obs[:, 0], [0, 0, 0])
    envs.close()


def test_disabled_mode_masked_reset_through_gymnasium_api():
    envs = vector.to_gymnasium(
        vector.make(functools.partial(CountingEnv, episode_length=2), num_envs=2, autoreset="disabled")
    )
    assert envs.metadata["autoreset_mode"] == AutoresetMode.DISABLED
    envs.reset(seed=0)
    envs.step(np.array([0, 0]))
    _, _, terminations, _, _ = envs.step(np.array([0, 0]))
    obs, infos = envs.reset(options={"reset_mask": terminations})
    np.testing.assert_array_equal(obs[:, 0], [0, 0])
    envs.close()


def test_multi_agent_rows_are_sub_envs_with_a_mask():
    envs = vector.to_gymnasium(vector.make(TinyParallelEnv, num_envs=2))
    assert envs.num_envs == 6
    obs, infos = envs.reset(seed=0)
    assert infos["mask"].all()
    for _ in range(2):
        obs, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())
    np.testing.assert_array_equal(infos["mask"], [True, True, True] * 2)  # agent_0 ends on step 2, still live
    obs, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())
    np.testing.assert_array_equal(infos["mask"], [False, True, True] * 2)  # then its rows are dead
    assert rewards[0] == 0 and not obs[0].any()
    assert envs.get_attr("possible_agents")[0] == envs.get_attr("possible_agents")[2]
    assert len(envs.get_attr("possible_agents")) == 6
    envs.close()


def test_render_and_calls_reach_the_envs():
    envs = vector.to_gymnasium(
        vector.make("classic/cartpole", num_envs=2, num_workers=2, backend=MP, render_mode="rgb_array")
    )
    assert envs.render_mode == "rgb_array" and "rgb_array" in envs.metadata["render_modes"]
    envs.reset(seed=0)
    frames = envs.render()
    assert len(frames) == 2 and frames[0].ndim == 3 and frames[0].dtype == np.uint8
    envs.set_attr("spam", [1, 2])
    assert envs.get_attr("spam") == (1, 2)
    envs.close()


def test_async_batches_are_refused_with_what_works():
    with vector.make(CountingEnv, num_envs=4, num_workers=2, batch_size=2, backend=MP) as puffer:
        with pytest.raises(APIUsageError, match=r"returns batches of 2 of 4 rows; make it without batch_size"):
            vector.to_gymnasium(puffer)
    with pytest.raises(APIUsageError, match=r"takes a Puffer vector env"):
        vector.to_gymnasium(gymnasium.make("CartPole-v1"))


def test_infos_convert_exactly_as_gymnasiums_own_add_info_does():
    envs = vector.to_gymnasium(vector.make(CountingEnv, num_envs=4))
    entries = [
        {"env_id": 1, "episode_return": 3.5, "episode_length": 7, "won": True, "nested": {"depth": 2}},
        {"env_id": 3, "episode_return": 1.0, "episode_length": 2, "won": False, "frame": np.ones(3, np.uint8)},
        {"env_id": 0, "final_observation": np.zeros(5), "final_info": {"episode_return": 2.0}, "label": "x"},
    ]
    want: dict = {}
    for entry in entries:
        renamed = {("final_obs" if k == "final_observation" else k): v for k, v in entry.items() if k != "env_id"}
        envs._add_info(want, renamed, entry["env_id"])
    got = envs._infos(entries, np.ones(4, bool))
    assert sorted(got) == sorted(want)

    def same(a, b):
        if isinstance(a, dict):
            return sorted(a) == sorted(b) and all(same(a[k], b[k]) for k in a)
        return a.dtype == b.dtype and all(np.array_equal(x, y) for x, y in zip(a, b))

    assert same(got, want)
    envs.close()
