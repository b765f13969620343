"""Evaluation during training (puffer_core.train.evaluator): with eval_seconds, the policy is played on an env of
its own, the scores logged, and the best checkpoint kept as best.pt, which puffer eval plays."""

from __future__ import annotations

from optional import require

require("torch")
require("matplotlib")
require("tensorboard")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from puffer_core import train  # noqa: E402
from puffer_core.train import checkpoint as checkpoints  # noqa: E402


def test_evaluations_are_logged_and_the_best_is_kept_beside_the_last(tmp_path):
    curve = train.ppo("classic/cartpole", 24_576, out=tmp_path, num_envs=8, eval_seconds=0.01, eval_episodes=2)
    events = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    evaluated = events.Scalars("eval/episodic_return")
    assert len(evaluated) >= 3 and [e.step for e in evaluated] == sorted(e.step for e in evaluated)
    best, last = checkpoints.load(tmp_path / "best.pt"), checkpoints.load(tmp_path / "policy.pt")
    assert best.env == last.env == "classic/cartpole" and last.step == curve.rows[-1]["step"]
    # best.pt is the policy as it was at the first evaluation with the highest mean return.
    assert best.step == max(evaluated, key=lambda e: (e.value, -e.step)).step
    played = train.evaluate(tmp_path / "best.pt", episodes=2)  # puffer eval takes either file
    assert len(played.returns) == 2


def test_without_eval_seconds_there_is_no_best(tmp_path):
    train.ppo("classic/probe_1", 512, out=tmp_path, num_envs=8)
    assert not (tmp_path / "best.pt").exists()
