"""The plugin as the core sees it: env ids, the missing-module path, DockerLayer, CompatAxes."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import puffer_core
import pytest
from puffer_core import BuildStage, CompatAxes, DockerLayer, make_raw
from puffer_core.errors import MissingDependencyError
from puffer_core.testing import load_plugins

import puffer_plugin_dmlab as plugin
from puffer_plugin_dmlab import docker

REQUIRED_IDS = {
    "dmlab/seekavoid_arena_01",
    "dmlab/nav_maze_static_01",
    "dmlab/lt_chasm",
    "dmlab/explore_goal_locations_small",
    "dmlab/rooms_watermaze",
    "dmlab/rooms_collect_good_objects_train",
    "dmlab/language_select_described_object",
    "dmlab/lasertag_three_opponents_large",
    "dmlab/natlab_fixed_large_map",
    "dmlab/psychlab_visual_search",
    "dmlab/skymaze_irreversible_path_hard",
    "dmlab/explore_object_rewards_many",
}


def test_entry_point_loads_with_every_level_listed():
    plugins = load_plugins()
    info = plugins.plugins["dmlab"]
    assert info.status == "loaded", info.error
    assert info.distribution == "puffer-plugin-dmlab"
    assert set(info.hooks) == {"puffer_envs", "puffer_docker_layer", "puffer_compat_axes"}
    ids = set(info.envs)
    assert REQUIRED_IDS <= ids
    assert len([i for i in ids if i.startswith("dmlab/")]) == 12 + 32  # core levels + DMLab-30 (train/test apart)
    assert not any("contributed" in i for i in ids)


def test_ids_map_to_level_scripts():
    specs = {spec.id: spec for spec in plugin.puffer_envs()}
    assert specs["dmlab/lt_chasm"].kwargs == {"level": "lt_chasm"}
    assert specs["dmlab/explore_goal_locations_small"].kwargs == {
        "level": "contributed/dmlab30/explore_goal_locations_small"
    }
    for spec in specs.values():
        spec.validate("dmlab")
        assert spec.api == "gymnasium" and spec.requires == ("deepmind_lab",)


def test_listing_does_not_import_deepmind_lab_or_the_adapter():
    code = (
        "import sys; from puffer_plugin_dmlab import puffer_envs; puffer_envs(); "
        "assert 'deepmind_lab' not in sys.modules and 'puffer_plugin_dmlab.envs' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_deepmind_lab_says_how_to_get_it(no_deepmind_lab):
    plugins = load_plugins()
    assert "dmlab/lt_chasm" in plugins.env_ids()
    with pytest.raises(MissingDependencyError) as caught:
        make_raw("dmlab/lt_chasm", plugins=plugins)
    message = str(caught.value)
    assert "dmlab/lt_chasm needs deepmind_lab" in message
    assert "DeepMind Lab: in PufferTank only (no package index serves it)" in message
    assert "Install with: DeepMind" not in message  # the hint is no command
    assert f"git -C DIR checkout {docker.DMLAB_COMMIT}" in message and "--dmlab-source DIR" in message
    assert "README" in message


def test_puffer_envs_lists_dmlab_as_unavailable_with_the_hint():
    # A fresh interpreter where deepmind_lab is not installed (it is not on this machine).
    out = subprocess.run(
        [sys.executable, "-m", "puffer_core.cli.main", "envs", "--plugin", "dmlab", "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rows = {row["id"]: row for row in json.loads(out)["envs"]}
    assert REQUIRED_IDS <= set(rows)
    row = rows["dmlab/seekavoid_arena_01"]
    assert row["available"] is False and "deepmind_lab" in row["note"] and "PufferTank" in row["note"]


def test_make_through_the_core_with_the_double(lab_double):
    raw = make_raw("dmlab/nav_maze_static_01", width=8, height=6, num_steps=2)
    assert raw.lab.level == "nav_maze_static_01" and raw.num_steps == 2
    env = puffer_core.make("dmlab/seekavoid_arena_01", width=8, height=6, config={"episodeLengthSeconds": 0.1})
    assert type(env).__name__ == "GymnasiumEmulator"
    obs, _ = env.reset(seed=4)
    assert env.unflatten_observation(obs).shape == (6, 8, 3)
    lab = lab_double.Lab.instances[-1]
    assert lab.reset_calls[-1]["seed"] == 4
    done, infos = False, {}
    while not done:
        obs, _reward, terminated, truncated, infos = env.step(np.int64(0))
        done = terminated or truncated
    assert lab.actions[0].tolist() == [0, 0, 0, 1, 0, 0, 0]
    assert infos["episode_length"] == len(lab.actions) == 2  # 6 frames in steps of 4


def test_docker_layer_builds_the_wheel_in_its_own_stage_and_installs_it():
    layer = plugin.puffer_docker_layer()
    assert isinstance(layer, DockerLayer)
    layer.validate("dmlab")
    (stage,) = layer.stages
    assert isinstance(stage, BuildStage) and stage.name == "dmlab"
    assert stage.artifacts == (docker.WHEEL,)
    assert docker.WHEEL.startswith("/opt/dmlab/") and docker.WHEEL.endswith(".whl")
    assert [source.name for source in stage.sources] == ["dmlab-source"]
    assert stage.sources[0].path == docker.SRC
    build = " ".join(stage.run)
    assert "bazel --output_user_root" in build and "//python/pip_package:build_pip_package" in build
    assert "bazel-bootstrap" in stage.apt
    assert all("\n" not in step for step in (*stage.run, *layer.run))
    (install,) = layer.run
    assert "pip install --no-cache-dir --no-deps" in install and f'"{docker.WHEEL}"' in install
    assert "rm -rf /opt/dmlab" in install
    assert {"libosmesa6", "libegl1"} <= set(layer.apt)
    assert {"dm-env", "six"} <= set(layer.pip)


def test_docker_layer_pins_every_input_to_its_bytes():
    """The stage starts from the tank's base layer (its id), DM Lab is the user's source at one
    full commit (verified before the build), the build's Python tools are checked against their
    sha256; Bazel and the libraries are Debian's packages of the base's release."""
    (stage,) = plugin.puffer_docker_layer().stages
    assert stage.base == "${BASE}"
    assert re.fullmatch(r"[0-9a-f]{40}", docker.DMLAB_COMMIT)
    tools = stage.run[0]
    assert "--require-hashes -r /tmp/build-tools.txt" in tools
    for name in ("numpy", "setuptools", "wheel", "packaging"):
        assert re.search(rf"'{name}==[\w.]+ --hash=sha256:[0-9a-f]{{64}}'", tools), name
    assert stage.sources[0].verify is docker.check_source


def test_compat_axes_record_the_unpublished_package_as_tank_only():
    """deepmind-lab is on no index: its one cell is the image's build (1.0, the image's Python 3.11)."""
    axes = plugin.puffer_compat_axes()
    assert isinstance(axes, CompatAxes)
    axes.validate("dmlab")
    assert axes.package == "deepmind-lab" and axes.versions == ("1.0",) and axes.python == ("3.11",)
    assert axes.tank_only
