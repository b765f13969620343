"""Every installed env, as ``puffer_core.make`` emulates it, passes its peer library's own checker.

Gymnasium's ``check_env`` for single-agent envs, PettingZoo's ``parallel_api_test`` for
multi-agent ones (``puffer_core.testing.run_peer_checker``). Envs whose package is missing
here are not installed and not collected.
"""

from __future__ import annotations

import pytest

import puffer_core
from puffer_core.env.environments import missing_requirements
from puffer_core.plugins import FAILED, get_plugins
from puffer_core.testing import run_peer_checker

# Plugins whose own tests run this check on each of their envs. Atari's ~100 games take over
# a minute (ale-py reloads the ROM on every seeded reset, and the checker makes five), too
# long here: plugins/atari/tests/test_atari_conformance.py. dmlab's envs need deepmind_lab,
# installed only in PufferTank: plugins/dmlab/tests/test_dmlab_conformance.py runs them on
# the plugin's test double.
COVERED_BY_PLUGIN_TESTS = {"atari", "dmlab"}


def installed_env_ids() -> list[str]:
    """Ids of every env of every loaded plugin that can be made here, but those covered by their plugin's tests."""
    plugins = get_plugins()
    return [
        env_id
        for env_id in plugins.env_ids()
        if plugins.env_owner[env_id] not in COVERED_BY_PLUGIN_TESTS
        and not missing_requirements(plugins.get_spec(env_id))
    ]


@pytest.mark.parametrize("env_id", installed_env_ids())
def test_emulated_env_passes_its_peer_checker(env_id):
    env = puffer_core.make(env_id)
    try:
        run_peer_checker(env)
    finally:
        env.close()


def test_every_installed_plugin_loads_so_none_of_its_envs_is_left_out():
    plugins = get_plugins()
    failed = {name: info.error for name, info in plugins.plugins.items() if info.status == FAILED}
    assert not failed, f"these plugins failed to load, so their envs are not checked: {failed}"
    assert {"classic/cartpole", "classic/probe_multiagent"} <= set(installed_env_ids())
