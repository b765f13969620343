"""The plugin as Puffer Core sees it: hooks, listing, and the missing ale-py / OpenCV paths."""

from __future__ import annotations

import importlib.metadata
import json
import os

import ale_py  # a dependency: a broken install must fail, not skip
import puffer_plugin_atari
from packaging.version import Version
from puffer_plugin_atari import INSTALL_HINT
from puffer_plugin_atari.games import MULTIPLAYER_ONLY, STANDARD_GAMES, installed_game_ids

from puffer_core import CompatAxes, DockerLayer
from puffer_core.testing import envs_json, load_plugins, run_puffer, run_python


def test_plugin_loads_through_its_entry_point():
    plugins = load_plugins(environ={})
    info = plugins.plugins["atari"]
    assert info.status == "loaded", info.error
    assert info.distribution == "puffer-plugin-atari" and info.version == "0.1.0"
    assert set(info.hooks) == {"puffer_envs", "puffer_docker_layer", "puffer_compat_axes"}
    assert {"atari/breakout", "atari/montezuma_revenge", "atari/space_invaders", "atari/pong"} <= set(info.envs)


def test_ids_come_from_the_installed_ale_py():
    from ale_py import roms

    expected = sorted(set(roms.get_all_rom_ids()) - MULTIPLAYER_ONLY)
    assert list(installed_game_ids()) == expected
    assert {spec.id for spec in puffer_plugin_atari.env_specs()} == {f"atari/{game}" for game in expected}


def test_builtin_list_is_snake_case_and_covers_the_classics():
    assert len(STANDARD_GAMES) == len(set(STANDARD_GAMES)) >= 100
    assert all(game == game.lower() and " " not in game for game in STANDARD_GAMES)
    assert {"breakout", "montezuma_revenge", "space_invaders", "pong", "seaquest", "qbert"} <= set(STANDARD_GAMES)
    assert not MULTIPLAYER_ONLY & set(STANDARD_GAMES)


def test_docker_layer_validates():
    layer = puffer_plugin_atari.puffer_docker_layer()
    assert isinstance(layer, DockerLayer)
    layer.validate("atari")


def test_compat_axes_validate_and_record_the_known_bad_cells():
    axes = puffer_plugin_atari.puffer_compat_axes()
    assert isinstance(axes, CompatAxes)
    axes.validate("atari")
    assert axes.package == "ale-py"
    assert axes.versions[0] == "0.8.1" and axes.versions[-1].startswith("0.12")
    assert Version(axes.pins["0.11.2"]["gymnasium"]) >= Version("1.1")

    def bad(**pins: str) -> bool:
        return any(kb.matches(pins) for kb in axes.known_bad)

    assert bad(**{"ale-py": "0.8.1", "python": "3.10"})  # ROMs via AutoROM
    assert bad(**{"ale-py": "0.11.2", "gymnasium": "1.0.0"})
    assert bad(**{"ale-py": "0.9.1", "python": "3.13"})
    assert not bad(**{"ale-py": "0.11.2", "gymnasium": "1.1.1", "python": "3.13"})
    assert not bad(**{"ale-py": "0.12.1", "gymnasium": "1.2.0", "python": "3.10"})
    assert importlib.metadata.version("ale-py") in axes.versions


def test_puffer_envs_json_lists_the_ids():
    rows = {row["id"]: row for row in envs_json("--plugin", "atari")["envs"]}
    assert "atari/breakout" in rows and "atari/montezuma_revenge" in rows
    assert all(row["available"] for row in rows.values())


def test_envs_listed_with_a_clear_message_when_ale_py_is_missing():
    rows = {row["id"]: row for row in envs_json("--plugin", "atari", block=("ale_py",))["envs"]}
    assert set(rows) == {f"atari/{game}" for game in STANDARD_GAMES}  # the built-in list
    for row in rows.values():
        assert row["available"] is False and row["note"] == f"needs ale_py: {INSTALL_HINT}"
    result = run_puffer("run", "atari/breakout", "--steps", "10", block=("ale_py",))
    assert result.returncode != 0
    assert INSTALL_HINT in result.stderr and "Traceback" not in result.stderr


