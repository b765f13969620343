"""The `puffer` CLI, run as a subprocess against plugins installed as real dist-info folders."""

from __future__ import annotations

import importlib.metadata as metadata
import json
import platform

import pytest
from plugin_site import BAD_SPEC, BROKEN_IMPORT, GOOD, claims, run_puffer, write_plugin

import puffer_core


@pytest.fixture
def mixed_site(site):
    write_plugin(site, "good", GOOD, version="1.2.3")
    write_plugin(site, "broken", BROKEN_IMPORT)
    write_plugin(site, "badspec", BAD_SPEC)
    write_plugin(site, "dupa", claims("shared/env"))
    write_plugin(site, "dupb", claims("shared/env"))
    return site


def test_plugins_json_reports_each_plugin(mixed_site):
    proc = run_puffer(mixed_site, "plugins", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    by_name = {p["name"]: p for p in data["plugins"]}
    assert by_name["good"]["status"] == "loaded" and by_name["good"]["version"] == "1.2.3"
    assert by_name["good"]["distribution"] == "puffer-plugin-good"
    assert by_name["broken"]["status"] == "failed"
    assert "definitely_missing_dependency_of_broken" in by_name["broken"]["error"]
    assert by_name["badspec"]["status"] == "failed" and "'id'" in by_name["badspec"]["error"]
    assert by_name["classic"]["status"] == "loaded"
    assert any("shared/env" in w and "dupa" in w and "dupb" in w for w in data["warnings"])


def test_plugins_table_shows_failures_without_traceback(mixed_site):
    proc = run_puffer(mixed_site, "plugins")
    assert proc.returncode == 0
    assert "broken" in proc.stdout and "failed" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
    verbose = run_puffer(mixed_site, "plugins", "--traceback")
    assert "ModuleNotFoundError" in verbose.stdout


def test_version_names_puffer_core_and_every_installed_plugin_with_its_version(mixed_site):
    proc = run_puffer(mixed_site, "--version")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"puffer-core {puffer_core.__version__} (Python {platform.python_version()})"
    assert "puffer-plugin-good 1.2.3 (plugin good)" in lines
    assert "puffer-plugin-broken 1.0.0 (plugin broken: failed to load (`puffer plugins` says why))" in lines
    # Every plugin installed here (those of plugins/ too, where installed), by its distribution.
    installed = [ep for ep in metadata.entry_points(group="puffer") if ep.dist is not None]
    assert {"good", "broken", "badspec"} <= {ep.name for ep in installed}
    for ep in installed:
        assert any(line.startswith(f"{ep.dist.metadata['Name']} {ep.dist.version} (plugin {ep.name}") for line in lines)
    assert len(lines) == 1 + len(installed)  # the built-in plugins are puffer-core's own
    disabled = run_puffer(mixed_site, "--version", extra_env={"PUFFER_DISABLE_PLUGINS": "good"})
    assert "puffer-plugin-good 1.2.3 (plugin good: disabled by PUFFER_DISABLE_PLUGINS)" in disabled.stdout.splitlines()


def test_envs_json_lists_working_envs_and_marks_missing_packages(mixed_site):
    proc = run_puffer(mixed_site, "envs", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {row["id"]: row for row in json.loads(proc.stdout)["envs"]}
    assert rows["good/cartpole"]["available"] is True and rows["good/cartpole"]["plugin"] == "good"
    assert rows["classic/cartpole"]["available"] is True
    assert rows["good/needy"]["available"] is False
    assert "pip install definitely-missing-pkg-xyz" in rows["good/needy"]["note"]
    assert rows["shared/env"]["available"] is False and "dupa and dupb" in rows["shared/env"]["note"]
    assert not any(row_id.startswith("badspec/") for row_id in rows)


def test_envs_plugin_filter_and_unknown_plugin(mixed_site):
    proc = run_puffer(mixed_site, "envs", "--json", "--plugin", "good")
    assert {row["plugin"] for row in json.loads(proc.stdout)["envs"]} == {"good"}
    bad = run_puffer(mixed_site, "envs", "--plugin", "nope")
    assert bad.returncode == 1 and "no plugin named 'nope'" in bad.stderr


def test_env_variables_select_plugins(mixed_site):
    proc = run_puffer(mixed_site, "plugins", "--json", extra_env={"PUFFER_DISABLE_PLUGINS": "broken,dupb"})
    by_name = {p["name"]: p for p in json.loads(proc.stdout)["plugins"]}
    assert by_name["broken"]["status"] == "disabled" and by_name["dupb"]["status"] == "disabled"
    envs = run_puffer(mixed_site, "envs", "--json", extra_env={"PUFFER_LOAD_PLUGINS": "good"})
    ids = {row["id"] for row in json.loads(envs.stdout)["envs"]}
    assert "good/cartpole" in ids and "shared/env" not in ids and "classic/cartpole" in ids


def test_run_plugin_env_while_another_plugin_is_broken(mixed_site):
    proc = run_puffer(mixed_site, "run", "good/cartpole", "--steps", "300", "--num-envs", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["env"] == "good/cartpole" and result["steps"] >= 300
    assert result["episodes"] >= 1 and result["episode_means"]["episode_length"] > 0


def test_run_prints_sps_and_episode_summary():
    proc = run_puffer(None, "run", "classic/cartpole", "--steps", "500", "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    assert "steps/s" in proc.stdout
    assert "episodes finished; mean" in proc.stdout and "episode_return" in proc.stdout


def test_a_run_in_native_batches_says_so_in_its_summary_and_its_json():
    proc = run_puffer(None, "run", "classic/cartpole", "--native", "--num-envs", "4", "--steps", "400")
    assert proc.returncode == 0 and "(serial, 4 envs in native batches, 1 worker" in proc.stdout, proc.stdout
    proc = run_puffer(None, "run", "classic/cartpole", "--native", "--num-envs", "4", "--steps", "400", "--json")
    assert json.loads(proc.stdout)["native"] is True
    proc = run_puffer(None, "run", "classic/cartpole", "--num-envs", "4", "--steps", "400", "--json")
    assert json.loads(proc.stdout)["native"] is False


def test_run_of_a_multi_agent_env_counts_envs_and_their_agents():
    """The vector env counts agent slots; the summary says they are agents, not envs."""
    proc = run_puffer(None, "run", "pettingzoo/pistonball", "--num-envs", "1", "--steps", "100", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert (data["num_envs"], data["agents_per_env"]) == (20, 20), data
    plain = run_puffer(None, "run", "pettingzoo/pistonball", "--num-envs", "1", "--steps", "100")
    assert "(serial, 1 env × 20 agents = 20 slots, 1 worker, batch 20)" in plain.stdout, plain.stdout
    single = run_puffer(None, "run", "classic/cartpole", "--num-envs", "2", "--steps", "100")
    assert "(serial, 2 envs, 1 worker, batch 2)" in single.stdout, single.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["run", "classic/cartpol"], "Did you mean: classic/cartpole"),
        (["run", "good/needy"], "pip install definitely-missing-pkg-xyz"),
        (["run", "shared/env"], "declared by more than one plugin"),
        (["run", "broken/anything"], "plugin 'broken' did not load (failed)"),
        (["run", "classic/cartpole", "--kwarg", "nonsense"], "is not KEY=VALUE"),
    ],
)
def test_errors_are_messages_with_nonzero_exit(mixed_site, args, fragment):
    proc = run_puffer(mixed_site, *args)
    assert proc.returncode != 0
    assert fragment in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_help_explains_commands():
    proc = run_puffer(None, "--help")
    assert proc.returncode == 0
    for command in ("plugins", "envs", "run", "PUFFER_DISABLE_PLUGINS"):
        assert command in proc.stdout


@pytest.mark.parametrize("command", ["eval", "train"])
def test_the_help_of_commands_reading_a_checkpoint_names_its_kwargs_flags(command):
    proc = run_puffer(None, command, "--help")
    assert proc.returncode == 0, proc.stderr
    help_text = " ".join(proc.stdout.split())
    assert "--trust-kwargs" in help_text and "--no-saved-kwargs" in help_text
    assert "declares it restorable" in help_text or "declare restorable" in help_text


@pytest.mark.ray
@pytest.mark.ray_cluster
def test_run_on_a_cluster_says_where_each_worker_ran(ray_cluster):
    args = ["run", "classic/cartpole", "--backend", "ray", "--ray-address", ray_cluster.address]
    args += ["--placement", "spread", "--num-envs", "6", "--num-workers", "3", "--steps", "300"]
    token = {"RAY_AUTH_MODE": "token"}
    proc = run_puffer(None, *args, "--json", extra_env=token, timeout=300)
    assert proc.returncode == 0, proc.stderr
    placement = json.loads(proc.stdout)["placement"]
    assert [(entry["worker"], entry["envs"]) for entry in placement] == [(0, [0, 1]), (1, [2, 3]), (2, [4, 5])]
    assert len({entry["node_id"] for entry in placement}) == 3 and all(entry["host"] for entry in placement)
    proc = run_puffer(None, *args, extra_env=token, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "workers on 3 nodes:" in proc.stdout
    assert all(f"worker {w} (envs {2 * w}-{2 * w + 1})" in proc.stdout for w in range(3)), proc.stdout


def test_run_on_this_machine_has_no_placement():
    proc = run_puffer(None, "run", "classic/cartpole", "--steps", "100", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["placement"] is None


MARKED = """
import os
import gymnasium
import puffer_core
from puffer_core import EnvSpec

def _make():
    class Marked(gymnasium.Wrapper):
        def step(self, action):  # the first step says the run is stepping
            if not os.path.exists(os.environ["PUFFER_TEST_MARK"]):
                open(os.environ["PUFFER_TEST_MARK"], "w").close()
            return self.env.step(action)
    return Marked(gymnasium.make("CartPole-v1"))

@puffer_core.hookimpl
def puffer_envs():
    return [EnvSpec("marked/cartpole", _make)]
"""


def test_ctrl_c_during_a_run_prints_the_summary_of_what_ran(site, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from plugin_site import puffer_env
    from process_checks import default_sigint

    write_plugin(site, "marked", MARKED)
    mark = tmp_path / "stepping"
    env = puffer_env(site, {"PUFFER_TEST_MARK": str(mark)})
    command = [sys.executable, "-m", "puffer_core.cli.main", "run", "marked/cartpole", "--steps", "1000000000"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=default_sigint)  # fmt: skip
    # Ctrl-C once it steps (on a busy machine its imports alone may take seconds).
    deadline = time.monotonic() + 120
    while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "marked/cartpole: " in out and " steps/s " in out and "episodes finished; mean" in out, out
    assert "interrupted after " in err and "steps (Ctrl-C)" in err
