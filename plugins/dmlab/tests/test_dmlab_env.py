"""DMLabEnv against the deepmind_lab TEST DOUBLE: what reaches the Lab, and what comes back."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from puffer_plugin_dmlab.actions import ACTION_NAMES, IMPALA_ACTION_SET

SMALL = {"width": 8, "height": 6}


def make(level="seekavoid_arena_01", **kwargs):
    from puffer_plugin_dmlab.envs import DMLabEnv

    return DMLabEnv(level=level, **{**SMALL, **kwargs})


def named(lab, action) -> dict[str, int]:
    return lab.named_action(action)


def zero_action(lab) -> np.ndarray:
    """The full-space action that sends 0 for every component (index = value - min)."""
    return np.array([-entry["min"] for entry in lab.action_spec()])


def test_lab_gets_string_config_a_list_of_observations_and_the_renderer(lab_double):
    env = make(config={"episodeLengthSeconds": 2, "allowHoldOutLevels": True, "mixerSeed": 7}, renderer="hardware")
    lab = env.lab
    assert lab.level == "seekavoid_arena_01"
    assert lab.config == {
        "width": "8",
        "height": "6",
        "episodeLengthSeconds": "2",
        "allowHoldOutLevels": "true",
        "mixerSeed": "7",
    }
    assert lab.observation_names == ["RGB_INTERLEAVED"] and lab.renderer == "hardware"


def test_default_observation_is_rgb_interleaved_height_width_3(lab_double):
    env = make(width=10, height=4)
    assert env.observation_space == spaces.Box(0, 255, (4, 10, 3), np.uint8)
    obs, info = env.reset(seed=0)
    assert obs.shape == (4, 10, 3) and obs.dtype == np.uint8 and info == {}
    assert env.observation_space.contains(obs)


def test_several_observations_become_a_dict_and_text_becomes_bytes(lab_double):
    env = make(observations=["RGB_INTERLEAVED", "INSTR", "VEL.TRANS"], text_length=32)
    assert isinstance(env.observation_space, spaces.Dict)
    assert env.observation_space["INSTR"] == spaces.Box(0, 255, (32,), np.uint8)
    assert env.observation_space["VEL.TRANS"].shape == (3,)
    obs, _ = env.reset(seed=1)
    assert env.observation_space.contains(obs)
    text = bytes(obs["INSTR"]).rstrip(b"\0").decode()
    assert text == env.lab.observations()["INSTR"]


def test_dynamic_or_unknown_observations_are_refused_by_name(lab_double):
    with pytest.raises(ValueError, match=r"DEBUG\.PLAYERS\.HEALTH"):
        make(observations=["DEBUG.PLAYERS.HEALTH"])
    with pytest.raises(ValueError, match="Unknown observation"):
        make(observations=["NOT_AN_OBSERVATION"])


def test_default_action_set_is_impalas_nine_in_action_spec_order(lab_double):
    env = make()
    assert env.action_space == spaces.Discrete(9)
    env.reset(seed=0)
    for index, (label, components) in enumerate(IMPALA_ACTION_SET.items()):
        env.step(index)
        sent = env.lab.actions[-1]
        assert sent.dtype == np.intc and sent.shape == (7,), label
        expected = {name: components.get(name, 0) for name in ACTION_NAMES}
        assert named(env.lab, sent) == expected, label
    # Spot-check positions against the documented action_spec() order.
    assert env.lab.actions[0].tolist() == [0, 0, 0, 1, 0, 0, 0]  # forward
    assert env.lab.actions[6].tolist() == [-20, 0, 0, 1, 0, 0, 0]  # forward + look left
    assert env.lab.actions[8].tolist() == [0, 0, 0, 0, 1, 0, 0]  # fire


def test_actions_follow_the_labs_action_spec_order_not_a_fixed_one(lab_double, monkeypatch):
    class ShuffledLab(lab_double.Lab):
        ACTION_SPEC = tuple(sorted(lab_double.ACTION_SPEC, key=lambda entry: entry["name"]))  # alphabetical

    monkeypatch.setattr(lab_double, "Lab", ShuffledLab)
    env = make()
    env.reset(seed=0)
    env.step(0)  # forward
    assert [entry["name"] for entry in env.lab.action_spec()][:2] == ["CROUCH", "FIRE"]
    assert named(env.lab, env.lab.actions[-1]) == {name: int(name == "MOVE_BACK_FORWARD") for name in ACTION_NAMES}
    full = make(action_set="full")
    full.reset(seed=0)
    action = zero_action(full.lab)
    action[[entry["name"] for entry in full.lab.action_spec()].index("JUMP")] += 1
    full.step(action)
    assert named(full.lab, full.lab.actions[-1]) == {name: int(name == "JUMP") for name in ACTION_NAMES}


def test_full_action_space_covers_every_component_range(lab_double):
    env = make(action_set="full")
    assert env.action_space == spaces.MultiDiscrete([1025, 1025, 3, 3, 2, 2, 2])
    env.reset(seed=0)
    env.step(np.array([0, 1024, 0, 2, 1, 1, 1]))  # every component at an extreme
    assert env.lab.actions[-1].tolist() == [-512, 512, -1, 1, 1, 1, 1]
    env.step(zero_action(env.lab))
    assert env.lab.actions[-1].tolist() == [0, 0, 0, 0, 0, 0, 0]
    with pytest.raises(ValueError, match="outside"):
        env.step(np.array([0, 0, 3, 0, 0, 0, 0]))


def test_custom_action_sets(lab_double):
    env = make(action_set={"jump_forward": {"JUMP": 1, "MOVE_BACK_FORWARD": 1}, "crouch": {"CROUCH": 1}})
    assert env.action_space == spaces.Discrete(2)
    env.reset(seed=0)
    env.step(0)
    assert env.lab.actions[-1].tolist() == [0, 0, 0, 1, 0, 1, 0]
    rows = make(action_set=[(0, 0, 0, 0, 0, 0, 1), (5, -5, 0, 0, 0, 0, 0)])
    rows.reset(seed=0)
    rows.step(1)
    assert rows.lab.actions[-1].tolist() == [5, -5, 0, 0, 0, 0, 0]
    with pytest.raises(ValueError, match="outside"):
        make(action_set={"spin": {"LOOK_LEFT_RIGHT_PIXELS_PER_FRAME": 600}})
    with pytest.raises(ValueError, match="does not have"):
        make(action_set={"fly": {"FLY": 1}})
    with pytest.raises(ValueError, match="not one of"):
        make(action_set="minimal")


def test_frame_skip_is_passed_as_num_steps_and_rewards_add_up(lab_double):
    env = make(num_steps=3)
    env.reset(seed=0)
    _obs, reward, terminated, truncated, info = env.step(0)  # forward: the double pays 1 per frame
    assert env.lab.step_calls == [3] and reward == 3.0 and not terminated and not truncated and info == {}
    with pytest.raises(ValueError, match="num_steps"):
        make(num_steps=0)


def test_seed_reaches_the_lab_and_fixes_later_episodes(lab_double):
    first, second = make(), make()
    first.reset(seed=123)
    second.reset(seed=123)
    assert first.lab.reset_calls[-1]["seed"] == 123
    first.reset()
    second.reset()
    derived = first.lab.reset_calls[-1]["seed"]
    assert derived == second.lab.reset_calls[-1]["seed"] and isinstance(derived, int) and 0 <= derived < 2**31
    third = make()
    third.reset(seed=124)
    third.reset()
    assert third.lab.reset_calls[-1]["seed"] != derived
    big = make()
    big.reset(seed=2**40 + 5)  # Lab seeds are C ints
    assert big.lab.reset_calls[-1]["seed"] == 5


def test_episode_end_is_terminated_with_the_last_frame_and_needs_reset(lab_double):
    env = make(num_steps=4, config={"episodeLengthSeconds": 0.2})  # 12 frames = 3 agent steps
    obs, _ = env.reset(seed=9)
    ends = []
    for _ in range(3):
        obs, _reward, terminated, truncated, _ = env.step(0)
        ends.append((terminated, truncated))
    assert ends == [(False, False), (False, False), (True, False)]
    assert obs.shape == (6, 8, 3)  # the Lab has no observations() after the end: the last frame
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(0)
    env.reset()
    assert not env.step(0)[2]


def test_language_levels_observe_the_instruction_by_default(lab_double):
    from puffer_core import make_raw

    env = make_raw("dmlab/language_select_described_object", width=8, height=6)
    assert env.lab.level == "contributed/dmlab30/language_select_described_object"
    assert env.lab.observation_names == ["RGB_INTERLEAVED", "INSTR"]
    assert set(env.observation_space.spaces) == {"RGB_INTERLEAVED", "INSTR"}


def test_level_cache_compiles_a_level_once_per_directory(lab_double, tmp_path):
    first = make(level_cache_dir=tmp_path / "cache")
    first.reset(seed=0)
    cached = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert cached == ["seekavoid_arena_01.pk3"]
    before = (tmp_path / "cache" / "seekavoid_arena_01.pk3").stat().st_mtime_ns
    second = make(level_cache_dir=tmp_path / "cache")
    second.reset(seed=0)
    assert (tmp_path / "cache" / "seekavoid_arena_01.pk3").stat().st_mtime_ns == before


def test_render_returns_the_last_frame_and_close_closes_the_lab(lab_double):
    env = make(render_mode="rgb_array")
    obs, _ = env.reset(seed=2)
    np.testing.assert_array_equal(env.render(), obs)
    env.close()
    assert env.lab.close() is False  # already closed by env.close()


def test_a_seeded_reset_replays_the_episode_in_a_new_lab(lab_double):
    """The engine carries state across the episodes of one Lab (the double too, as the real one
    does): reset(seed=s) starts a new Lab once one has run, so the same seed gives the same
    episode; an unseeded reset keeps the Lab."""
    env = make()
    first, _ = env.reset(seed=5)
    again, _ = env.reset(seed=5)
    np.testing.assert_array_equal(first, again)
    assert len(lab_double.Lab.instances) == 2
    env.reset()
    assert len(lab_double.Lab.instances) == 2
