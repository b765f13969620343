"""NetHack recorded and watched: the coloured terminal as render_mode "ansi", asciinema
casts that parse and show the dungeon, `--watch` redrawing in place and stopping cleanly
on Ctrl-C."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from puffer_plugin_nethack.tty import tty_ansi

import puffer_core
from puffer_core import vector

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _plain(text: str) -> str:
    return ANSI.sub("", text)


def test_tty_ansi_colours_each_run_once():
    chars = np.array([[ord(c) for c in "@d  "], [32] * 4], dtype=np.uint8)
    colors = np.array([[15, 1, 0, 0], [0] * 4], dtype=np.int8)
    assert tty_ansi(chars, colors) == "\x1b[1;37m@\x1b[0;31md\x1b[0m\n"


def test_ansi_rendering_keeps_the_observation_space():
    plain = puffer_core.make("nethack/score")
    rendering = puffer_core.make("nethack/score", render_mode="ansi")
    try:
        assert rendering.observation_space == plain.observation_space
        rendering.reset(seed=1)
        screen = rendering.render()
        assert "\x1b[" in screen  # colours
        lines = _plain(screen).split("\n")
        assert len(lines) == 24 and "@" in _plain(screen) and "Dlvl:1" in lines[-1]
    finally:
        plain.close()
        rendering.close()


def test_a_cast_from_a_worker_parses_and_shows_the_dungeon(tmp_path):
    path = tmp_path / "game.cast"
    with vector.make(
        "nethack/score",
        num_envs=2,
        num_workers=2,
        backend="multiprocessing",
        seed=0,
        record=str(path),
    ) as envs:
        envs.reset(seed=0)
        rng = np.random.default_rng(0)
        for _ in range(25):
            envs.step(rng.integers(0, 8, size=2))
    header, *events = [json.loads(line) for line in path.read_text().splitlines()]
    assert header["version"] == 2 and header["width"] >= 80 and header["height"] == 24
    assert len(events) == 26  # the reset and 25 steps of env 0
    assert [e[1] for e in events] == ["o"] * 26
    times = [e[0] for e in events]
    assert times == pytest.approx([i / 10 for i in range(26)])  # the plugin's 10 frames a second
    last = _plain(events[-1][2])
    assert "@" in last and "Dlvl:1" in last and re.search(r"[|-]{3}", last)
    played = subprocess.run(
        [sys.executable, "-m", "asciinema", "cat", str(path)], capture_output=True, text=True, timeout=60
    )
    assert played.returncode == 0, played.stderr
    assert "Dlvl:1" in _plain(played.stdout)


def _default_sigint() -> None:
    # A test run from a background job (`nox ... &`) inherits SIGINT ignored, and Python then
    # installs no KeyboardInterrupt handler: give the child Ctrl-C's default, as a terminal does.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _puffer(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "puffer_core.cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_default_sigint,
        **kwargs,
    )


def test_watch_redraws_the_game_in_place():
    proc = _puffer("run", "nethack/score", "--watch", "--steps", "20", "--fps", "500")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.count("\x1b[H\x1b[2J") == 21  # the reset and 20 steps, each replacing the last
    assert "Dlvl:1" in _plain(out) and out.startswith("\x1b[?25l") and "\x1b[?25h" in out
    assert "20 steps in" in out


def test_ctrl_c_stops_watching_cleanly():
    proc = _puffer(
        "run", "nethack/score", "--watch", "--steps", "1000000", "--fps", "50",
        "--backend", "multiprocessing", "--num-envs", "2", "--num-workers", "2",
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    seen = ""
    while "Dlvl" not in seen and time.monotonic() < deadline:
        seen += os.read(proc.stdout.fileno(), 65536).decode("utf-8", "replace")
    assert "Dlvl" in seen
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends: the whole foreground group
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "\x1b[?25h" in seen + out  # the cursor is back
    assert "Traceback" not in err
    assert _live_group_members(proc.pid) == []


def _live_group_members(group: int, wait: float = 10.0) -> list[str]:
    """Processes of ``group`` still running after up to ``wait`` s. Zombies do not count: the fork
    server and resource tracker have exited when their owner did, and init reaps them soon."""
    deadline = time.monotonic() + wait
    while True:
        pids = subprocess.run(["pgrep", "-g", str(group)], capture_output=True, text=True).stdout.split()
        states = [
            subprocess.run(["ps", "-o", "stat=", "-p", pid], capture_output=True, text=True).stdout for pid in pids
        ]
        live = [pid for pid, state in zip(pids, states) if state.strip() and not state.strip().startswith("Z")]
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.2)
