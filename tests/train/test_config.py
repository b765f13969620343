"""`puffer_core.train.config.PPOConfig`: every setting is checked for its type, NaN, inf and
absurd values, in one line naming it (torch-free: `puffer train` checks before importing torch)."""

from __future__ import annotations

import dataclasses

import pytest

from puffer_core.errors import APIUsageError
from puffer_core.train.config import _CHECKS, PPOConfig


def test_every_setting_has_a_check():
    assert sorted(_CHECKS) == sorted(f.name for f in dataclasses.fields(PPOConfig))


def test_the_defaults_pass():
    PPOConfig().validate()


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(PPOConfig)])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "x", [1]])
def test_no_setting_takes_nan_inf_or_the_wrong_type(name, bad):
    with pytest.raises(APIUsageError, match=f"^{name} must be "):
        PPOConfig().replace(**{name: bad}).validate()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"num_envs": 100_000_000}, "num_envs must be ≥ 1 and ≤ 65,536, got 100,000,000"),
        ({"hidden_size": 1_000_000_000}, "hidden_size must be ≥ 1 and ≤ 16,384, got 1,000,000,000"),
        ({"steps": 10**13}, "steps must be ≥ 1 and ≤ 1,000,000,000,000"),
        ({"ent_coef": -0.1}, "ent_coef must be a number in [0, 100], got -0.1"),
        ({"learning_rate": 0}, "learning_rate must be a number in (0, 10], got 0"),
        ({"target_kl": 0.0}, "target_kl must be a number in (0, 100], got 0.0"),
        ({"num_workers": 0}, "num_workers must be ≥ 1 and ≤ 1,024, got 0"),
        ({"seed": -1}, "seed must be ≥ 0"),
        ({"on_fault": "ignore"}, "on_fault must be one of 'raise', 'restart', got 'ignore'"),
        ({"anneal_lr": 1}, "anneal_lr must be true or false, got 1"),
        ({"device": ""}, "device must be 'cpu', 'cuda' or 'cuda:N', got ''"),
        ({"policy": "gru"}, "policy must be one of 'mlp', 'lstm', got 'gru'"),
        ({"autoreset": "disabled"}, "autoreset must be one of 'next_step', 'same_step', got 'disabled'"),
        ({"batch_size": 40}, "batch_size 40 is more than num_envs 32; use a batch_size ≤ 32"),
        ({"batch_size": 0}, "batch_size must be ≥ 1"),
        ({"backend": "ray", "ray_address": "head"}, "ray_address must be 'auto', 'HOST:PORT' or 'ray://HOST:PORT'"),
        ({"backend": "ray", "placement": "scatter"}, "placement must be one of 'spread', 'pack', got 'scatter'"),
        ({"ray_address": "auto"}, "ray_address is for the Ray backend: it needs backend='ray' (--backend ray)"),
        ({"backend": "mp", "placement": "spread"}, "placement is for the Ray backend: it needs backend='ray'"),
    ],
)
def test_absurd_values_are_named(change, message):
    with pytest.raises(APIUsageError) as caught:
        PPOConfig().replace(**change).validate()
    assert str(caught.value).startswith(message)


def test_optional_settings_take_none():
    PPOConfig(num_workers=None, batch_size=None, device=None, target_kl=None, torch_threads=None).validate()


@pytest.mark.parametrize("address", ["auto", "10.0.0.5:6379", "head-1.lan:6379", "ray://10.0.0.5:10001", "[::1]:6379"])
def test_ray_settings_take_cluster_addresses_with_the_ray_backend(address):
    config = PPOConfig(backend="ray", ray_address=address, placement="spread").validate()
    assert (config.ray_address, config.placement) == (address, "spread")


def test_saved_settings_with_unknown_keys_are_refused():
    with pytest.raises(APIUsageError, match=r"run/policy.pt: unknown PPO setting\(s\) 'turbo'"):
        PPOConfig.from_saved({**PPOConfig().to_dict(), "turbo": True}, "run/policy.pt")
    with pytest.raises(APIUsageError, match=r"run/policy.pt: the saved settings are not valid: gamma must be"):
        PPOConfig.from_saved({"gamma": float("inf")}, "run/policy.pt")
    assert PPOConfig.from_saved({"gamma": 0.5}, "x").gamma == 0.5
