"""Each script of examples/ runs as a user runs it (``python examples/X.py``, from another
folder) with small step counts, exits 0 and prints what it promises."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from optional import require
from plugin_site import puffer_env
from process_checks import alive

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_example(name: str, *args: str, cwd: Path, timeout: float = 120, env: dict | None = None) -> str:
    """The script's stdout; its exit code must be 0 within ``timeout`` seconds."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_every_example_is_tested_and_documented():
    tested = set(re.findall(r'run_example\(\s*"(\w+\.py)"', Path(__file__).read_text()))
    scripts = {path.name for path in EXAMPLES.glob("*.py")}
    assert scripts == tested
    page = (ROOT / "docs" / "examples.md").read_text()
    for name in scripts:
        assert f"<!-- include examples/{name} " in page, f"docs/examples.md does not include examples/{name}"
        script = (EXAMPLES / name).read_text()
        assert script.startswith('"""') and 'if __name__ == "__main__":' in script, name
        assert len(script.splitlines()) <= 90, f"examples/{name} is over 90 lines: an example should be short"


def test_own_env_through_a_creator(tmp_path):
    out = run_example("own_env.py", "--steps", "300", cwd=tmp_path)
    assert re.search(r"observation rows \(8, 16\) uint8, actions Discrete\(2\)", out), out
    # What the 16 bytes of a row hold: the float leaf, 4 bytes of padding, the Discrete's int64.
    assert "  bytes 0-3: 'position', float32 (1,)\n  bytes 8-15: 'steps_left', int64 ()\n" in out, out
    assert re.search(r"[\d,]+ steps/s on multiprocessing", out), out
    episodes = int(re.search(r"(\d+) episodes: mean return -?[\d.]+, mean length [\d.]+", out)[1])
    assert episodes > 8  # 2,400 random steps of episodes at most 40 steps long


def test_cleanrl_loop_through_to_gymnasium(tmp_path):
    out = run_example("cleanrl_loop.py", "--steps", "600", cwd=tmp_path)
    assert "GymnasiumVectorEnv: 8 envs, autoreset NEXT_STEP" in out, out
    best = float(re.search(r"mean return of the last 10 episodes [\d.]+, best (\d+)", out)[1])
    assert best > 50  # random search finds weights better than a random policy's ~22


def test_record_policy_writes_a_gif(tmp_path):
    out = run_example("record_policy.py", "--policy", "random", "--out", "run.gif", cwd=tmp_path)
    assert re.search(r"recorded 2 episodes \(returns \d+, \d+\) to run\.gif", out), out
    assert (tmp_path / "run.gif").read_bytes()[:6] == b"GIF89a"
    assert [p.name for p in tmp_path.iterdir()] == ["run.gif"]  # no partial file left beside it


@pytest.mark.slow
def test_sb3_ppo_through_to_sb3(tmp_path):
    require("stable_baselines3")  # PUFFER_REQUIRE_TORCH=1 (tests_torch): missing is a failure
    out = run_example("sb3_ppo.py", "--timesteps", "2048", cwd=tmp_path, timeout=300)
    assert re.search(r"trained 2048 steps in [\d.]+ s", out), out
    assert re.search(r"\d+ recent episodes: mean return [\d.]+", out), out


