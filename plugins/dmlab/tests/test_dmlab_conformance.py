"""Every dmlab/<level>, as puffer_core.make emulates it, passes Gymnasium's own ``check_env``.

Against the deepmind_lab TEST DOUBLE: the real module is built only inside PufferTank.
"""

from __future__ import annotations

import puffer_core
import pytest
from puffer_core.testing import GYMNASIUM_CHECK, check_env, peer_checker_name, run_peer_checker

import puffer_plugin_dmlab as plugin

ENV_IDS = [spec.id for spec in plugin.puffer_envs()]


def assert_passes_check_env(env_id, **kwargs):
    env = puffer_core.make(env_id, **kwargs)
    try:
        assert peer_checker_name(env) == GYMNASIUM_CHECK
        run_peer_checker(env)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_emulated_level_passes_gymnasium_check_env(lab_double, env_id):
    assert_passes_check_env(env_id)


def test_rgb_array_rendering_passes_the_checkers_render_check(lab_double):
    assert_passes_check_env("dmlab/seekavoid_arena_01", render_mode="rgb_array", width=8, height=6)


def test_puffer_check_runs_check_env_on_a_level(lab_double_everywhere):
    report = check_env("dmlab/lt_chasm", steps=8)
    assert report.passed, report.summary()
    (peer,) = [result for result in report.results if result.name == GYMNASIUM_CHECK]
    assert peer.passed and not peer.skipped
