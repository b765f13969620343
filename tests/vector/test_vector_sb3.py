"""``to_sb3``: Puffer vector envs as Stable-Baselines3 ``VecEnv``s: the same steps as SB3's
own DummyVecEnv, and SB3's PPO learning CartPole through Multiprocessing."""

from __future__ import annotations

import functools

import gymnasium
import numpy as np
import pytest
from optional import require

from puffer_core import vector
from puffer_core.errors import APIUsageError
from puffer_core.testing import CountingEnv

require("stable_baselines3")
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv  # noqa: E402

MP = "multiprocessing"


def truncated_counting():
    """Episodes end by termination (length 4) or, for envs seeded 1, by truncation at 3."""

    class Env(CountingEnv):
        def step(self, action):
            obs, reward, terminated, truncated, info = super().step(action)
            return obs, reward, terminated, truncated or (self.first_seed == 1 and self.t >= 3), info

    return Env(episode_length=4)


def cartpole():
    return gymnasium.make("CartPole-v1")


@pytest.mark.parametrize(("creator", "steps"), [(cartpole, 120), (truncated_counting, 30)])
@pytest.mark.parametrize("backend", ["serial", MP])
def test_steps_equal_sb3_dummy_vec_env(backend, creator, steps):
    workers = None if backend == "serial" else 2
    ours = vector.to_sb3(vector.make(creator, num_envs=3, num_workers=workers, backend=backend, autoreset="same_step"))
    theirs = DummyVecEnv([creator] * 3)
    assert isinstance(ours, VecEnv)
    rng = np.random.default_rng(0)
    for env in (ours, theirs):
        env.seed(0)
    np.testing.assert_array_equal(ours.reset(), theirs.reset())
    truncations = 0
    for _ in range(steps):
        actions = rng.integers(0, 2, 3)
        ours.step_async(actions)
        theirs.step_async(actions)
        obs, rewards, dones, infos = ours.step_wait()
        want_obs, want_rewards, want_dones, want_infos = theirs.step_wait()
        np.testing.assert_array_equal(obs, want_obs)
        np.testing.assert_array_equal(rewards, want_rewards)
        np.testing.assert_array_equal(dones, want_dones)
        for got, want in zip(infos, want_infos):
            assert got["TimeLimit.truncated"] == want["TimeLimit.truncated"]
            truncations += got["TimeLimit.truncated"]
            assert ("terminal_observation" in got) == ("terminal_observation" in want)
            if "terminal_observation" in got:
                np.testing.assert_array_equal(got["terminal_observation"], want["terminal_observation"])
                assert got["episode"]["l"] == got["episode_length"]
    if creator is truncated_counting:
        assert truncations >= 3
    ours.close()
    theirs.close()


def test_observations_are_copies_sb3_may_keep():
    envs = vector.to_sb3(vector.make("classic/cartpole", num_envs=2, num_workers=2, backend=MP, autoreset="same_step"))
    first = envs.reset()
    envs.step_async(np.zeros(2, int))
    second = envs.step_wait()[0]
    assert not np.shares_memory(first, second)
    assert not np.array_equal(first, second)  # SB3 stores `first` after the step: it must not have changed
    envs.close()


def test_env_method_get_attr_set_attr_env_is_wrapped():
    envs = vector.to_sb3(vector.make(cartpole, num_envs=3, num_workers=3, backend=MP, autoreset="same_step"))
    assert envs.get_attr("render_mode") == [None, None, None]
    envs.set_attr("spam", 3, indices=[1])
    assert envs.get_attr("spam", indices=1) == [3]
    assert envs.env_is_wrapped(gymnasium.wrappers.TimeLimit) == [True, True, True]
    assert envs.env_is_wrapped(gymnasium.wrappers.RecordVideo, indices=[0]) == [False]
    envs.reset()
    assert len(envs.env_method("render")) == 3
    envs.close()


def test_what_sb3_cannot_take_is_a_one_line_error():
    with vector.make(cartpole, num_envs=2) as puffer, pytest.raises(APIUsageError, match="autoreset='same_step'"):
        vector.to_sb3(puffer)
    with vector.make(CountingEnv, num_envs=4, num_workers=2, batch_size=2, backend=MP, autoreset="same_step") as puffer:
        with pytest.raises(APIUsageError, match="returns batches of 2 of 4 rows"):
            vector.to_sb3(puffer)
    with vector.make("classic/probe_dict", num_envs=2, autoreset="same_step") as puffer:
        with pytest.raises(
            APIUsageError, match=r"leaves mix dtypes .* wrap the raw env in .*FlattenObservation"
        ) as info:
            vector.to_sb3(puffer)
        assert "\n" not in str(info.value)
    with vector.make(cartpole, num_envs=2, autoreset="same_step") as puffer:
        puffer.single_action_space = gymnasium.spaces.Tuple((gymnasium.spaces.Discrete(2),) * 2)
        with pytest.raises(APIUsageError, match=r"SB3 cannot take the action space Tuple.*takes Box, Discrete"):
            vector.to_sb3(puffer)


@pytest.mark.slow
def test_sb3_ppo_learns_cartpole_through_multiprocessing():
    # rl-baselines3-zoo's CartPole-v1 PPO settings, at most 100k steps, on 2 worker processes.
    envs = vector.make("classic/cartpole", num_envs=8, num_workers=2, backend=MP, seed=0, autoreset="same_step")
    envs = vector.to_sb3(envs)
    schedule = functools.partial(_linear, 1e-3)
    model = PPO(
        "MlpPolicy",
        envs,
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=schedule,
        clip_range=functools.partial(_linear, 0.2),
        seed=0,
        device="cpu",
    )
    solved = StopWhenSolved(episodes=20, mean_return=400)
    model.learn(total_timesteps=100_000, callback=solved)
    returns = [info["r"] for info in model.ep_info_buffer]
    envs.close()
    assert solved.at_step is not None, f"mean return of the last 20 of 100k steps: {np.mean(returns[-20:]):.1f}"
    assert len(returns) >= 20 and np.mean(returns[-20:]) >= 400


class StopWhenSolved(BaseCallback):
    """Stops training once the last ``episodes`` episodes average ``mean_return`` or more
    (the rest of the budget would only confirm it), and records the step it happened at."""

    def __init__(self, episodes: int, mean_return: float):
        super().__init__()
        self.episodes, self.mean_return = episodes, mean_return
        self.at_step: int | None = None

    def _on_step(self) -> bool:
        recent = [info["r"] for info in self.model.ep_info_buffer][-self.episodes :]
        if len(recent) == self.episodes and np.mean(recent) >= self.mean_return:
            self.at_step = self.num_timesteps
            return False
        return True


def _linear(start: float, progress_remaining: float) -> float:
    return start * progress_remaining