@pytest.mark.ray
def test_ray_backend_on_its_own_local_instance(tmp_path):
    # As a user starts it: no Ray address from this process's environment, its own HOME, and a
    # short temp dir (Ray's socket paths must fit 107 bytes) to check that Ray leaves nothing.
    temp = Path(tempfile.mkdtemp(prefix="ex-"))
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    env.update(HOME=str(tmp_path), TMPDIR=str(temp))
    try:
        out = run_example("ray_cluster.py", "--steps", "100", cwd=tmp_path, timeout=300, env=env)
        assert re.search(r"worker 1: envs \[4, 5, 6, 7\] on .+ \(127\.0\.0\.1\)", out), out
        assert re.search(r"[\d,]+ steps/s on Ray, \d+ episodes ended", out), out
        assert re.search(r"traffic per round trip to an actor: \d+ B sent, \d+ B back", out), out
        assert list(temp.iterdir()) == [], "Ray's temp dir outlived the script"
        assert not [pid for pid in _pids() if alive(pid) and str(temp) in _cmdline(pid)], "Ray processes outlived it"
    finally:
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
def test_your_env_recipe_runs_as_its_page_says(tmp_path):
    """docs/your-env.md: its script, then its scaffold, edits and commands (pip's part aside:
    the plugin goes on PYTHONPATH with its dist-info; tests/cli/test_scaffold.py installs one)."""
    page = (ROOT / "docs" / "your-env.md").read_text()
    script, hooks, train = re.findall(r"^```python\n(.*?)^```", page, re.MULTILINE | re.DOTALL)
    (tmp_path / "corridor.py").write_text(script)
    proc = subprocess.run([sys.executable, "corridor.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^env \d: return 1, length \d+$", proc.stdout, re.MULTILINE), proc.stdout

    plugin = tmp_path / "puffer-plugin-corridor"
    env = puffer_env(plugin)
    commands = [shlex.split(line, comments=True) for line in _bash_lines(page)]
    assert commands[0] == ["puffer", "new-plugin", "corridor"]
    _run_command(commands[0], tmp_path, env)
    package = plugin / "puffer_plugin_corridor"
    corridor_class = re.search(r"^class Corridor.*?(?=^\S)", script, re.MULTILINE | re.DOTALL)[0]
    with open(package / "envs.py", "a") as envs_py:
        envs_py.write("\n\n" + corridor_class.rstrip() + "\n")
    init, replaced = re.subn(
        r"^@puffer_core.hookimpl\ndef puffer_envs\(\):\n.*?^    \]\n",
        hooks,
        (package / "__init__.py").read_text(),
        flags=re.M | re.S,
    )
    assert replaced == 1, "the scaffold's puffer_envs is not where the page says"
    (package / "__init__.py").write_text(init)
    # What `pip install -e` gives the page's commands: the package and its entry point on the path.
    info = plugin / "puffer_plugin_corridor-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: puffer-plugin-corridor\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[puffer]\ncorridor = puffer_plugin_corridor\n")
    commands = [argv for argv in commands[1:] if argv[:3] != ["python", "-m", "pip"]]
    trains = [argv for argv in commands if argv[:2] in (["puffer", "train"], ["puffer", "eval"])]
    outputs = [_run_command(argv, tmp_path, env) for argv in commands if argv not in trains]
    assert any("corridor/walk" in out for out in outputs[:4])
    assert re.search(r"corridor/walk: [\d,]+ steps .* \(multiprocessing, 8 envs", "\n".join(outputs)), outputs
    assert re.search(r"\d+ passed", outputs[-1]), outputs[-1]

    # Step 3: train and eval the plugin's env, then the creator of corridor.py with no plugin.
    require("torch")
    assert [argv[:2] for argv in trains] == [["puffer", "train"], ["puffer", "eval"]]
    evaluated = [_run_command(argv, tmp_path, env) for argv in trains][-1]
    assert re.search(r"mean return", evaluated), evaluated
    (tmp_path / "train_corridor.py").write_text(train)
    proc = subprocess.run(
        [sys.executable, "train_corridor.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"^mean return 1\.00$", proc.stdout, re.MULTILINE), proc.stdout


def _bash_lines(page: str) -> list[str]:
    """The command lines of a page's bash blocks, ``a && b`` split in two."""
    blocks = re.findall(r"^```bash\n(.*?)^```", page, re.MULTILINE | re.DOTALL)
    lines = [
        line
        for block in blocks
        for line in block.splitlines()
        if line.strip() and not line.startswith("python corridor")
    ]
    return [part.strip() for line in lines for part in line.split(" && ")]


def _run_command(argv: list[str], cwd: Path, env: dict) -> str:
    """A command line of the page, `puffer` and `python` as this interpreter runs them."""
    program = [sys.executable, "-m", "puffer_core.cli.main"] if argv[0] == "puffer" else [sys.executable]
    argv = [*program, *argv[1:], *(["-p", "no:cacheprovider"] if argv[:3] == ["python", "-m", "pytest"] else [])]
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
