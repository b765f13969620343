"""The vector settings worth measuring (puffer_core.vector.settings): autotune's grid holds
every setting the bench compares, and only settings vector.make accepts."""

from __future__ import annotations

from puffer_core import vector
from puffer_core.vector import settings
from puffer_core.vector.settings import Setting, default_num_envs, settings_grid


def test_grid_holds_every_bench_setting_and_only_valid_ones():
    for num_envs, cpus in ((16, 2), (8, 2), (16, 8), (5, 4), (2, 2), (1, 2)):
        grid = settings_grid(num_envs, cpus)
        assert grid[0] == Setting("serial", 1, num_envs) and len(set(grid)) == len(grid)
        mp = {(s.num_workers, s.batch_size) for s in grid if s.backend != "serial" and not s.main_share}
        main = {(s.num_workers, s.batch_size) for s in grid if s.main_share}
        assert set(settings.mp_settings(num_envs, cpus)) <= mp
        assert set(settings.main_share_settings(num_envs, cpus)) <= main
        for s in grid[1:]:
            vector.check_counts(num_envs, s.num_workers + s.main_share, s.batch_size, "multiprocessing")
            assert s.num_workers <= num_envs and s.batch_size in (num_envs, num_envs // 2)
            if s.main_envs is not None:  # one env lighter than the even share
                assert s.main_share and s.batch_size == num_envs
                assert s.main_envs == num_envs // (s.num_workers + 1) - 1 and s.make_kwargs(num_envs)[
                    "vector_kwargs"
                ] == {"main_share": s.main_envs}
            elif s.main_share:
                assert s.make_kwargs(num_envs)["vector_kwargs"] == {"main_share": True}
            else:  # the default needs no saying: the pasted call stays short
                assert "vector_kwargs" not in s.make_kwargs(num_envs)
    names = [s.name for s in settings_grid(16, cpus=8)]
    assert "Multiprocessing w=7 b=16" in names and "Multiprocessing w=7+main b=16" in names  # cores - 1
    assert "Multiprocessing w=16 b=8" in names  # 2 × cores
    assert "Multiprocessing w=1+main(7) b=16" in [s.name for s in settings_grid(16, cpus=2)]


def test_default_num_envs_follows_the_standard_bench():
    assert default_num_envs("nethack/score") == 8
    assert default_num_envs("atari/breakout") == 8
    assert default_num_envs("classic/cartpole") == 16
    assert default_num_envs(lambda: None) == 16


def test_main_share_settings_leave_a_core_to_the_main_process():
    assert settings.main_share_settings(16, cpus=2) == [(1, 16), (1, 8), (2, 16)]
    assert settings.main_share_settings(2, cpus=8) == [(1, 2), (1, 1)]


def test_mp_settings_cover_one_worker_per_core_and_envpool():
    assert settings.mp_settings(16, cpus=2) == [(1, 16), (2, 16), (2, 8), (4, 16), (4, 8)]
    assert settings.mp_settings(3, cpus=2) == [(1, 3), (2, 3), (3, 3), (3, 1)]
    assert settings.mp_settings(1, cpus=8) == [(1, 1)]


def test_the_ray_grid_is_serial_then_ray_at_the_multiprocessing_settings():
    cluster = {"address": "10.0.0.1:6379", "placement": "spread"}
    grid = settings.ray_grid(8, cpus=2, vector_kwargs=cluster)
    assert grid[0] == Setting("serial", 1, 8)
    assert [(s.backend, s.num_workers, s.batch_size) for s in grid[1:]] == [
        ("ray", w, b) for w, b in settings.mp_settings(8, cpus=2)
    ]
    assert grid[1].name == "Ray w=1 b=8"
    assert grid[1].make_kwargs(8) == {
        "num_envs": 8,
        "num_workers": 1,
        "batch_size": 8,
        "backend": "ray",
        "vector_kwargs": cluster,
    }
    assert "vector_kwargs" not in settings.ray_grid(8, cpus=2)[1].make_kwargs(8)  # Ray on this machine
