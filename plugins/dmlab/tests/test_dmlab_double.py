"""The TEST DOUBLE behaves like the real deepmind_lab module where callers can go wrong.

If the double were lenient, the adapter tests would prove nothing; these pin its
strictness to what python/dmlab_module.c does.
"""

from __future__ import annotations

import deepmind_lab_double as dl
import numpy as np
import pytest

LEVEL = "seekavoid_arena_01"


def make(observations=None, **config):
    config = {"width": "8", "height": "6", **config}
    return dl.Lab(LEVEL, observations if observations is not None else ["RGB_INTERLEAVED"], config=config)


@pytest.mark.parametrize(
    "args, kwargs",
    [
        ((b"seekavoid_arena_01", ["RGB_INTERLEAVED"]), {}),  # level must be str
        ((LEVEL, ("RGB_INTERLEAVED",)), {}),  # observations must be a list
        ((LEVEL, ["RGB_INTERLEAVED"]), {"config": [("width", "8")]}),  # config must be a dict
        ((LEVEL, ["RGB_INTERLEAVED"]), {"config": {"width": 8}}),  # values must be str
        ((LEVEL, ["RGB_INTERLEAVED"]), {"config": {1: "8"}}),  # keys must be str
    ],
)
def test_constructor_rejects_wrong_argument_types(args, kwargs):
    with pytest.raises(TypeError):
        dl.Lab(*args, **kwargs)


def test_constructor_rejects_unknown_observation_renderer_and_level():
    with pytest.raises(ValueError, match="Unknown observation 'RGB_INTERLACED_TYPO'"):
        dl.Lab(LEVEL, ["RGB_INTERLACED_TYPO"])
    with pytest.raises(RuntimeError, match="renderer"):
        dl.Lab(LEVEL, [], renderer="gpu")
    with pytest.raises(RuntimeError, match="Failed to init"):
        dl.Lab("no_such_level", [])
    with pytest.raises(RuntimeError, match="width"):
        dl.Lab(LEVEL, [], config={"width": "wide"})


def test_specs_match_the_real_module():
    lab = make()
    specs = {spec["name"]: spec for spec in lab.observation_spec()}
    assert specs["RGB_INTERLEAVED"]["shape"] == (6, 8, 3) and specs["RGB_INTERLEAVED"]["dtype"] is np.uint8
    assert specs["RGB"]["shape"] == (3, 6, 8)
    assert specs["INSTR"]["dtype"] is str and specs["INSTR"]["shape"] == ()
    assert [a["name"] for a in lab.action_spec()] == [
        "LOOK_LEFT_RIGHT_PIXELS_PER_FRAME",
        "LOOK_DOWN_UP_PIXELS_PER_FRAME",
        "STRAFE_LEFT_RIGHT",
        "MOVE_BACK_FORWARD",
        "FIRE",
        "JUMP",
        "CROUCH",
    ]
    assert lab.action_spec()[0] == {"name": "LOOK_LEFT_RIGHT_PIXELS_PER_FRAME", "min": -512, "max": 512}


def test_action_checks():
    lab = make()
    lab.reset(seed=1)
    good = np.zeros(7, dtype=np.intc)
    with pytest.raises(TypeError):
        lab.step([0] * 7)
    with pytest.raises(ValueError, match=r"dtype np\.intc"):
        lab.step(np.zeros(7, dtype=np.int64))
    with pytest.raises(ValueError, match="shape"):
        lab.step(np.zeros((1, 7), dtype=np.intc))
    with pytest.raises(ValueError, match="shape"):
        lab.step(np.zeros(6, dtype=np.intc))
    too_far = good.copy()
    too_far[2] = 2  # STRAFE_LEFT_RIGHT is in [-1, 1]
    with pytest.raises(ValueError, match="STRAFE_LEFT_RIGHT=2"):
        lab.step(too_far)
    assert lab.step(good) == 0.0


def test_episode_ends_after_its_length_and_then_refuses_to_step():
    lab = make(episodeLengthSeconds="0.1")  # 6 frames
    lab.reset(seed=0)
    forward = np.array([0, 0, 0, 1, 0, 0, 0], dtype=np.intc)
    assert lab.step(forward, num_steps=4) == 4.0 and lab.is_running()
    assert lab.step(forward, num_steps=4) == 2.0 and not lab.is_running()
    assert lab.num_steps() == 8
    with pytest.raises(RuntimeError, match="wrong status to advance"):
        lab.step(forward)
    with pytest.raises(RuntimeError, match="wrong status for call to observations"):
        lab.observations()
    lab.reset()
    assert lab.is_running() and lab.num_steps() == 0


def test_step_before_reset_and_bad_seed():
    lab = make()
    with pytest.raises(RuntimeError, match="wrong status to advance"):
        lab.step(np.zeros(7, dtype=np.intc))
    with pytest.raises(ValueError, match="'seed' must be int or None"):
        lab.reset(seed=1.5)


def test_observations_follow_the_seed():
    a, b = make(), make()
    a.reset(seed=3)
    b.reset(seed=3)
    np.testing.assert_array_equal(a.observations()["RGB_INTERLEAVED"], b.observations()["RGB_INTERLEAVED"])
    assert a.observations()["RGB_INTERLEAVED"].shape == (6, 8, 3)