def test_specs_declare_the_versioned_requirement_and_the_per_life_signal():
    for spec in puffer_plugin_atari.env_specs():
        assert spec.requires == ("ale_py", "ale-py>=0.9")
        assert spec.install_hint == INSTALL_HINT == "pip install -U 'ale-py>=0.9'"
        assert spec.step_info_keys == ("life_lost",)
        spec.validate("atari")


def test_too_old_ale_py_is_marked_unavailable(tmp_path):
    # What pip leaves for ale-py 0.8.1, found ahead of the real (newer) one on sys.path.
    dist_info = tmp_path / "ale_py-0.8.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: ale-py\nVersion: 0.8.1\n")
    old = {"PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    rows = {row["id"]: row for row in envs_json("--plugin", "atari", extra_env=old)["envs"]}
    assert "atari/breakout" in rows
    for row in rows.values():
        assert row["available"] is False and row["note"] == f"needs ale-py>=0.9: {INSTALL_HINT}"
    result = run_puffer("run", "atari/breakout", "--steps", "10", extra_env=old)
    assert result.returncode != 0
    assert "ale-py>=0.9" in result.stderr and INSTALL_HINT in result.stderr and "Traceback" not in result.stderr


def test_preprocessing_without_opencv_says_what_to_install():
    result = run_python(
        """
        from puffer_core import make_raw
        from puffer_core.errors import MissingDependencyError
        try:
            make_raw("atari/breakout")
        except MissingDependencyError as exc:
            print("MISSING:", exc)
        env = make_raw("atari/breakout", preprocess=False)
        print("RAW:", env.reset(seed=0)[0].shape)
        """,
        block=("cv2",),
    )
    assert result.returncode == 0, result.stderr
    assert "MISSING:" in result.stdout and "opencv-python-headless" in result.stdout
    assert "RAW: (210, 160, 3)" in result.stdout


def test_plugin_import_and_listing_do_not_import_ale_py():
    # gymnasium 0.29 imports cv2 itself (its wrappers package), so compare with a baseline.
    result = run_python(
        """
        import sys
        import gymnasium, puffer_core
        before = sorted(m for m in ("ale_py", "cv2") if m in sys.modules)
        import puffer_plugin_atari
        puffer_plugin_atari.env_specs()
        after = sorted(m for m in ("ale_py", "cv2") if m in sys.modules)
        print(json.dumps([before, after]))
        """.replace("import sys", "import json, sys")
    )
    assert result.returncode == 0, result.stderr
    before, after = json.loads(result.stdout.strip().splitlines()[-1])
    assert "ale_py" not in after and after == before


def test_ales_own_v5_ids_are_this_plugins_envs():
    import gymnasium

    gymnasium.register_envs(ale_py)
    plugins = load_plugins(environ={})
    specs = [plugins.env_specs[env_id] for env_id in plugins.plugins["atari"].envs]
    missing = [spec.aliases for spec in specs if not set(spec.aliases) <= set(gymnasium.envs.registry)]
    assert not missing, f"aliases ale-py does not register: {missing}"
    assert plugins.get_spec("ALE/Breakout-v5").id == "atari/breakout"
    assert plugins.get_spec("ALE/TicTacToe3D-v5").id == "atari/tic_tac_toe_3d"
    # ALE's older ids are no plugin env's: gymnasium's own, made by gymnasium.make.
    assert plugins.get_spec("BreakoutNoFrameskip-v4").id == "BreakoutNoFrameskip-v4"


def test_an_ale_id_runs_the_plugins_env():
    proc = run_puffer("run", "ALE/Pong-v5", "--steps", "20", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "puffer: ALE/Pong-v5 is atari/pong (atari's env" in proc.stderr
    assert json.loads(proc.stdout)["env"] == "atari/pong"
