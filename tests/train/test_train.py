"""`puffer train` / `puffer_core.train`: agents learn through Puffer Core.

The probes (puffer_core.plugins.builtin.probes) say what a correct learner must reach: every probe, in its
plain, nested-Dict and 2-agent variants, on Serial and Multiprocessing. A learner that used
the step after an episode's end (next-step autoreset) or the rows of dead agents would miss
their values. CartPole is solved and the saved policy plays it back.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from crashing_probe import CrashingProbe
from optional import require
from plugin_site import puffer_env, run_puffer, run_puffer_many, write_plugin

from puffer_core.emulation import emulate
from puffer_core.errors import APIUsageError, SpaceError, UnknownEnvError
from puffer_core.plugins.builtin.probes import probe_expectations
from puffer_core.postprocess import EpisodeStats
from puffer_core.testing import played_frames

require("torch")
require("matplotlib")
import torch  # noqa: E402

from puffer_core import train  # noqa: E402

GAMMA = 0.5  # a small discount makes a learner that uses masked rows miss probes 1 and 4 too
PROBES = [f"classic/probe_{n}{variant}" for n in range(1, 6) for variant in ("", "_dict", "_2agents")]


def trained_policy(out) -> tuple[train.Policy, object]:
    import puffer_core

    saved = train.load(out)
    env = puffer_core.make(saved.env)
    policy = train.Policy(env.obs_layout, env.action_space, saved.config["hidden_size"])
    policy.load_state_dict(saved.policy)
    return policy, env


@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
@pytest.mark.parametrize("env_id", PROBES)
def test_probes_reach_their_expected_values_and_actions(tmp_path, env_id, backend):
    assert_probe_learned(tmp_path, env_id, backend)


@pytest.mark.parametrize("env_id", [probe for probe in PROBES if not probe.endswith("_2agents")])
def test_probes_learn_through_native_batches(tmp_path, env_id):
    # Multiprocessing: each worker hosts one native batch of its envs (gymnasium's SyncVectorEnv of the probe).
    assert_probe_learned(tmp_path, env_id, "multiprocessing", native=True)


def assert_probe_learned(tmp_path, env_id: str, backend: str, native: bool = False) -> None:
    # 2-agent variants count two rows per env step and half of them are masked at times.
    steps = 32_768 if env_id.endswith("_2agents") else 16_384
    workers = 2 if backend == "multiprocessing" else None
    curve = train.ppo(
        env_id, steps, out=tmp_path, gamma=GAMMA, backend=backend, num_workers=workers, seed=1, native=native
    )
    assert curve.rows[-1]["step"] >= steps and curve.episodes
    policy, env = trained_policy(tmp_path)
    expected = probe_expectations(env_id, GAMMA)
    with torch.no_grad():
        distribution, values = policy(torch.from_numpy(expected.flat_observations(env)))
    np.testing.assert_allclose(values.numpy(), expected.values, atol=0.1, err_msg=f"{env_id}: V")
    if expected.best_actions is not None:
        np.testing.assert_array_equal(distribution.mode().numpy(), expected.best_actions, err_msg=f"{env_id}: actions")


# ------------------------------------------------------------------ recurrent policies, async batches

#: The probes' canonical observations as episodes play them, by row of the expectation table:
#: a recurrent policy's value of an observation depends on what came before it in the episode.
EPISODES = {
    "classic/probe_3": [[0, 1]],
    "classic/probe_5": [[0], [1]],
    "classic/probe_3_2agents": [[0, 1], [2]],
    "classic/probe_1": [[0]],
    "classic/probe_4_2agents": [[0], [1]],
}


def values_through_episodes(policy, env, expected) -> tuple[np.ndarray, np.ndarray]:
    """(values, greedy actions) of the table's rows, each row's state carried from its episode's start."""
    flat = torch.from_numpy(expected.flat_observations(env))
    values, actions = np.zeros(len(flat)), np.zeros(len(flat), np.int64)
    for episode in EPISODES[expected.env_id]:
        state = policy.initial_state(1)
        for row in episode:
            with torch.no_grad():
                distribution, value, state = policy.act(flat[row : row + 1], state)
            values[row], actions[row] = float(value[0]), int(distribution.mode()[0])
    return values, actions


