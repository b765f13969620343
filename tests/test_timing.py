"""The one timing harness (puffer_core.vector.timing): interleaved rounds, errors kept per setting,
steps per second, and the CPU-time comparison of two step loops."""

from __future__ import annotations

import gymnasium
import pytest

from puffer_core import vector
from puffer_core.vector.timing import Turn, interleaved, run_rounds, time_async, time_raw


def test_rounds_interleave_the_settings_and_alternate_their_order():
    turns: list[Turn] = []

    def measure(turn: Turn) -> float:
        turns.append(turn)
        return 10.0 * turn.index + turn.round

    results = run_rounds(["a", "b", "c"], measure, 3, alternate=True)
    assert [(t.index, t.round) for t in turns] == [
        (0, 0), (1, 0), (2, 0),
        (2, 1), (1, 1), (0, 1),
        (0, 2), (1, 2), (2, 2),
    ]  # fmt: skip
    assert [t.left for t in turns] == list(range(9, 0, -1))  # what a time budget is split over
    assert [r.figures for r in results] == [[0, 1, 2], [10, 11, 12], [20, 21, 22]]
    assert [r.best for r in results] == [2, 12, 22] and all(r.error is None for r in results)


def test_a_setting_that_fails_keeps_its_error_and_is_not_measured_again():
    calls = []
    progress = []

    def measure(turn: Turn) -> float:
        calls.append(turn.index)
        if turn.index == 1:
            raise RuntimeError("first line\n  Traceback (most recent call last):\n  x\nValueError: the cause")
        return 1.0

    results = run_rounds(["ok", "broken"], measure, 2, progress=lambda *a: progress.append(a))
    assert calls == [0, 1, 0]
    assert results[1].figures == [] and results[1].best is None
    assert results[1].error.startswith("RuntimeError: first line") and "ValueError: the cause" in results[1].error
    assert "\n" not in results[1].error
    assert progress == [("ok", 0, 4), ("broken", 1, 4), ("ok", 2, 4), ("broken", 3, 4)]  # skipped turns too


def test_fatal_errors_stop_the_run():
    def measure(turn: Turn) -> float:
        raise KeyError(turn.index)

    with pytest.raises(KeyError):
        run_rounds(["a"], measure, 2, fatal=True)
    with pytest.raises(KeyError):
        run_rounds(["a", "b"], measure, 2, fatal=lambda turn, exc: turn.index == 1)
    only_first = run_rounds(["a", "b"], measure, 1, fatal=lambda turn, exc: turn.round > 0)
    assert [r.error for r in only_first] == ["KeyError: 0", "KeyError: 1"]


def test_steps_per_second_of_a_vector_env_and_of_a_raw_env():
    with vector.make("classic/cartpole", num_envs=2, seed=0) as envs:
        assert time_async(envs, 0.05, 0.01, envs.batch_size, envs.single_action_space, seed=0) > 0
    env = gymnasium.make("CartPole-v1")
    try:
        assert time_raw(env, 0.05, 0.01, seed=0) > 0
    finally:
        env.close()


def test_interleaved_compares_two_step_loops():
    def loop():
        env = gymnasium.make("CartPole-v1")
        env.reset(seed=0)
        return env.step, env.reset, [0, 1] * 50

    result = interleaved(loop(), loop(), steps=400, rounds=4)
    assert set(result) == {"raw_sps", "emulated_sps", "ratio"}
    assert result["raw_sps"] > 0 and result["emulated_sps"] > 0 and 0.2 < result["ratio"] < 5
