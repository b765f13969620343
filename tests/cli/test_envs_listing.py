"""`puffer envs`: grouped by plugin, every line within the terminal's width, an install hint once
per plugin; `--json` whole."""

from __future__ import annotations

import json

import pytest
from plugin_site import BROKEN_IMPORT, run_puffer, write_plugin

from puffer_core.plugins import load_plugins

HINT = "pip install definitely-missing-package-of-needy --index-url somewhere-you-trust " + "and more words " * 6
NEEDY = f'''
import puffer_core
from puffer_core import EnvSpec

def _make():
    import gymnasium
    return gymnasium.make("CartPole-v1")

@puffer_core.hookimpl
def puffer_envs():
    needs = dict(requires=("definitely_missing_module_of_needy",), install_hint="{HINT.strip()}")
    return [
        EnvSpec("needy/level_" + str(n), _make, description="a level " + "that goes on " * 12, **needs)
        for n in range(30)
    ] + [EnvSpec("needy/there", _make, description="one that can be made")]
'''


def listing(site, width: int | None, *args: str) -> str:
    extra = {"COLUMNS": str(width)} if width else {}
    proc = run_puffer(site, "envs", *args, extra_env=extra)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def needy_site(site):
    write_plugin(site, "needy", NEEDY, version="2.0.0")
    write_plugin(site, "broken", BROKEN_IMPORT)
    return site


@pytest.mark.parametrize("width", [120, 80, 50, None])
def test_every_line_fits_the_width_in_bytes_too(needy_site, width):
    text = listing(needy_site, width)
    lines = text.splitlines()
    assert max(len(line.encode()) for line in lines) <= (width or 80)  # None: a pipe, 80 columns
    assert "definitely_missing_dependency_of_broken" in words(text)  # the failed plugin, wrapped too


def test_the_install_hint_is_said_once_per_plugin_and_the_envs_it_concerns_are_marked(needy_site):
    text = listing(needy_site, 100, "--plugin", "needy")
    lines = text.splitlines()
    assert lines[0] == "needy (puffer-plugin-needy 2.0.0): 31 envs, 1 available here"
    assert words(text).count(words(HINT)) == 1
    marked = "x needy/level_0, needy/level_1, needy/level_10 and 27 more: needs definitely_missing"
    assert words(text).count(marked) == 1
    rows = [line for line in lines if " gymnasium " in line]
    assert len(rows) == 31 and sum(row.startswith("  x needy/level_") for row in rows) == 30
    assert any(row.startswith("    needy/there ") for row in rows)


def test_json_keeps_every_field_whole(needy_site):
    data = json.loads(listing(needy_site, 40, "--json"))
    rows = {row["id"]: row for row in data["envs"]}
    level = rows["needy/level_0"]
    assert level["plugin"] == "needy" and level["description"] == "a level " + "that goes on " * 12
    assert level["available"] is False and level["needs"] == ["definitely_missing_module_of_needy"]
    assert level["install_hint"] == HINT.strip() and level["note"].endswith(HINT.strip())
    assert rows["needy/there"]["available"] is True


def test_the_installed_plugins_fit_120_columns_and_dmlab_says_its_hint_once():
    text = listing(None, 120)
    assert all(len(line.encode()) <= 120 for line in text.splitlines())
    data = json.loads(listing(None, None, "--json"))
    plugins = load_plugins()
    assert {(row["id"], row["plugin"]) for row in data["envs"]} == {
        (env_id, plugins.env_owner[env_id]) for env_id in plugins.env_ids()
    }
    dmlab = [row for row in data["envs"] if row["plugin"] == "dmlab"]
    if not dmlab or dmlab[0]["available"]:
        pytest.skip("the dmlab plugin is not installed here, or DeepMind Lab is (in PufferTank)")
    assert len(dmlab) == 44 and words(text).count(words(dmlab[0]["note"])) == 1
    assert len(text.splitlines()) < 400  # the 44 levels' build instructions once, not 44 times


def test_native_batches_are_named_per_plugin_and_per_env_in_json():
    text = listing(None, 120)
    headers = {line.split(" (")[0]: line for line in text.splitlines() if line and not line.startswith(" ")}
    assert headers["classic"].endswith("25 envs, 11 with native batches")  # cartpole and the probes 1-5
    assert not headers["nethack"].endswith("native batches")
    rows = {row["id"]: row for row in json.loads(listing(None, None, "--json"))["envs"]}
    assert rows["classic/cartpole"]["native"] is True and rows["classic/acrobot"]["native"] is False
    if "atari/breakout" in rows:
        assert headers["atari"].endswith("native batches") and rows["atari/breakout"]["native"] is True


def test_gymnasium_lists_the_registered_ids_no_plugin_covers():
    data = json.loads(listing(None, None, "--gymnasium", "--json"))
    ids = {row["id"]: row["entry_point"] for row in data["gymnasium"]}
    assert ids["FrozenLake-v1"] == "gymnasium.envs.toy_text.frozen_lake:FrozenLakeEnv"
    assert "CartPole-v1" not in ids  # classic/cartpole's alias: a plugin covers it
    rows = {row["id"]: row for row in json.loads(listing(None, None, "--json"))["envs"]}
    assert rows["classic/cartpole"]["aliases"] == ["CartPole-v1"]
    assert not {row["id"] for row in rows.values()} & set(ids)  # `puffer envs` itself: the plugins' envs only
    lines = listing(None, 120, "--gymnasium").splitlines()
    assert lines[0].startswith("gymnasium ") and f"{len(ids)} registered ids no plugin covers" in lines[0]
    assert any(line.split() == ["FrozenLake-v1", ids["FrozenLake-v1"]] for line in lines)
    assert all(len(line.encode()) <= 80 for line in listing(None, 80, "--gymnasium").splitlines())
