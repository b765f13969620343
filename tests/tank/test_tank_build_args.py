"""Build arguments from this machine: reachable indexes without credentials, proxies."""

from __future__ import annotations

from puffer_core.tank.image.build_args import machine_build_args


def test_machine_build_args_keep_reachable_indexes_only():
    environ = {
        "PIP_EXTRA_INDEX_URL": "file:///opt/pypi/simple https://mirror.example.invalid/simple",
        "HTTPS_PROXY": "http://proxy.example.invalid:3128",
        "no_proxy": "localhost",
    }
    config = {
        "global.index-url": "https://user:token@private.example.invalid/simple",
        ":env:.default-timeout": "180",
        "global.trusted-host": "mirror.example.invalid",
    }
    args, notes = machine_build_args(environ, config)
    assert args == {
        "PIP_EXTRA_INDEX_URL": "https://mirror.example.invalid/simple",
        "PIP_TRUSTED_HOST": "mirror.example.invalid",
        "PIP_DEFAULT_TIMEOUT": "180",
        "HTTPS_PROXY": "http://proxy.example.invalid:3128",
        "no_proxy": "localhost",
    }
    assert any("file:///opt/pypi/simple" in note for note in notes)
    assert any("credentials" in note and "token" not in note for note in notes)