def half_batches(backend: str) -> dict:
    """Settings for batches of half the envs: on Multiprocessing each of 2 workers holds one
    batch, so which worker's batch comes next varies from step to step."""
    workers = {"num_workers": 2} if backend == "multiprocessing" else {}
    return {"backend": backend, "batch_size": 16, **workers}


@pytest.mark.parametrize(
    ("env_id", "settings"),
    [
        ("classic/probe_3", {"policy": "lstm"}),
        ("classic/probe_5", {"policy": "lstm"}),
        ("classic/probe_3_2agents", {"policy": "lstm", **half_batches("multiprocessing")}),
        ("classic/probe_3", {"policy": "lstm", "autoreset": "same_step"}),
        ("classic/probe_1", half_batches("serial")),
        ("classic/probe_4_2agents", half_batches("multiprocessing")),
        ("classic/probe_3", {"autoreset": "same_step"}),
    ],
    ids=lambda value: value if isinstance(value, str) else "-".join(f"{k}={v}" for k, v in value.items()),
)
def test_probes_reach_their_values_with_lstm_async_batches_and_same_step_autoreset(tmp_path, env_id, settings):
    steps = 32_768 if env_id.endswith("_2agents") else 16_384
    curve = train.ppo(env_id, steps, out=tmp_path, gamma=GAMMA, seed=1, num_envs=32, **settings)
    assert curve.rows[-1]["step"] >= steps
    saved = train.load(tmp_path)
    import puffer_core

    env = puffer_core.make(env_id)
    policy = train.Policy(env.obs_layout, env.action_space, saved.config["hidden_size"], saved.config["policy"])
    policy.load_state_dict(saved.policy)
    expected = probe_expectations(env_id, GAMMA)
    values, actions = values_through_episodes(policy, env, expected)
    np.testing.assert_allclose(values, expected.values, atol=0.1, err_msg=f"{env_id}: V")
    if expected.best_actions is not None:
        np.testing.assert_array_equal(actions, expected.best_actions, err_msg=f"{env_id}: actions")


MEMORY_RUNS = [
    ("classic/probe_memory", {"backend": "serial"}),
    ("classic/probe_memory", half_batches("serial")),
    ("classic/probe_memory", {"backend": "multiprocessing", "num_workers": 2}),
    ("classic/probe_memory", half_batches("multiprocessing")),
    ("classic/probe_memory", {"backend": "serial", "autoreset": "same_step"}),
    ("classic/probe_memory_2agents", {"backend": "serial"}),
    ("classic/probe_memory_2agents", half_batches("multiprocessing")),
]


def share_correct(curve, episodes: int = 200) -> float:
    """The share of the last ``episodes`` training episodes that answered the cue right (return > 0)."""
    returns = np.array([episode_return for _, episode_return, _ in curve.episodes[-episodes:]])
    assert len(returns) == episodes
    return float((returns > 0).mean())


@pytest.mark.parametrize("policy", ["lstm", "mlp"])
@pytest.mark.parametrize(
    ("env_id", "settings"),
    MEMORY_RUNS,
    ids=lambda value: value if isinstance(value, str) else "-".join(f"{k}={v}" for k, v in value.items()),
)
def test_the_memory_probe_needs_the_lstm(env_id, settings, policy):
    steps = 40_000 if env_id.endswith("_2agents") else 20_000
    curve = train.ppo(env_id, steps, policy=policy, hidden_size=16, num_envs=32, seed=1, **settings)
    correct = share_correct(curve)
    if policy == "lstm":
        assert correct >= 0.95, correct
    else:  # without memory the query is a coin toss, whatever the policy does
        assert 0.35 <= correct <= 0.65, correct


@pytest.mark.ray
def test_the_memory_probe_learns_on_ray_with_half_batches(local_ray):
    settings = {"policy": "lstm", "hidden_size": 16, "num_envs": 32, "seed": 1, **half_batches("ray")}
    curve = train.ppo("classic/probe_memory", 20_000, **settings, num_workers=2)
    assert share_correct(curve) >= 0.95


