"""Episode statistics: empty infos on ordinary steps, a flat dict of numbers at the end."""

from __future__ import annotations

import enum
from types import MappingProxyType

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from puffer_core.emulation import GymnasiumEmulator, PettingZooEmulator
from puffer_core.postprocess import EpisodeStats, MultiAgentEpisodeStats, numeric_scalars


class Status(enum.IntEnum):
    RUNNING = 0
    DEATH = 1


class ScriptedEnv(gymnasium.Env):
    """Rewards 0.5, 1.5, 2.5…; ends after ``length`` steps; infos full of clutter."""

    observation_space = spaces.Box(0, 10, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, length=3, truncate=False):
        self.length = length
        self.truncate = truncate

    def reset(self, seed=None, options=None):
        self.t = 0
        return np.zeros(1, np.float32), {"big": np.zeros(1000), "seed": seed}

    def step(self, action):
        self.t += 1
        done = self.t >= self.length
        info = {
            "big": np.zeros(1000),  # dropped: not a scalar
            "name": "text",  # dropped: not numeric
            "t": self.t,
            "score": np.float32(10.0 * self.t),
            "lives": np.array(3),
            "dead": np.bool_(done),
            "status": Status.DEATH if done else Status.RUNNING,
        }
        if done:
            info["episode_stats"] = {"depth": np.int64(7), "notes": ["x"]}
            info["episode_return"] = -999.0  # ours wins
        obs = np.full(1, self.t, np.float32)
        return obs, self.t - 0.5, done and not self.truncate, done and self.truncate, info


def test_infos_are_empty_on_ordinary_steps_and_on_reset():
    env = EpisodeStats(ScriptedEnv(length=3))
    obs, info = env.reset(seed=1)
    assert info == {} and obs.shape == (1,)
    for _ in range(2):
        _, _, term, trunc, info = env.step(0)
        assert info == {} and not term and not trunc


def test_kept_keys_pass_on_reset_as_on_steps():
    class Masked(ScriptedEnv):
        def reset(self, seed=None, options=None):
            obs, info = super().reset(seed, options)
            return obs, {**info, "mask": np.array([1, 0], np.int8)}

    env = EpisodeStats(Masked(length=3), keep_keys=("mask", "t"))
    _, info = env.reset(seed=1)
    assert list(info) == ["mask"] and info["mask"].tolist() == [1, 0]  # "big" and "seed" still dropped
    _, _, _, _, info = env.step(0)
    assert info == {"t": 1}


@pytest.mark.parametrize("truncate", [False, True])
def test_episode_end_reports_return_length_and_numeric_env_stats(truncate):
    env = EpisodeStats(ScriptedEnv(length=3, truncate=truncate))
    env.reset()
    for _ in range(3):
        _, _, term, trunc, info = env.step(1)
    assert (term, trunc) == (not truncate, truncate)
    assert info == {
        "episode_return": 0.5 + 1.5 + 2.5,
        "episode_length": 3,
        "t": 3,
        "score": 30.0,
        "lives": 3,
        "dead": True,
        "status": 1,
        "depth": 7,
    }
    # Plain Python types only: cheap to pickle across processes, safe to json.dump.
    assert {type(v) for v in info.values()} <= {int, float, bool}
    assert type(info["status"]) is int


def test_counters_restart_with_each_episode():
    env = EpisodeStats(ScriptedEnv(length=2))
    for _ in range(2):
        env.reset()
        env.step(0)
        _, _, _, _, info = env.step(0)
        assert info["episode_return"] == 2.0 and info["episode_length"] == 2


def test_episode_stats_is_a_transparent_gymnasium_wrapper():
    inner = ScriptedEnv()
    env = EpisodeStats(inner)
    assert env.unwrapped is inner
    assert env.observation_space == inner.observation_space and env.action_space == inner.action_space


def test_emulated_cartpole_reports_its_episode():
    emu = GymnasiumEmulator(EpisodeStats(gymnasium.make("CartPole-v1")))
    emu.reset(seed=0)
    steps, total = 0, 0.0
    while True:
        _, reward, term, trunc, info = emu.step(0)  # always left: falls over fast
        steps += 1
        total += reward
        if term or trunc:
            break
        assert info == {}
    assert info["episode_length"] == steps and info["episode_return"] == total


def test_numeric_scalars_ignores_non_mappings():
    assert numeric_scalars(None) == {} and numeric_scalars({"a": [1], "b": 2.5}) == {"b": 2.5}


def test_numeric_scalars_reads_any_mapping_not_only_dicts():
    # The plain-dict fast path must not drop other Mappings, at either level.
    info = MappingProxyType({"a": np.float32(1.5), "episode_stats": MappingProxyType({"depth": np.int64(3)})})
    assert numeric_scalars(info) == {"a": 1.5, "depth": 3}
    assert numeric_scalars({"episode_stats": None, "b": True}) == {"b": True}


