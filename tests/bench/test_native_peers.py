"""The peers that step many envs at once (puffer_core.bench.native_peers): the env's native batch
alone, and EnvPool in an interpreter of its own (a real venv with EnvPool from the index)."""

from __future__ import annotations

import json
import subprocess
import sys
import venv

import pytest
from plugin_site import run_puffer

from puffer_core.bench import results
from puffer_core.bench.native_peers import ENVPOOL_ATARI_OPTIONS, PeerProcess, envpool_cases, envpool_task
from puffer_core.bench.vectorization import run_bench
from puffer_core.vector.checks import available_cpus

#: EnvPool as the issue measured it; its wheels cover Python 3.11 (the tests_torch session).
ENVPOOL = "envpool==1.2.5"


def test_cartpole_is_measured_both_ways_and_its_native_batch_alone():
    rows = run_bench("classic/cartpole", num_envs=4, seconds=0.05, include_emulation=False,
                     include_adapters=False, include_action_check=False, include_restart=False)  # fmt: skip
    by_name = {row["name"]: row for row in rows}
    assert by_name["Serial native"]["kind"] == "puffer" and by_name["Serial native"]["sps"] > 0
    assert by_name["Multiprocessing w=2 b=4 native"]["sps"] > 0
    alone = by_name["CartPoleVectorEnv alone (the native batch)"]
    assert (alone["kind"], alone["backend"]) == ("peer", "native-alone") and alone["sps"] > 0
    assert not any(row["backend"] == "envpool" for row in rows)  # no --peer-python, no EnvPool rows


def test_an_env_without_native_batches_has_no_native_rows():
    rows = run_bench("classic/acrobot", num_envs=2, seconds=0.05, include_emulation=False,
                     include_adapters=False, include_action_check=False, include_restart=False)  # fmt: skip
    assert not [row["name"] for row in rows if "native" in row["name"]]


def test_envpool_tasks_are_set_up_as_our_envs():
    assert envpool_task("classic/cartpole") == ("CartPole-v1", {})
    assert envpool_task("atari/space_invaders") == ("SpaceInvaders-v5", ENVPOOL_ATARI_OPTIONS)
    assert ENVPOOL_ATARI_OPTIONS["repeat_action_probability"] == 0.25 and not ENVPOOL_ATARI_OPTIONS["reward_clip"]
    assert envpool_task("nethack/score") is None and envpool_cases("nethack/score", 8, 0, sys.executable) == []


def test_a_peer_interpreter_without_envpool_is_one_line_naming_it():
    config = {"library": "envpool", "task": "CartPole-v1", "num_envs": 2, "batch_size": 2, "num_threads": 1,
              "seed": 0}  # fmt: skip
    with pytest.raises(RuntimeError, match=rf"^{sys.executable}: ModuleNotFoundError: No module named 'envpool'"):
        PeerProcess(sys.executable, config)
    proc = run_puffer(None, "bench", "classic/cartpole", "--peer-python", sys.executable, "--seconds", "0.1")
    assert proc.returncode == 2 and f"--peer-python {sys.executable} cannot import envpool" in proc.stderr


def test_the_summary_takes_envpools_fastest_setting():
    rows = [
        {"kind": "peer", "backend": "envpool", "name": "EnvPool t=2 b=8", "sps": 3.0, "num_envs": 8},
        {"kind": "peer", "backend": "envpool", "name": "EnvPool t=2 b=4", "sps": 4.0, "num_envs": 8},
        {"kind": "peer", "backend": "native-alone", "name": "AtariVectorEnv alone", "sps": 2.0, "num_envs": 8},
    ]
    best = results.standard_summary({"results": {"atari/breakout": rows}})["atari/breakout"]
    assert best["envpool"]["name"] == "EnvPool t=2 b=4" and best["native_alone"]["sps"] == 2.0


@pytest.fixture(scope="module")
def envpool_python(tmp_path_factory):
    """An interpreter of its own with EnvPool from the package index (as a user would make one)."""
    if sys.version_info[:2] != (3, 11):
        pytest.skip("EnvPool 1.2.5's wheels are tested on Python 3.11 (tests_torch runs this)")
    folder = tmp_path_factory.mktemp("envpool-venv")
    venv.create(folder, with_pip=True)
    python = str(folder / "bin" / "python")
    install = subprocess.run([python, "-m", "pip", "install", "-q", ENVPOOL], capture_output=True, text=True,
                             timeout=900)  # fmt: skip
    assert install.returncode == 0, install.stderr[-2000:]
    return python


@pytest.mark.slow
def test_envpool_rows_run_in_their_interpreter_interleaved_with_ours(envpool_python):
    rows = run_bench("classic/cartpole", num_envs=4, seconds=0.2, rounds=2, include_emulation=False,
                     include_adapters=False, include_action_check=False, include_restart=False,
                     peer_python=envpool_python)  # fmt: skip
    envpool = [row for row in rows if row["backend"] == "envpool"]
    threads = min(4, available_cpus())
    assert [row["name"] for row in envpool] == [f"EnvPool t={threads} b=4", f"EnvPool t={threads} b=2"]
    assert all(row["sps"] and row["sps"] > 0 and row["error"] is None for row in envpool), envpool
    assert envpool[0]["ratio_vs_serial"] is not None  # compared within the run


@pytest.mark.slow
def test_puffer_bench_breakout_with_envpool_names_every_row(envpool_python):
    proc = run_puffer(None, "bench", "atari/breakout", "--num-envs", "4", "--seconds", "0.2", "--no-adapters",
                      "--peer-python", envpool_python, "--json", timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    names = {row["name"] for row in json.loads(proc.stdout) if row.get("sps")}
    envpool = f"EnvPool t={min(4, available_cpus())} b=4"
    assert {"Serial native", "AtariVectorEnv alone (the native batch)", envpool} <= names