def test_training_goes_on_through_crashes_and_leaves_them_out(tmp_path):
    curve = train.ppo(
        CrashingProbe, 16_384, out=tmp_path, gamma=GAMMA, backend="multiprocessing", num_workers=2, on_fault="restart"
    )
    assert curve.rows[-1]["step"] >= 16_384
    env = emulate(EpisodeStats(CrashingProbe()))
    policy = train.Policy(env.obs_layout, env.action_space, 64)
    policy.load_state_dict(train.load(tmp_path).policy)
    with torch.no_grad():
        _, value = policy(torch.from_numpy(env.flatten_observation(np.zeros(1, np.float32))[None]))
    assert abs(float(value[0]) - 1.0) < 0.1  # the crashed steps (reward 0, truncated) did not drag V below 1


@pytest.mark.slow
def test_cartpole_is_solved_and_the_saved_policy_plays_it(tmp_path):
    out = tmp_path / "cartpole"
    proc = run_puffer(
        None, "train", "classic/cartpole", "--steps", "150000", "--seed", "0", "--out", str(out), "--json", timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["mean_return"] >= 475, summary
    assert sorted(os.listdir(out)) == ["config.toml", "curve.csv", "curve.png", "policy.pt", "tensorboard"]
    proc = run_puffer(None, "eval", str(out), "--episodes", "10", "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    played = json.loads(proc.stdout)
    assert played["episodes"] == 10 and played["mean_return"] >= 475, played


def test_cartpole_is_solved_through_its_native_batch(tmp_path):
    # gymnasium's numpy CartPoleVectorEnv: one array step for each worker's envs.
    out = tmp_path / "cartpole"
    proc = run_puffer(
        None, "train", "classic/cartpole", "--steps", "150000", "--seed", "0", "--out", str(out), "--json",
        "--backend", "multiprocessing", "--num-workers", "2", "--set", "native=true", timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    # Learned (random actions last about 22 steps); the batch draws its starts from one generator,
    # so the run is another than the per-env path's, which reaches 475 with these steps and seed.
    assert summary["mean_return"] >= 350, summary
    assert train.load(out).config["native"] is True


def test_train_records_evaluation_episodes_of_the_trained_policy(tmp_path):
    out, video = tmp_path / "run", tmp_path / "eval.gif"
    proc = run_puffer(
        None, "train", "classic/cartpole", "--steps", "1024", "--out", str(out), "--json",
        "--record", str(video), "--record-episodes", "2", "--set", "num_envs=8",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    recorded = json.loads(proc.stdout)["recorded"]
    assert recorded["episodes"] == 2 and recorded["record"] == str(video)
    # Each episode's steps, the first reset and the reset between the two (next-step autoreset).
    assert played_frames(video, 50) == sum(recorded["lengths"]) + 2
    proc = run_puffer(None, "eval", str(out), "--episodes", "1", "--record", str(tmp_path / "again.mp4"))
    assert proc.returncode == 0 and f"recorded them to {tmp_path / 'again.mp4'}" in proc.stdout, proc.stderr


def test_curve_files_are_what_someone_would_look_at(tmp_path):
    curve = train.ppo("classic/probe_2", 4096, out=tmp_path, num_envs=8, rollout_steps=64)
    rows = list(csv.DictReader(open(tmp_path / "curve.csv")))
    assert len(rows) == len(curve.rows) == 8
    assert int(rows[-1]["step"]) == 4096 and float(rows[-1]["steps_per_second"]) > 0
    assert {"mean_return", "policy_loss", "value_loss", "entropy", "approx_kl"} <= set(rows[0])
    png = (tmp_path / "curve.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("classic/mountaincar_continuous", {}),  # Box action
        ("classic/probe_mixed", {}),  # a Tuple of Discrete and Box: one Box
        ("classic/probe_dict", {}),  # Dict observation and Dict action: MultiDiscrete
        ("classic/probe_multiagent", {"backend": "multiprocessing", "num_workers": 2}),
    ],
)
def test_every_flat_action_kind_trains(tmp_path, env_id, kwargs):
    curve = train.ppo(env_id, 2048, out=tmp_path, num_envs=4, rollout_steps=64, **kwargs)
    assert curve.rows[-1]["step"] >= 2048 and all(np.isfinite(row["value_loss"]) for row in curve.rows)


def test_resume_continues_the_curve_and_refuses_another_env(tmp_path):
    first = train.ppo("classic/probe_1", 2048, out=tmp_path, num_envs=8, rollout_steps=32)
    assert len(first.rows) == 8
    with pytest.raises(APIUsageError, match="already has 2,048 of its 2,048 steps"):
        train.ppo(resume=tmp_path)
    with pytest.raises(APIUsageError, match="trained on 'classic/probe_1', not 'classic/probe_2'"):
        train.ppo("classic/probe_2", resume=tmp_path, steps=4096)
    with pytest.raises(APIUsageError, match="already holds a run"):
        train.ppo("classic/probe_1", 1024, out=tmp_path)
    more = train.ppo(resume=tmp_path, steps=4096)
    assert len(more.rows) == 16 and more.rows[-1]["step"] == 4096
    assert [r["step"] for r in more.rows[:8]] == [r["step"] for r in first.rows]  # the old rows, then new ones
    assert more.rows[8]["seconds"] > first.rows[-1]["seconds"]
    assert train.load(tmp_path).step == 4096
    # The episodes too: those before the resume, then as many again (probe_1's are all alike).
    assert more.episode_count == 2 * first.episode_count == more.bins.total == more.rows[-1]["episodes"]
    assert first.episode_count >= 1000 and more.rows[7]["episodes"] == first.episode_count


def test_bad_input_is_one_line(tmp_path, site):
    write_plugin(site, "texty", TEXT_PLUGIN)
    train.ppo("classic/probe_1", 256, out=tmp_path / "probe_1", num_envs=8)
    (tmp_path / "taken.gif").write_bytes(b"keep")
    probe = ("train", "classic/probe_1", "--steps", "64", "--out", str(tmp_path / "new"))
    cases = [
        (("train", "classic/probe_2", "--resume", str(tmp_path / "probe_1")), "trained on 'classic/probe_1', not"),
        (("train", "classic/cartpol"), "Did you mean: classic/cartpole?"),
        (("train", "texty/words", "--steps", "64"), "Text"),
        ((*probe, "--set", "gamma=2"), "gamma must be a number in [0, 1], got 2"),
        ((*probe, "--set", "nonsense=1"), "unknown PPO setting 'nonsense'"),
        ((*probe, "--set", "ent_coef=nan"), "ent_coef must be a number in [0, 100], got 'nan'"),
        ((*probe, "--set", "ent_coef=NaN"), "ent_coef must be a number in [0, 100], got nan"),
        ((*probe, "--set", "learning_rate=Infinity"), "learning_rate must be a number in (0, 10], got inf"),
        ((*probe, "--set", "num_envs=100000000"), "num_envs must be ≥ 1 and ≤ 65,536, got 100,000,000"),
        ((*probe, "--set", "hidden_size=1000000000"), "hidden_size must be ≥ 1 and ≤ 16,384, got 1,000,000,000"),
        ((*probe, "--set", "rollout_steps=1000000", "--set", "num_envs=65536"), "the rollout needs"),
        ((*probe, "--set", "norm_adv=maybe"), "norm_adv must be true or false, got 'maybe'"),
        ((*probe, "--set", "checkpoint_seconds=-1"), "checkpoint_seconds must be a number in [0, 604800], got -1"),
        ((*probe, "--set", "backend=threads"), "backend must be one of"),
        ((*probe, "--set", "policy=gru"), "policy must be one of 'mlp', 'lstm', got 'gru'"),
        ((*probe, "--set", "autoreset=disabled"), "autoreset must be one of 'next_step', 'same_step'"),
        ((*probe, "--set", "batch_size=40"), "batch_size 40 is more than num_envs 32"),
        ((*probe, "--set", "batch_size=5", "--set", "num_envs=8"), "batch_size 5 must divide num_envs 8"),
        (("train", "texty/nan_rewards", "--steps", "4096", "--out", str(tmp_path / "nan")), "diverged at step"),
        (("train",), "give an ENV_ID"),
        (("eval", str(tmp_path / "nothing")), "does not exist"),
        (("train", "classic/cartpole", "--record", str(tmp_path / "x.cast")), "record it to .mp4 or .gif instead"),
        (("eval", str(tmp_path / "probe_1"), "--record", str(tmp_path / "x.gif")), "no render mode a recording"),
        (("eval", str(tmp_path / "probe_1"), "--record", str(tmp_path / "taken.gif")), "the file exists"),
        (("eval", str(tmp_path / "probe_1"), "--overwrite"), "--overwrite replaces the --record file"),
    ]
    # Forked from one process that has imported torch, which `puffer train` needs (seconds each).
    procs = run_puffer_many([args for args, _ in cases], puffer_env(site), preload=("torch",))
    for (args, fragment), proc in zip(cases, procs):
        # eval and resume first say which env and kwargs the checkpoint makes them build
        lines = [line for line in proc.stderr.strip().splitlines() if not line.startswith(("playing ", "resuming "))]
        assert proc.returncode != 0 and fragment in proc.stderr, (args, proc.stderr)
        assert len(lines) == 1, (args, proc.stderr)  # click's usage errors too (see tests/cli/test_cli_errors.py)
        assert "Traceback" not in proc.stderr
    assert (tmp_path / "taken.gif").read_bytes() == b"keep"
    assert not (tmp_path / "new").exists() or not os.listdir(tmp_path / "new")


def test_an_out_directory_is_the_users_own_and_its_lock_never_followed(tmp_path):
    train.ppo("classic/probe_1", 64, out=tmp_path / "new" / "run", num_envs=8)
    assert (tmp_path / "new" / "run").stat().st_mode & 0o777 == 0o700
    victim = tmp_path / "bashrc"
    victim.write_text("alias ll='ls -l'\n")
    linked, shared, theirs = (tmp_path / name for name in ("linked", "shared", "theirs"))
    for directory in (linked, shared, theirs):
        directory.mkdir()
    (linked / ".puffer-train.lock").symlink_to(victim)  # `ln -s ~/.bashrc OUT/.puffer-train.lock`
    os.chmod(shared, 0o1777)
    cases = [(linked, "is a symbolic link, not a lock file of yours"), (shared, "is writable by others (mode 1777)")]
    if os.geteuid() == 0:  # another user's directory, made earlier (/tmp/myrun): only root can make one here
        os.chown(theirs, 12345, 12345)
        cases.append((theirs, "belongs to uid 12345, not to you"))
    args = [("train", "classic/probe_1", "--steps", "64", "--out", str(out)) for out, _ in cases]
    for (out, fragment), proc in zip(cases, run_puffer_many(args, puffer_env(None), preload=("torch",))):
        assert proc.returncode == 1 and fragment in proc.stderr and str(out) in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert sorted(os.listdir(out)) == ([".puffer-train.lock"] if out == linked else [])
    assert victim.read_text() == "alias ll='ls -l'\n"


def test_python_api_errors_name_the_problem():
    with pytest.raises(UnknownEnvError):
        train.ppo("classic/nope", 64)
    with pytest.raises(SpaceError, match="Text"):
        train.ppo(TextEnv, 64)


def test_a_diverging_run_stops_and_keeps_its_last_finite_checkpoint(tmp_path):
    def make():
        return NanAfter(steps=500)  # per env: 8 envs pass 4,000 steps

    with pytest.raises(train.TrainingDiverged, match=r"training diverged at step [\d,]+: the .*nan") as caught:
        train.ppo(make, 8192, out=tmp_path, num_envs=8, rollout_steps=32, checkpoint_seconds=0)
    assert "policy.pt keeps the last finite checkpoint" in str(caught.value)
    assert len(str(caught.value).splitlines()) == 1
    saved = train.load(tmp_path)
    assert 0 < saved.step < caught.value.step
    assert all(bool(torch.isfinite(weight).all()) for weight in saved.policy.values())
    assert not (tmp_path / ".puffer-train.lock").exists()


def test_eval_names_what_it_builds_and_takes_kwarg_overrides(tmp_path):
    train.ppo("classic/probe_1", 256, out=tmp_path, num_envs=8, env_kwargs={"number": 2})  # 1-step episodes
    cases = [("eval", str(tmp_path), "--episodes", "2"), ("eval", str(tmp_path), "--kwarg", "number=3")]
    saved, overridden = run_puffer_many(cases, puffer_env(None), preload=("torch",))
    source = tmp_path / "policy.pt"
    assert saved.returncode == 0 and overridden.returncode == 0, (saved.stderr, overridden.stderr)
    assert f"playing 'classic/probe_1' with number=2 (from {source}; --kwarg K=V overrides)" in saved.stderr
    assert "mean length 1.0" in saved.stdout
    assert "playing 'classic/probe_1' with number=3" in overridden.stderr
    assert "mean length 2.0" in overridden.stdout  # probe 3's episodes take two steps


@contextlib.contextmanager
def training_in_background(out):
    """A long `puffer train classic/cartpole` run into ``out``, yielded once its first checkpoint
    is there; killed on the way out unless the block ended it."""
    args = ["train", "classic/cartpole", "--steps", "10000000", "--out", str(out), "--set", "checkpoint_seconds=0"]
    proc = subprocess.Popen([sys.executable, "-m", "puffer_core.cli.main", *args], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (out / "policy.pt").exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert (out / "policy.pt").exists(), "no checkpoint within 120 s"
        yield proc
    finally:
        if proc.returncode is None:  # not reaped by the block
            proc.kill()
            proc.communicate(timeout=60)


def test_a_second_run_into_a_held_directory_is_refused(tmp_path):
    out = tmp_path / "run"
    with training_in_background(out) as proc:
        held = f"{out} is in use by another puffer train run (pid {proc.pid})"
        with pytest.raises(APIUsageError, match=re.escape(held)):
            train.ppo(resume=out, steps=20_000_000)
        with pytest.raises(APIUsageError, match=re.escape(held)):
            train.ppo("classic/cartpole", 1024, out=out)
    # SIGKILLed, the run holds nothing: the kernel dropped its lock.
    train.ppo(resume=out, steps=train.load(out).step + 64, num_envs=2, rollout_steps=32)


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_run_leaves_a_loadable_checkpoint(tmp_path, signal_number):
    out = tmp_path / "run"
    with training_in_background(out) as proc:
        proc.send_signal(signal_number)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal_number, stderr
    # Without a terminal: the device and progress lines at the first update, then one line saying the stop.
    last = stderr.strip().splitlines()[-1]
    assert re.match(rf"stopped at step [\d,]+ by {signal.Signals(signal_number).name}", last), stderr
    assert "--resume" in last and "error" not in stderr, stderr
    saved = train.load(out)
    assert saved.step > 0 and saved.env == "classic/cartpole"
    played = train.evaluate(out, episodes=2)
    assert len(played.returns) == 2


TEXT_ENV = '''
import gymnasium
import numpy as np

class TextEnv(gymnasium.Env):
    """Observes text, which no flat buffer can hold."""

    observation_space = gymnasium.spaces.Text(8)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "hello", {}

    def step(self, action):
        return "hello", 0.0, True, False, {}


class NanAfter(gymnasium.Env):
    """Reward 1 each step, then NaN once ``steps`` steps have been taken (across resets)."""

    observation_space = gymnasium.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, steps=0):
        self.left = steps

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.left -= 1
        return np.zeros(1, np.float32), (1.0 if self.left > 0 else float("nan")), False, self.left % 16 == 0, {}
'''

TEXT_PLUGIN = (
    TEXT_ENV
    + """
import puffer_core
from puffer_core import EnvSpec


@puffer_core.hookimpl
def puffer_envs():
    return [EnvSpec("texty/words", TextEnv, description="observes text"),
            EnvSpec("texty/nan_rewards", NanAfter, description="rewards turn NaN")]
"""
)

_namespace: dict = {}
exec(TEXT_ENV, _namespace)
TextEnv = _namespace["TextEnv"]
NanAfter = _namespace["NanAfter"]


def test_a_run_too_short_for_an_episode_says_so_not_zero_episodes(tmp_path):
    """Pendulum's episodes last 200 steps: a run of 64 ends none of them."""
    proc = run_puffer(None, "train", "classic/pendulum", "--steps", "64", "--num-envs", "1", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "no episode finished within the steps run (more --steps finish some)" in proc.stdout, proc.stdout
    assert "0 episodes" not in proc.stdout
