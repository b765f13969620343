"""`puffer_core.train.checkpoint`: a checkpoint is data, never code, and a crash mid-save
never costs the last good one.

tests/data/checkpoints/puffer-train-1.pt was written by `puffer train classic/probe_1
--steps 512 --num-envs 4 --set hidden_size=4` before checkpoints were read with
weights_only=True: the layout users have on disk.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from optional import require
from plugin_site import puffer_env, run_puffer_many
from stored_run import OLD_CHECKPOINT

from puffer_core.errors import APIUsageError

require("torch")
require("matplotlib")
import torch  # noqa: E402

from puffer_core import train  # noqa: E402
from puffer_core.train import checkpoint as checkpoints  # noqa: E402


class CreatesAFile:
    """Unpickled, it would create ``path``: the shape of a malicious checkpoint."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture
def run_dir(tmp_path):
    """A real run's directory (a short probe run)."""
    out = tmp_path / "run"
    train.ppo("classic/probe_1", 256, out=out, num_envs=8, hidden_size=8)
    return out


def _poison(run: Path, marker: Path) -> None:
    """Replace run/policy.pt by the same checkpoint with an object that creates ``marker``."""
    data = torch.load(run / "policy.pt", weights_only=True)
    data["extra"] = {"note": CreatesAFile(marker)}
    torch.save(data, run / "policy.pt")


def test_a_checkpoint_that_would_run_code_is_refused_and_runs_nothing(run_dir, tmp_path):
    marker = tmp_path / "pwned"
    _poison(run_dir, marker)
    with pytest.raises(checkpoints.UnsafeCheckpointError, match=r"holds a reference to .*open, which would run code"):
        train.load(run_dir)
    with pytest.raises(checkpoints.UnsafeCheckpointError):
        train.ppo(resume=run_dir, steps=512)
    with pytest.raises(checkpoints.UnsafeCheckpointError):
        train.evaluate(run_dir, episodes=1)
    assert not marker.exists()


def test_puffer_eval_and_resume_refuse_it_in_one_line(run_dir, tmp_path):
    marker = tmp_path / "pwned"
    _poison(run_dir, marker)
    cases = [("eval", str(run_dir)), ("train", "--resume", str(run_dir), "--steps", "512")]
    for args, proc in zip(cases, run_puffer_many(cases, puffer_env(None), preload=("torch",))):
        assert proc.returncode == 1, (args, proc.stderr)
        assert "which would run code on load: refused" in proc.stderr, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr, (args, proc.stderr)
    assert not marker.exists()


def test_a_checkpoint_from_before_the_change_still_loads_and_plays():
    saved = train.load(OLD_CHECKPOINT)
    assert saved.env == "classic/probe_1" and saved.step == 512 and saved.settings().hidden_size == 4
    assert len(train.evaluate(OLD_CHECKPOINT, episodes=2).returns) == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "puffer-train/0"}, "old layout ('puffer-train/0') this puffer-core cannot read: retrain"),
        ({"format": "puffer-train/99"}, "written by a newer puffer-core"),
        ({"format": "something-else"}, "is not a puffer train checkpoint"),
        ({"config": {"hidden_size": 4, "turbo": True}}, "unknown PPO setting(s) 'turbo'"),
        ({"config": {"learning_rate": float("nan")}}, "the saved settings are not valid: learning_rate must be"),
        ({"config": {"hidden_size": 10**9}}, "hidden_size must be ≥ 1 and ≤ 16,384"),
        ({"env_kwargs": ["--rm"]}, "field 'env_kwargs' is a list"),
        ({"sneaky": 1}, "unknown fields ['sneaky']"),
    ],
)
def test_what_a_checkpoint_holds_is_checked(tmp_path, change, message):
    data = torch.load(OLD_CHECKPOINT, weights_only=True)
    for key, value in change.items():
        data[key] = {**data[key], **value} if key == "config" else value
    path = tmp_path / "policy.pt"
    torch.save(data, path)
    with pytest.raises(APIUsageError) as caught:
        train.load(path)
    assert message in str(caught.value) and str(path) in str(caught.value)


def test_a_save_killed_midway_leaves_the_previous_checkpoint(run_dir):
    before = train.load(run_dir)
    # A child writes a newer checkpoint into the run and is SIGKILLed after the bytes are
    # written but before they are in place (fsync is where a slow disk keeps a save longest).
    script = textwrap.dedent(
        f"""
        import os, signal
        from puffer_core.train import checkpoint
        saved = checkpoint.load({str(run_dir)!r})
        saved.step += 1000
        os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)
        checkpoint.save({str(run_dir)!r}, saved)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    left = sorted(os.listdir(run_dir))
    assert len([name for name in left if name.startswith(".policy.pt.") and name.endswith(".tmp.pt")]) == 1, left
    after = train.load(run_dir)
    assert after.step == before.step
    # The next save sweeps the dead writer's temporary file.
    checkpoints.save(run_dir, after)
    assert not [name for name in os.listdir(run_dir) if name.startswith(".policy.pt.")]


def test_a_checkpoints_size_does_not_grow_with_the_episodes_of_its_run(run_dir):
    """probe_1 ends an episode every step: a run of 10**7 steps saves no more than one of 256."""
    from puffer_core.train.archive import check_archive
    from puffer_core.train.curve import Curve

    short_run = check_archive(run_dir / "policy.pt").pickle_bytes
    saved = train.load(run_dir)
    curve = Curve.from_state(saved.curve)
    for step in range(saved.step + 8, 10**7, 8):
        for _ in range(8):
            curve.add_episode(step, 1.0, 1)
        if step % 8192 == 0:
            curve.add_row(step=step, seconds=step / 1e5, steps_per_second=1e5, policy_loss=0.0, learning_rate=1e-3)
    saved.curve, saved.step = curve.to_state(), 10**7
    checkpoints.save(run_dir, saved)
    long_run = check_archive(run_dir / "policy.pt").pickle_bytes
    assert long_run < short_run + 512 * 1024, (short_run, long_run)
    loaded = train.load(run_dir)
    assert Curve.from_state(loaded.curve).episode_count == curve.episode_count > 9 * 10**6


def test_a_run_from_before_the_bounded_curve_resumes_its_curve(tmp_path):
    run = tmp_path / "old"
    run.mkdir()
    (run / "policy.pt").write_bytes(OLD_CHECKPOINT.read_bytes())
    old = torch.load(OLD_CHECKPOINT, weights_only=True)
    assert old["format"] == "puffer-train/1" and old["curve"]["episodes"]
    curve = train.ppo(resume=run, steps=1024)
    assert curve.episode_count > len(old["curve"]["episodes"])
    assert [row["step"] for row in curve.rows[: len(old["curve"]["rows"])]] == [r["step"] for r in old["curve"]["rows"]]
    assert train.load(run).curve["episode_count"] == curve.episode_count
    assert torch.load(run / "policy.pt", weights_only=True)["format"] == checkpoints.FORMAT
