"""`puffer_core.train.logs`: TensorBoard event files and W&B runs a researcher reads.

The event files are read back with TensorBoard's own reader; the W&B run is written
offline (no network, no account) and read back from its run directory.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest
from optional import require
from plugin_site import puffer_env, run_puffer

from puffer_core.plugins.builtin.probes import DebugProbeEnv
from puffer_core.train.logs import SCALARS

require("torch")
require("matplotlib")
require("tensorboard")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from tensorboard.plugins.hparams import plugin_data_pb2  # noqa: E402

from puffer_core import train  # noqa: E402

CLEANRL_SCALARS = {"charts/episodic_return", "charts/episodic_length", *SCALARS.values()}


class ScoredProbe(DebugProbeEnv):
    """Probe 1 whose episode-end info carries the env's own statistics, as NetHack's does."""

    def __init__(self):
        super().__init__(1)
        self.episodes = 0

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if terminated or truncated:
            self.episodes += 1
            info = {"episode_stats": {"score": 7, "depth": 1 + self.episodes % 2}}
        return obs, reward, terminated, truncated, info


def read_events(directory) -> EventAccumulator:
    events = EventAccumulator(str(directory / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    return events


def test_tensorboard_holds_cleanrl_scalars_the_envs_statistics_and_the_settings(tmp_path):
    curve = train.ppo(ScoredProbe, 2048, out=tmp_path, num_envs=8, rollout_steps=32, learning_rate=0.002)
    events = read_events(tmp_path)
    scalars = set(events.Tags()["scalars"])
    assert CLEANRL_SCALARS | {"env/score", "env/depth"} <= scalars, scalars
    assert not {"env/episode_return", "env/episode_length", "env/env_id"} & scalars
    # Each update's episodes summed up at its step: their mean, least, greatest and count.
    updates = [row["step"] for row in curve.rows]
    returns = events.Scalars("charts/episodic_return")
    assert [e.step for e in returns] == updates and [e.step for e in events.Scalars("charts/SPS")] == updates
    assert sum(e.value for e in events.Scalars("charts/episodes")) == curve.episode_count
    for name in ("charts/episodic_return", "charts/episodic_length"):
        low, mean, high = (events.Scalars(f"{name}{end}") for end in ("_min", "", "_max"))
        assert all(a.value <= b.value <= c.value for a, b, c in zip(low, mean, high)), name
    assert {e.value for e in events.Scalars("charts/episodic_length")} == {1.0}  # probe 1: one step each
    assert [e.value for e in events.Scalars("losses/value_loss")] == pytest.approx(
        [row["value_loss"] for row in curve.rows]
    )
    assert {e.value for e in events.Scalars("env/score")} == {7.0}  # the mean of each update's episodes
    assert all(1.0 <= e.value <= 2.0 for e in events.Scalars("env/depth"))
    learning_rates = [e.value for e in events.Scalars("charts/learning_rate")]
    assert learning_rates == pytest.approx([row["learning_rate"] for row in curve.rows]) and learning_rates[0] < 0.002
    content = events.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    hparams = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info.hparams
    assert hparams["learning_rate"].number_value == pytest.approx(0.002)
    assert hparams["num_envs"].number_value == 8 and hparams["env"].string_value == "ScoredProbe"
    assert "hyperparameters/text_summary" in events.Tags()["tensors"]


def _bytes(folder) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def test_tensorboard_grows_by_the_update_whatever_the_episode_rate(tmp_path):
    """classic/probe_1 ends an episode at every step: with updates of 256 steps and of 1,024 (four times
    the episodes each), the event files grow by the same few hundred bytes per update."""
    per_update = {}
    for rollout_steps in (32, 128):
        sizes = []
        for updates in (8, 24):
            out = tmp_path / f"rollout-{rollout_steps}-{updates}"
            steps = updates * 8 * rollout_steps
            train.ppo("classic/probe_1", steps, out=out, num_envs=8, rollout_steps=rollout_steps,
                      checkpoint_seconds=3600)  # fmt: skip
            sizes.append(_bytes(out / "tensorboard"))
        per_update[rollout_steps] = (sizes[1] - sizes[0]) / 16
    print(f"bytes per update: {per_update}")
    assert per_update[32] < 1024
    assert per_update[32] == pytest.approx(per_update[128], abs=16)


def test_a_resumed_run_appends_to_its_logs_and_steps_go_on(tmp_path):
    train.ppo("classic/probe_1", 1024, out=tmp_path, num_envs=8, rollout_steps=32)
    curve = train.ppo(resume=tmp_path, steps=2048)
    steps = [e.step for e in read_events(tmp_path).Scalars("charts/SPS")]
    assert steps == [row["step"] for row in curve.rows] == list(range(256, 2049, 256))


def test_a_run_without_a_directory_writes_no_logs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    train.ppo("classic/probe_1", 256, num_envs=8)
    assert list(tmp_path.iterdir()) == []


def wandb_records(path):
    """The records of a W&B run file (``run-ID.wandb``), decoded with wandb's own protobuf.

    The file is W&B's header (``:W&B``, a magic number and a version: 7 bytes), then
    LevelDB-style log records in 32 KiB blocks: a CRC, a length and a type (full, first,
    middle, last) before each chunk; a block's tail too short for a header is padding.
    """
    from wandb.proto import wandb_internal_pb2

    data, block, position, chunks = path.read_bytes(), 32 * 1024, 7, b""
    assert data[:4] == b":W&B", data[:7]
    while position + 7 <= len(data):
        left = block - position % block
        if left < 7:
            position += left
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        if kind == 0:  # zero padding to the end of the block
            position += left
            continue
        chunks += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # full, last
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunks)
            chunks = b""
            yield record


def item_key(item) -> str:
    return item.key or "/".join(item.nested_key)


def test_wandb_offline_gets_the_same_scalars_and_the_settings(tmp_path):
    require("wandb")
    out = tmp_path / "run"
    proc = run_puffer(
        None, "train", "classic/probe_2", "--steps", "1024", "--set", "num_envs=8", "--out", str(out),
        "--wandb", "puffer-test", "--wandb-group", "tests", "--json",
        extra_env={"WANDB_MODE": "offline", "WANDB_CONFIG_DIR": str(tmp_path / "config"), "WANDB_SILENT": "true"},
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    files = list((out / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(files) == 1, list((out / "wandb").iterdir())
    records = list(wandb_records(files[0]))
    history = [{item_key(i): json.loads(i.value_json) for i in r.history.item} for r in records if r.history.item]
    assert CLEANRL_SCALARS <= set().union(*history), history
    updates = [point for point in history if "charts/SPS" in point]
    assert [point["global_step"] for point in updates] == [256, 512, 768, 1024]  # one point per update
    assert all(point["charts/episodic_length"] == 1 for point in history if "charts/episodic_length" in point)
    config = {item_key(i) for r in records for i in (r.config.update if r.HasField("config") else r.run.config.update)}
    assert {"learning_rate", "num_envs", "env"} <= config, config
    assert any(r.run.run_group == "tests" for r in records if r.HasField("run"))


def test_a_resumed_run_continues_its_wandb_run_and_logs_no_step_twice(tmp_path):
    require("wandb")
    out = tmp_path / "run"
    offline = {"WANDB_MODE": "offline", "WANDB_CONFIG_DIR": str(tmp_path / "config"), "WANDB_SILENT": "true"}
    for steps in ("1024", "2048"):
        where = ["classic/probe_2", "--out", str(out)] if steps == "1024" else ["--resume", str(out)]
        proc = run_puffer(None, "train", *where, "--steps", steps, "--set", "num_envs=8", "--wandb", "puffer-test",
                          "--json", extra_env=offline, timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    run_id = json.loads((out / "wandb-run.json").read_text())["id"]
    files = sorted((out / "wandb").glob("offline-run-*/run-*.wandb"))
    assert [file.name for file in files] == [f"run-{run_id}.wandb"] * 2  # one W&B run, resumed
    points = [
        {item_key(i): json.loads(i.value_json) for i in record.history.item}
        for file in files
        for record in wandb_records(file)
        if record.history.item
    ]
    updates = [point["global_step"] for point in points if "charts/SPS" in point]
    assert updates == list(range(256, 2049, 256))  # each update once, the resumed ones after the first run's


@pytest.mark.parametrize(
    ("hidden", "args", "message"),
    [
        ("wandb", ("--wandb", "puffer-test"), "needs wandb, which is missing; pip install 'puffer-core[wandb]'"),
        ("tensorboard", (), "the tensorboard package, which is missing; pip install 'puffer-core[train]'"),
    ],
)
def test_a_missing_logging_package_is_one_line_before_training(tmp_path, hidden, args, message):
    # None in sys.modules is Python's own way to make an import fail: the package is hidden
    # from this process only, as if it were not installed.
    script = (
        f"import sys; sys.modules[{hidden!r}] = None; sys.argv = sys.argv[:1] + sys.argv[1:]; "
        "from puffer_core.cli.main import main; main()"
    )
    out = tmp_path / "run"
    command = [sys.executable, "-c", script, "train", "classic/probe_1", "--steps", "64", "--out", str(out), *args]
    proc = subprocess.run(command, capture_output=True, text=True, env=puffer_env(None), timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()  # refused before anything was built
