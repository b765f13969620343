"""Every atari/<game>, as puffer_core.make emulates it, passes Gymnasium's own ``check_env``.

Here rather than in the core's tests/testing/test_conformance.py: ~100 games at ~0.6 s each (ale-py
reloads the ROM on each of the checker's seeded resets) is over a minute.
"""

from __future__ import annotations

import ale_py  # noqa: F401  (a dependency: a broken install must fail, not skip)
import puffer_plugin_atari
import pytest

import puffer_core
from puffer_core.testing import GYMNASIUM_CHECK, peer_checker_name, run_peer_checker

ENV_IDS = [spec.id for spec in puffer_plugin_atari.env_specs()]


def test_every_installed_game_is_covered():
    assert len(ENV_IDS) >= 100 and "atari/breakout" in ENV_IDS


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_emulated_game_passes_gymnasium_check_env(env_id):
    env = puffer_core.make(env_id)
    try:
        assert peer_checker_name(env) == GYMNASIUM_CHECK
        run_peer_checker(env)
    finally:
        env.close()
