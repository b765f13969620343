"""send() checks actions in the main process: a wrong action is an APIUsageError naming the
row and what is allowed, and the vector env stays usable; check_actions=False turns it off."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from puffer_core import vector
from puffer_core.errors import APIUsageError, WorkerError
from puffer_core.vector.actions import ActionCheck

BACKENDS = ["serial", "multiprocessing", pytest.param("ray", marks=pytest.mark.ray)]


def check_for(space: spaces.Space) -> ActionCheck:
    from puffer_core.vector.base import action_buffer_spec

    return ActionCheck(space, *action_buffer_spec(space))


# --------------------------------------------------------------------------- the check alone


@pytest.mark.parametrize(
    ("space", "actions"),
    [
        (spaces.Discrete(2), np.array([0, 1, 1, 0])),
        (spaces.Discrete(2), [1, 0]),  # a list of ints
        (spaces.Discrete(3), np.array([2, 0], np.int8)),
        (spaces.Discrete(300), np.array([299, 0], np.uint16)),
        (spaces.Discrete(2), np.array([True, False])),
        (spaces.MultiDiscrete([4, 2, 3]), np.array([[3, 1, 2], [0, 0, 0]])),
        (spaces.MultiDiscrete([3, 3]), np.array([[2, 2]], np.int32)),
        (spaces.MultiBinary(3), np.array([[1, 0, 1]], np.int8)),
        (spaces.MultiBinary(3), np.ones((2, 3), bool)),
        (spaces.Box(-1.0, 1.0, (2,), np.float32), np.array([[0.5, -0.5]], np.float64)),
        (spaces.Box(-1.0, 1.0, (2,), np.float32), np.array([[5, -5]])),  # ints are fine, bounds are the env's
        (spaces.Box(-1.0, 1.0, (2,), np.float32), np.full((1, 2), 3e38, np.float32)),
    ],
)
def test_valid_actions_pass(space, actions):
    check = check_for(space)
    shaped = check.shaped(actions, len(actions))
    check(shaped)  # raises if wrong
    check(shaped)  # the dtype accepted the first time is not re-checked, the range is


@pytest.mark.parametrize(
    ("space", "actions", "message"),
    [
        (
            spaces.Discrete(2),
            np.array([0, 1, 1, 5]),
            "send(): action 5 in row 3 is out of range for Discrete(2): allowed 0–1",
        ),
        (spaces.Discrete(2), np.array([0, -1]), "action -1 in row 1 is out of range for Discrete(2): allowed 0–1"),
        (spaces.Discrete(300), np.array([-1, 0], np.int8), "action -1 in row 0 is out of range for Discrete(300)"),
        (spaces.Discrete(3), np.array([0, 3], ">i8"), "action 3 in row 1 is out of range for Discrete(3)"),
        (spaces.Discrete(2), np.array([0, 2**64 - 1], np.uint64), "in row 1 is out of range for Discrete(2)"),
        (
            spaces.Discrete(1),
            np.array([False, True]),
            "action True in row 1 is out of range for Discrete(1): allowed 0–0",
        ),
        (
            spaces.MultiDiscrete([4, 2, 3]),
            np.array([[3, 1, 2], [0, 2, 0]]),
            "action [0 2 0] in row 1 is out of range for MultiDiscrete([4 2 3]): element 1 is 2, allowed 0–1",
        ),
        (
            spaces.MultiDiscrete([3, 3]),
            np.array([[0, 0], [0, 0], [-2, 1]]),
            "action [-2  1] in row 2 is out of range for MultiDiscrete([3 3]): element 0 is -2, allowed 0–2",
        ),
        (
            spaces.MultiBinary(3),
            np.array([[1, 0, 1], [0, 0, 2]], np.int8),
            "action [0 0 2] in row 1 is out of range for MultiBinary(3): element 2 is 2, allowed 0–1",
        ),
        (
            spaces.Discrete(3, start=-1),
            np.array([-1, 0, 2]),
            "action 2 in row 2 is out of range for Discrete(3, start=-1): allowed -1 to 1",
        ),
        (
            spaces.Box(-1.0, 1.0, (2,), np.float32),
            np.array([[0.0, 0.0], [0.0, np.nan]]),
            "action [ 0. nan] in row 1 is not finite (element 1 is nan) for Box(-1.0, 1.0, (2,), float32): "
            "actions must be finite numbers (no NaN or inf)",
        ),
        (
            spaces.Box(-1.0, 1.0, (2,), np.float32),
            np.array([[-np.inf, 0.0]], np.float32),
            "action [-inf   0.] in row 0 is not finite (element 0 is -inf)",
        ),
        (
            spaces.Discrete(2),
            np.array([0.0, 1.0]),
            "send(): actions for Discrete(2) must be integers (int64 expected), got float64; "
            "convert them, e.g. actions.astype(np.int64)",
        ),
        (
            spaces.MultiDiscrete([2, 2]),
            np.array([[0, 1.5]], np.float32),
            "must be integers (int64 expected), got float32",
        ),
        (
            spaces.Box(-1.0, 1.0, (1,), np.float32),
            np.array([[1j]]),
            "must be real numbers (float32 expected), got complex",
        ),
        (spaces.Discrete(2), np.array(["0", "1"]), "must be integers (int64 expected), got <U1"),
    ],
)
def test_invalid_actions_name_the_row_and_what_is_allowed(space, actions, message):
    check = check_for(space)
    with pytest.raises(APIUsageError) as info:
        check(check.shaped(actions, len(actions)))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("rows", [1, 4, 8, 9, 64])  # up to 8 actions are checked as Python ints, more by numpy
@pytest.mark.parametrize("bad", [7, -1, 2**62])
def test_small_and_large_batches_are_range_checked_alike(rows, bad):
    two = rows in (4, 9)  # MultiDiscrete rows: 8 and 18 actions
    check = check_for(spaces.MultiDiscrete([7, 7]) if two else spaces.Discrete(7))
    shape = (rows, 2) if two else (rows,)
    actions = np.full(shape, 6, np.int64)
    check(actions)  # the edge passes
    actions.flat[-1] = bad
    with pytest.raises(APIUsageError, match=f"in row {rows - 1} .*is out of range"):
        check(actions)


def test_a_long_row_is_shown_abridged():
    space = spaces.MultiDiscrete([5] * 200)
    actions = np.zeros((2, 200), np.int64)
    actions[1, 150] = 9
    check = check_for(space)
    with pytest.raises(APIUsageError, match=r"MultiDiscrete of shape \(200,\): element 150 is 9, allowed 0–4") as info:
        check(actions)
    assert "..." in str(info.value) and len(str(info.value)) < 300


def test_the_shape_check_keeps_its_message_and_reshapes_flat_rows():
    check = check_for(spaces.MultiDiscrete([2, 2]))
    assert check.shaped(np.zeros((2, 1, 2), int), 2).shape == (2, 2)  # same rows and size: reshaped
    with pytest.raises(APIUsageError, match=r"send\(\) expects actions of shape \(2, 2\) \(one row per agent row"):
        check.shaped(np.zeros(3, int), 2)


# --------------------------------------------------------------------------- through send()


@pytest.fixture(params=BACKENDS)
def backend(request):
    if request.param == "ray":
        request.getfixturevalue("local_ray")
    return request.param


def test_bad_action_is_refused_and_the_next_send_works(backend):
    workers = None if backend == "serial" else 2
    with vector.make("classic/cartpole", num_envs=4, num_workers=workers, backend=backend, seed=3) as envs:
        envs.reset()
        for bad, message in (
            ([0, 1, 5, 0], "send(): action 5 in row 2 is out of range for Discrete(2): allowed 0–1"),
            (np.array([0.0, 1.0, 0.0, 1.0]), "must be integers (int64 expected), got float64"),
            ([0, 1, 0], "send() expects actions of shape (4,)"),
        ):
            with pytest.raises(APIUsageError) as info:
                envs.send(bad)
            assert message in str(info.value)
        obs, rewards, terminals, truncations, infos = envs.step(np.array([0, 1, 0, 1]))
        assert obs.shape == (4, 4) and rewards.tolist() == [1.0] * 4 and not envs.closed
        envs.step(np.array([1, 1, 1, 1]))


@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_the_row_of_a_partial_batch_is_named_with_its_env(backend):
    workers = None if backend == "serial" else 2
    with vector.make("classic/cartpole", num_envs=4, num_workers=workers, batch_size=2, backend=backend) as envs:
        envs.async_reset(0)
        seen = set()
        for _ in range(50):  # Multiprocessing returns whichever worker is ready: either may come twice
            *_, env_ids, _ = envs.recv()
            first = int(env_ids[0])
            with pytest.raises(APIUsageError) as info:
                envs.send([0, 7])
            where = "row 1" if first == 0 else f"row 1 (env {first + 1})"
            assert f"action 7 in {where} is out of range" in str(info.value)
            envs.send([0, 1])
            seen.add(first)
            if seen == {0, 2}:
                break
        assert seen == {0, 2}  # both batches were checked


def test_multi_agent_rows_name_env_and_agent():
    with vector.make("classic/probe_multiagent", num_envs=2) as envs:
        assert envs.agents_per_env == 3
        envs.reset(seed=0)
        actions = np.zeros(6, np.int64)
        actions[4] = 2
        with pytest.raises(APIUsageError, match=r"action 2 in row 4 \(env 1, agent 'agent_1'\) is out of range"):
            envs.send(actions)
        envs.step(np.ones(6, np.int64))


def test_multidiscrete_and_box_envs_through_send():
    with vector.make("classic/probe_dict", num_envs=2) as envs:  # flat MultiDiscrete([4 2 3])
        envs.reset(seed=0)
        with pytest.raises(APIUsageError, match=r"action \[3 2 0\] in row 1 .* element 1 is 2, allowed 0–1"):
            envs.send(np.array([[0, 0, 0], [3, 2, 0]]))
        envs.step(np.array([[3, 1, 2], [0, 0, 0]]))
    with vector.make("classic/pendulum", num_envs=2) as envs:  # Box(-2, 2, (1,))
        envs.reset(seed=0)
        with pytest.raises(APIUsageError, match=r"in row 0 is not finite"):
            envs.send(np.array([[np.nan], [0.0]], np.float32))
        envs.step(np.array([[1], [-1]]))  # ints for a Box are fine
        envs.step(np.array([[9.0], [-9.0]]))  # beyond the bounds: the env clips, as in Gymnasium


def test_check_actions_false_lets_a_bad_action_reach_the_env():
    with vector.make("classic/cartpole", num_envs=2, check_actions=False) as envs:
        assert envs.check_actions is False
        envs.reset(seed=0)
        with pytest.raises(WorkerError, match=r"env 1 raised AssertionError in step"):
            envs.step(np.array([0, 5]))  # CartPole's own assertion, inside the env
        with pytest.raises(APIUsageError, match="shape"):
            envs.send(np.zeros(3, int))  # the shape is still checked


def test_check_actions_is_on_by_default_and_must_be_a_bool():
    with vector.make("classic/cartpole", num_envs=1) as envs:
        assert envs.check_actions is True
    with pytest.raises(APIUsageError, match=r"^check_actions must be True or False, got 'no'$"):
        vector.make("classic/cartpole", num_envs=1, check_actions="no")