class TwoAgents:
    """'a' ends after 2 steps, 'b' after 3; infos are noisy on every step."""

    possible_agents = ["a", "b"]
    metadata: dict = {}

    def observation_space(self, agent):
        return spaces.Box(0, 10, (1,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = ["a", "b"]
        return {a: np.zeros(1, np.float32) for a in self.agents}, {a: {"junk": "x"} for a in self.agents}

    def step(self, actions):
        self.t += 1
        acting = list(self.agents)
        obs = {a: np.full(1, self.t, np.float32) for a in acting}
        rewards = {a: 1.0 if a == "a" else 2.0 for a in acting}
        terminations = {a: (a == "a" and self.t == 2) for a in acting}
        truncations = {a: (a == "b" and self.t == 3) for a in acting}
        infos = {a: {"junk": "x", "kills": self.t} for a in acting}
        self.agents = [a for a in acting if not (terminations[a] or truncations[a])]
        return obs, rewards, terminations, truncations, infos

    def render(self):
        return "frame"

    def close(self):
        pass


def test_multi_agent_stats_land_in_each_agents_info_when_it_ends():
    env = MultiAgentEpisodeStats(TwoAgents())
    _, infos = env.reset()
    assert infos == {"a": {}, "b": {}}
    _, _, _, _, infos = env.step({"a": 0, "b": 0})
    assert infos == {"a": {}, "b": {}}
    _, _, _, _, infos = env.step({"a": 0, "b": 0})
    assert infos["a"] == {"episode_return": 2.0, "episode_length": 2, "kills": 2}
    assert infos["b"] == {}
    _, _, _, _, infos = env.step({"b": 0})
    assert infos == {"b": {"episode_return": 6.0, "episode_length": 3, "kills": 3}}
    # Forwarded Parallel API.
    assert env.possible_agents == ["a", "b"] and env.agents == [] and env.render() == "frame"
    assert env.observation_space("a").shape == (1,)


def test_multi_agent_stats_under_the_emulator_send_only_final_infos():
    emu = PettingZooEmulator(MultiAgentEpisodeStats(TwoAgents()))
    _, infos = emu.reset()
    assert infos == {}
    assert emu.step(np.zeros(2, np.int64))[4] == {}
    assert emu.step(np.zeros(2, np.int64))[4] == {"a": {"episode_return": 2.0, "episode_length": 2, "kills": 2}}
    *_, infos = emu.step(np.zeros(2, np.int64))
    assert infos == {"b": {"episode_return": 6.0, "episode_length": 3, "kills": 3}} and emu.done


def test_multi_agent_stats_converts_aec_envs():
    from pettingzoo.classic import tictactoe_v3

    env = MultiAgentEpisodeStats(tictactoe_v3.env())
    assert hasattr(env.env, "aec_env")  # now a Parallel env
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"player_1", "player_2"}


def test_emulator_counts_through_episode_stats_but_respects_an_overridden_step():
    class Louder(EpisodeStats):
        def step(self, action):
            obs, reward, term, trunc, info = super().step(action)
            return obs, reward * 10, term, trunc, {**info, "loud": True}

    plain = GymnasiumEmulator(EpisodeStats(ScriptedEnv(length=2)))
    loud = GymnasiumEmulator(Louder(ScriptedEnv(length=2)))
    for emu in (plain, loud):
        emu.reset()
        emu.step(0)
    _, reward, _, _, info = plain.step(0)
    assert reward == 1.5 and info["episode_return"] == 2.0 and info["episode_length"] == 2
    assert plain.env.episode_return == 2.0  # the bookkeeping lives on the EpisodeStats object
    _, reward, _, _, info = loud.step(0)
    assert reward == 15.0 and info["loud"] is True and info["episode_return"] == 2.0


def test_the_emulator_and_the_wrapper_report_the_same_episodes():
    # One bookkeeping (EpisodeStats.record_step) behind both paths: the wrapper stepped on its
    # own, and the emulator's compiled step that skips the wrapper's frame.
    alone = EpisodeStats(ScriptedEnv(length=3), keep_keys=("t",))
    emulated = GymnasiumEmulator(EpisodeStats(ScriptedEnv(length=3), keep_keys=("t",)))
    for _ in range(2):
        assert alone.reset()[1] == emulated.reset()[1] == {}
        for _ in range(3):
            *_, info = alone.step(0)
            *_, emulated_info = emulated.step_in_place(0)
            assert info == emulated_info
        assert info["episode_length"] == 3 and info["episode_return"] == 4.5
    assert (alone.episode_return, alone.episode_length) == (emulated.env.episode_return, 3)


def test_copies_count_on_their_own():
    import copy
    import pickle

    env = EpisodeStats(ScriptedEnv(length=5))
    env.reset()
    env.step(0)
    twin, clone = copy.deepcopy(env), pickle.loads(pickle.dumps(env))
    twin.step(0)
    assert (env.episode_length, twin.episode_length, clone.episode_length) == (1, 2, 1)
    assert clone.step(0)[1] == 1.5 and clone.episode_return == 2.0  # counts on from the pickled totals
