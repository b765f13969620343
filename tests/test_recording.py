"""Recording env 0 (`puffer_core.env.recording`, `record=...`, `puffer run
--record`): videos decoded back with imageio, env 0 only, trajectories unchanged, the
file appearing whole, and every bad input a one-line error."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import subprocess
import sys

import gymnasium
import imageio.v3 as iio
import numpy as np
import pytest
from PIL import Image, ImageSequence
from plugin_site import puffer_env, run_puffer, write_plugin

from puffer_core import vector
from puffer_core.env.gif import gif_frame_ms
from puffer_core.env.recording import Recorder, plan_recording, plan_watch, published, receipted
from puffer_core.env.sinks import GIF_NOTE_FRAMES, CastSink, GifSink, text_size
from puffer_core.errors import APIUsageError, MissingDependencyError, PluginError
from puffer_core.specs.declarations import EnvSpec
from puffer_core.testing import played_frames

CARTPOLE_FRAME = (400, 600, 3)  # gymnasium's CartPole rgb_array screen
BACKENDS = ["serial", "multiprocessing"]


def _run(path, backend="serial", steps=30, record=True, **kwargs):
    """Step 2 CartPoles with fixed actions; returns env 0's (observations, ends) per step."""
    workers = {"num_workers": 2} if backend != "serial" else {}
    observations, ends = [], []
    recorded = str(path) if record else None
    with vector.make(
        "classic/cartpole", num_envs=2, backend=backend, seed=3, record=recorded, **workers, **kwargs
    ) as envs:
        obs, _ = envs.reset(seed=3)
        observations.append(obs.copy())
        for t in range(steps):
            obs, _, term, trunc, _ = envs.step(np.array([t % 2, (t // 3) % 2]))
            observations.append(obs.copy())
            ends.append(bool(term[0] or trunc[0]))
    return np.array(observations), ends


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("suffix", [".mp4", ".gif"])
def test_a_video_holds_one_frame_per_reset_and_step_of_env_0(tmp_path, backend, suffix):
    path = tmp_path / f"cartpole{suffix}"
    _run(path, backend, steps=30)
    frames = iio.imread(path, index=None)
    # The first reset, then one frame per step (an autoreset, next-step style, is that step's frame).
    assert played_frames(path, 50) == 31
    assert frames.shape[1:3] == CARTPOLE_FRAME[:2] and frames.shape[-1] in (3, 4)
    assert sorted(os.listdir(tmp_path)) == [path.name]  # env 0 only; no partial file left


def test_the_video_plays_at_the_envs_frame_rate(tmp_path):
    path = tmp_path / "cartpole.mp4"
    _run(path, steps=5)
    assert iio.immeta(path, plugin="pyav" if importlib.util.find_spec("av") else None).get("fps") == pytest.approx(50)


@pytest.mark.parametrize("backend", BACKENDS)
def test_recording_changes_no_trajectory(tmp_path, backend):
    recorded, _ = _run(tmp_path / "a.gif", backend, steps=60)
    plain, _ = _run(None, backend, steps=60, record=False)
    np.testing.assert_array_equal(recorded, plain)


def test_only_env_0_is_wrapped(tmp_path):
    with vector.make("classic/cartpole", num_envs=3, record=str(tmp_path / "x.gif")) as envs:
        kinds = [isinstance(env, Recorder) for env in envs.group.envs]
    assert kinds == [True, False, False]
    with vector.make("classic/cartpole", num_envs=2) as envs:
        assert not any(isinstance(env, Recorder) for env in envs.group.envs)


def test_recording_stops_after_the_episodes_asked_for(tmp_path):
    path = tmp_path / "one.gif"
    recording = plan_recording("classic/cartpole", path, episodes=1)
    with vector.make("classic/cartpole", num_envs=1, seed=0, record=recording) as envs:
        envs.reset(seed=0)
        length = 0
        while True:
            _, _, term, trunc, _ = envs.step(np.zeros(1, dtype=np.int64))
            length += 1
            if term[0] or trunc[0]:
                break
        for _ in range(20):  # the next episode is not recorded
            envs.step(np.zeros(1, dtype=np.int64))
        assert path.exists()  # written when its last episode ended, before close
    assert played_frames(path, 50) == length + 1


def test_the_file_appears_only_when_complete(tmp_path):
    path = tmp_path / "run.mp4"
    with vector.make("classic/cartpole", num_envs=1, record=str(path)) as envs:
        envs.reset(seed=0)
        envs.step(np.zeros(1, dtype=np.int64))
        assert not path.exists()
        assert [name.endswith(".partial.mp4") for name in os.listdir(tmp_path)] == [True]
    assert os.listdir(tmp_path) == ["run.mp4"]


def test_a_creator_records_with_render_mode_rgb_array(tmp_path):
    def make_pendulum(render_mode=None):
        return gymnasium.make("Pendulum-v1", render_mode=render_mode)

    path = tmp_path / "pendulum.gif"
    with vector.make(make_pendulum, num_envs=2, record=str(path)) as envs:
        envs.reset(seed=0)
        for _ in range(4):
            envs.step(np.zeros((2, 1), dtype=np.float32))
    assert iio.imread(path, index=None).shape[1:3] == (500, 500) and played_frames(path, fps=30) == 5


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, message",
    [
        ("run.avi", re.escape("unknown suffix '.avi'; use .mp4 or .gif (pixel envs) or .cast (text envs, asciinema)")),
        ("run", re.escape("unknown suffix '(none)'")),
        ("missing/run.mp4", "the directory '.*missing' does not exist"),
    ],
)
def test_bad_paths_are_named(tmp_path, path, message):
    with pytest.raises(APIUsageError, match=message):
        plan_recording("classic/cartpole", tmp_path / path)


def test_a_path_that_cannot_be_written_is_named():
    with pytest.raises(APIUsageError, match=r"cannot record to '/proc/run\.gif': not writable here \(.+\); choose"):
        plan_recording("classic/cartpole", "/proc/run.gif")


def test_a_directory_is_no_recording(tmp_path):
    (tmp_path / "out.mp4").mkdir()
    with pytest.raises(APIUsageError, match="it is a directory"):
        plan_recording("classic/cartpole", tmp_path / "out.mp4")


def test_an_env_that_renders_no_text_says_what_works(tmp_path):
    with pytest.raises(APIUsageError, match=r"cannot record to \.cast: .* record it to \.mp4 or \.gif instead"):
        plan_recording("classic/cartpole", tmp_path / "x.cast")
    with pytest.raises(APIUsageError, match=r"cannot be watched in the terminal: .* to \.mp4 or \.gif instead"):
        plan_watch("classic/cartpole")


def test_an_env_without_render_modes_says_so(tmp_path):
    with pytest.raises(APIUsageError, match="no render mode a recording can use"):
        plan_recording("classic/probe_1", tmp_path / "x.gif")


def test_a_missing_imageio_names_the_extra(tmp_path, monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "imageio_ffmpeg" else find_spec(name))
    with pytest.raises(
        MissingDependencyError, match=r"needs imageio_ffmpeg; install with: pip install -e '\.\[record\]'"
    ):
        plan_recording("classic/cartpole", tmp_path / "x.mp4")
    assert plan_recording("classic/cartpole", tmp_path / "x.gif").mode == "rgb_array"  # GIFs need no ffmpeg


def test_a_missing_render_package_is_named_with_its_extra_before_any_step(tmp_path, monkeypatch):
    """CartPole draws its frames with pygame: without it, the up-front check says so in one line."""
    monkeypatch.setitem(sys.modules, "pygame", None)  # `import pygame` fails as where it is not installed
    with pytest.raises(MissingDependencyError) as caught:
        plan_recording("classic/cartpole", tmp_path / "x.mp4")
    message = str(caught.value)
    assert "\n" not in message and message.startswith(
        "classic/cartpole cannot record to .mp4: it renders with pygame, which is not installed; "
        "install the record extra: pip install -e '.[record]'"
    )
    assert not (tmp_path / "x.mp4").exists()


def test_bad_episode_counts_are_refused(tmp_path):
    with pytest.raises(APIUsageError, match="episodes to record must be ≥ 1 and ≤ 1,000,000, got 0"):
        plan_recording("classic/cartpole", tmp_path / "x.gif", episodes=0)


def test_env_spec_checks_its_render_fields():
    for field, value in (("render_kwargs", {"ansi": "yes"}), ("render_fps", 0), ("render_fps", True)):
        spec = EnvSpec("demo/x", creator=dict, **{field: value})
        with pytest.raises(PluginError, match=field):
            spec.validate("demo")


def test_text_size_ignores_colour_codes():
    assert text_size("\x1b[1;31mab\x1b[0m\ncde") == (3, 2)


# -- the CLI ---------------------------------------------------------------------------------


def test_puffer_run_records_a_gif(tmp_path):
    path = tmp_path / "cartpole.gif"
    proc = run_puffer(
        None, "run", "classic/cartpole", "--steps", "300", "--record", str(path), "--record-episodes", "2"
    )
    assert proc.returncode == 0, proc.stderr
    assert f"recorded env 0 to {path}" in proc.stdout
    assert iio.imread(path, index=None).shape[1:3] == CARTPOLE_FRAME[:2]


@pytest.mark.parametrize(
    "args, message, code",
    [
        (["--record", "{tmp}/x.webm"], "unknown suffix '.webm'", 1),
        (["--record", "{tmp}/x.cast"], "record it to .mp4 or .gif instead", 1),
        (["--watch"], "cannot be watched in the terminal", 1),
        (["--watch", "--record", "{tmp}/x.gif"], "give --record PATH or --watch, not both", 2),
        (["--watch", "--json"], "cannot go with --json", 2),
        (["--fps", "5"], "--fps sets the speed of --watch", 2),
        (["--record-episodes", "2"], "--record-episodes needs --record PATH", 2),
        (["--overwrite"], "--overwrite replaces the --record file; give --record PATH", 2),
    ],
)
def test_puffer_run_bad_recording_options(tmp_path, args, message, code):
    args = [arg.format(tmp=tmp_path) for arg in args]
    proc = run_puffer(None, "run", "classic/cartpole", "--steps", "10", *args)
    assert proc.returncode == code and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert os.listdir(tmp_path) == []


def test_partial_files_of_dead_processes_are_swept(tmp_path):
    stale = tmp_path / ".run.gif.999999999-abcdefgh.partial.gif"  # no such pid
    stale.write_bytes(b"half")
    _run(tmp_path / "run.gif", steps=2)
    assert sorted(os.listdir(tmp_path)) == ["run.gif"]


def test_the_sweep_matches_exact_names_not_glob_patterns(tmp_path):
    # `.run[1].gif.*` as a glob would match `.run1.gif.*`: another recording's partial file.
    mine = tmp_path / ".run[1].gif.999999999-abcdefgh.partial.gif"
    other = tmp_path / ".run1.gif.999999999-abcdefgh.partial.gif"
    lookalike = tmp_path / ".run[1].gif.999999999-abcdefgh-x.partial.gif"  # not a name we make
    for path in (mine, other, lookalike):
        path.write_bytes(b"half")
    _run(tmp_path / "run[1].gif", steps=2)
    assert sorted(os.listdir(tmp_path)) == sorted([other.name, lookalike.name, "run[1].gif"])


def test_two_recordings_of_one_target_never_share_a_partial_file(tmp_path):
    target = tmp_path / "run.cast"
    first, second = (CastSink(str(target), 10.0) for _ in range(2))
    assert first.partial != second.partial and first.partial.parent == second.partial.parent == tmp_path
    first.close()
    second.close()
    assert os.listdir(tmp_path) == []  # neither got a frame: nothing kept


def test_an_existing_recording_is_refused_unless_overwrite(tmp_path):
    path = tmp_path / "run.gif"
    path.write_bytes(b"keep me")
    with pytest.raises(APIUsageError, match=r"the file exists; pass --overwrite \(overwrite=True\)"):
        plan_recording("classic/cartpole", path)
    with pytest.raises(APIUsageError, match="the file exists"):
        vector.make("classic/cartpole", record=str(path))
    assert path.read_bytes() == b"keep me"
    plan_recording("classic/cartpole", path, overwrite=True)


def test_puffer_run_overwrites_only_when_asked(tmp_path):
    path = tmp_path / "cartpole.gif"
    path.write_bytes(b"keep me")
    args = ("run", "classic/cartpole", "--steps", "20", "--record", str(path), "--record-episodes", "1")
    refused = run_puffer(None, *args)
    assert refused.returncode == 1 and "the file exists; pass --overwrite" in refused.stderr, refused.stderr
    assert path.read_bytes() == b"keep me"
    replaced = run_puffer(None, *args, "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert iio.imread(path, index=None).shape[1:3] == CARTPOLE_FRAME[:2]
    assert sorted(os.listdir(tmp_path)) == ["cartpole.gif"]


# -- GIFs in bounded memory --------------------------------------------------------------------


def _moving_box_frames(count, shape=(37, 53)):
    """``count`` frames of a few colours (a GIF's palette holds them exactly): a box moving over
    a background, each frame shown twice in a row every fourth frame."""
    colours = np.random.default_rng(0).integers(0, 256, (6, 3), dtype=np.uint8)
    frames = []
    for i in range(count):
        frame = np.empty((*shape, 3), np.uint8)
        frame[:] = colours[0]
        frame[i % 20 : i % 20 + 5, (2 * i) % 40 : (2 * i) % 40 + 7] = colours[1 + i % 5]
        frames.append(frame)
        if i % 4 == 3:
            frames.append(frame.copy())
    return frames


def test_a_gif_decodes_to_its_frames_with_their_durations_looping(tmp_path):
    path = tmp_path / "box.gif"
    frames = _moving_box_frames(12)
    sink = GifSink(str(path), fps=25.0)
    for frame in frames:
        sink.write(np.dstack([frame, np.full(frame.shape[:2], 255, np.uint8)]))  # RGBA: alpha dropped
    sink.close()
    # A frame equal to the one before is that one shown longer, as Pillow's own save does.
    shown = [frames[0]] + [b for a, b in itertools.pairwise(frames) if not np.array_equal(a, b)]
    with Image.open(path) as gif:
        assert gif.is_animated and gif.n_frames == len(shown) == 12 and gif.info["loop"] == 0
        durations = [frame.info["duration"] for frame in ImageSequence.Iterator(gif)]
    ms = gif_frame_ms(25.0)  # 40
    assert durations == [ms, ms, ms, 2 * ms] * 3
    decoded = iio.imread(path, index=None)
    assert decoded.shape == (12, 37, 53, 3)
    np.testing.assert_array_equal(decoded, np.array(shown))  # each frame whole, not only its changed box
    assert played_frames(path, 25.0) == len(frames)
    assert os.listdir(tmp_path) == ["box.gif"]


def test_a_gif_keeps_each_frame_of_an_env_that_draws_into_one_buffer(tmp_path):
    path = tmp_path / "reused.gif"
    frames = _moving_box_frames(6)
    screen = np.empty_like(frames[0])  # what render() returns each time, redrawn in place
    sink = GifSink(str(path), fps=50.0)
    for frame in frames:
        screen[:] = frame
        sink.write(screen)
    sink.close()
    np.testing.assert_array_equal(iio.imread(path, index=None), np.array(frames[:4] + frames[5:]))


def test_a_long_gif_says_once_that_mp4_suits_it(tmp_path, capsys):
    path = tmp_path / "long.gif"
    sink = GifSink(str(path), fps=50.0)
    for frame in _moving_box_frames(GIF_NOTE_FRAMES, shape=(8, 8))[:GIF_NOTE_FRAMES]:
        sink.write(frame)
    assert capsys.readouterr().err == ""  # not at 1,000 frames
    for frame in _moving_box_frames(20, shape=(8, 8)):
        sink.write(frame)
    sink.close()
    note = capsys.readouterr().err
    assert note == (
        f"note: the GIF recording {path} is past 1,000 frames (20 s); "
        "a GIF this long is large and slow to open: record long runs to .mp4\n"
    )


PEAK_RSS = """
import resource, subprocess, sys
proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stderr.write(proc.stderr)
print(proc.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)  # KiB on Linux
"""


def _peak_rss(command, timeout=900):
    """(return code, peak RSS in MB, stderr) of ``command`` run by a child that waits for it."""
    proc = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, *command],
        capture_output=True,
        text=True,
        env=puffer_env(None),
        timeout=timeout,
    )
    returncode, peak_kib = map(int, proc.stdout.split())
    return returncode, peak_kib / 1024, proc.stderr


WRITE_FRAMES = """
import sys
import numpy as np
from puffer_core.env.sinks import GifSink
sink = GifSink(sys.argv[1], fps=50.0)
for i in range(int(sys.argv[2])):
    frame = np.zeros((400, 600, 3), np.uint8)  # CartPole's size, 720 KB
    frame[:, i % 600 : i % 600 + 8] = (i % 256, 255 - i % 256, 7)  # a band moving right
    sink.write(frame)
sink.close()
"""


def test_a_gif_sink_holds_a_frame_or_two_whatever_the_length(tmp_path):
    path = tmp_path / "long.gif"
    returncode, peak_mb, stderr = _peak_rss([sys.executable, "-c", WRITE_FRAMES, str(path), "600"])
    assert returncode == 0, stderr
    # 600 frames of 0.72 MB: held until close (imageio's GIF writer) they took 1 GB.
    assert peak_mb < 250, f"peak RSS {peak_mb:.0f} MB"
    with Image.open(path) as gif:
        assert gif.n_frames == 600  # each differs from the one before


@pytest.mark.slow
def test_a_3000_step_gif_recording_stays_under_500_mb(tmp_path):
    path = tmp_path / "cartpole.gif"
    command = [sys.executable, "-m", "puffer_core.cli.main", "run", "classic/cartpole", "--steps", "3000"]
    returncode, peak_mb, stderr = _peak_rss([*command, "--record", str(path)])
    assert returncode == 0, stderr
    # imageio's GIF writer held every frame: 3.4 GB; written as they come: about 75 MB.
    assert peak_mb < 500, f"peak RSS {peak_mb:.0f} MB"
    assert played_frames(path, 50) == 3001  # the first reset, then a frame a step
    assert stderr.count("note: the GIF recording") == 1 and "record long runs to .mp4" in stderr


# -- files of others -------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_file_that_appears_during_the_recording_is_never_overwritten(tmp_path, backend, capfd):
    path = tmp_path / "run.gif"
    recording = plan_recording("classic/cartpole", path)  # checked here: no file yet
    workers = {"num_workers": 2} if backend != "serial" else {}
    with vector.make("classic/cartpole", num_envs=2, backend=backend, record=recording, **workers) as envs:
        envs.reset(seed=0)
        path.write_bytes(b"appeared meanwhile")  # another program's file, or a second run's
        for _ in range(5):
            envs.step(np.zeros(2, dtype=np.int64))
    assert path.read_bytes() == b"appeared meanwhile"
    kept = tmp_path / "run-2.gif"
    assert played_frames(kept, 50) == 6 and sorted(os.listdir(tmp_path)) == ["run-2.gif", "run.gif"]
    note = f"note: {path} appeared during the recording and was left as it is; the recording is {kept}"
    if backend == "serial":  # a worker writes to the stderr its start method gave it, which capfd may not hold
        assert note in capfd.readouterr().err


def test_with_overwrite_a_file_that_appears_is_replaced(tmp_path):
    path = tmp_path / "run.gif"
    recording = plan_recording("classic/cartpole", path, overwrite=True)
    with vector.make("classic/cartpole", num_envs=1, record=recording) as envs:
        envs.reset(seed=0)
        path.write_bytes(b"appeared meanwhile")
        envs.step(np.zeros(1, dtype=np.int64))
    assert played_frames(path, 50) == 2 and os.listdir(tmp_path) == ["run.gif"]


def test_a_directory_others_can_write_is_no_place_for_a_recording(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # as /tmp is: anyone could plant run.gif -> ~/.bashrc there
    with pytest.raises(APIUsageError, match=rf"cannot record to '{shared}/run.gif': {shared} is writable by others"):
        plan_recording("classic/cartpole", shared / "run.gif")
    monkeypatch.chdir(shared)  # a bare name's directory is the current one: the same rule
    proc = run_puffer(None, "run", "classic/cartpole", "--steps", "5", "--record", "x.gif")
    assert proc.returncode == 1 and f"cannot record to 'x.gif': {shared} is writable by others" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and os.listdir(shared) == []


# -- the file actually written ---------------------------------------------------------------

APPEARING = """
import os
import gymnasium
import puffer_core
from puffer_core import EnvSpec

class Appearing(gymnasium.Wrapper):
    '''CartPole that, at its first step, writes the file named by APPEAR_AT (another program's).'''

    def step(self, action):
        target = os.environ.get("APPEAR_AT")
        if target and not os.path.exists(target):
            with open(target, "w") as file:
                file.write("appeared meanwhile")
        return self.env.step(action)

def _make(render_mode=None):
    return Appearing(gymnasium.make("CartPole-v1", render_mode=render_mode))

@puffer_core.hookimpl
def puffer_envs():
    return [EnvSpec("appearing/cartpole", _make)]
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_published_names_the_file_a_worker_wrote(tmp_path, backend):
    path = tmp_path / "run.gif"
    workers = {"num_workers": 2} if backend != "serial" else {}
    with receipted(plan_recording("classic/cartpole", path)) as recording:
        with vector.make("classic/cartpole", num_envs=2, backend=backend, record=recording, **workers) as envs:
            envs.reset(seed=0)
            path.write_bytes(b"appeared meanwhile")
            envs.step(np.zeros(2, dtype=np.int64))
        assert published(recording) == str(tmp_path / "run-2.gif")
        receipt = os.path.dirname(recording.receipt)
    assert not os.path.exists(receipt)  # the receipt's folder goes with the context
    with receipted(plan_recording("classic/cartpole", tmp_path / "other.gif")) as recording:
        with vector.make("classic/cartpole", num_envs=1, record=recording):
            pass  # never reset: not one frame
        assert published(recording) is None
    assert published(plan_recording("classic/cartpole", tmp_path / "x.gif")) == str(tmp_path / "x.gif")  # no receipt


@pytest.mark.parametrize("backend", BACKENDS)
def test_puffer_run_prints_the_file_it_wrote(tmp_path, site, backend):
    write_plugin(site, "appearing", APPEARING)
    workers = ("--num-envs", "2", "--num-workers", "2") if backend != "serial" else ()
    for extra in ((), ("--json",)):
        path = tmp_path / f"run{len(extra)}.gif"
        args = ("run", "appearing/cartpole", "--steps", "20", "--backend", backend, *workers, "--record", str(path))
        proc = run_puffer(site, *args, *extra, extra_env={"APPEAR_AT": str(path)})
        assert proc.returncode == 0, proc.stderr
        written = tmp_path / f"run{len(extra)}-2.gif"
        assert path.read_text() == "appeared meanwhile" and played_frames(written, 50) >= 2
        if extra:
            assert json.loads(proc.stdout)["record"] == str(written)
        else:
            assert f"recorded env 0 to {written}\n" in proc.stdout and f"to {path}\n" not in proc.stdout
