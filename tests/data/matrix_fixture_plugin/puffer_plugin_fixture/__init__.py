"""A compat-matrix fixture plugin: gymnasium as its "environment package", six as a companion.

Its axes give one cell of each kind the matrix knows, on real installs of small packages:

- gymnasium 1.2.0 (six 1.17.0), Python 3.11: pass
- gymnasium 1.1.1 (six 1.16.0), Python 3.11: smoke-failed (the env refuses gymnasium 1.1.1)
- gymnasium 1.0.0 (six 99.0.0, which does not exist), Python 3.11: install-failed
- gymnasium 1.0.0, Python 3.99: excluded (known bad)
- gymnasium 1.1.1 / 1.2.0, Python 3.99: interpreter-missing
"""

from __future__ import annotations

from typing import Any

from puffer_core import CompatAxes, EnvSpec, KnownBad, hookimpl

#: The envs the matrix smoke run uses (instead of the first two declared).
PUFFER_SMOKE_ENVS = ("fixture/cartpole",)

BROKEN_WITH = "1.1.1"


def make_cartpole(**kwargs: Any) -> Any:
    import importlib.metadata

    import gymnasium

    version = importlib.metadata.version("gymnasium")
    if version == BROKEN_WITH:
        raise RuntimeError(f"fixture: this env refuses gymnasium {version}")
    return gymnasium.make("CartPole-v1", disable_env_checker=True, **kwargs)


def make_never(**kwargs: Any) -> Any:
    raise AssertionError("the smoke run must only use PUFFER_SMOKE_ENVS")


@hookimpl
def puffer_envs() -> list[EnvSpec]:
    return [
        EnvSpec("fixture/never", make_never, description="listed first, but not a smoke env"),
        EnvSpec("fixture/cartpole", make_cartpole, description="CartPole, except with gymnasium 1.1.1"),
    ]


@hookimpl
def puffer_compat_axes() -> CompatAxes:
    return CompatAxes(
        package="gymnasium",
        versions=("1.0.0", "1.1.1", "1.2.0"),
        python=("3.11", "3.99"),
        pins={"1.0.0": {"six": "99.0.0"}, "1.1.1": {"six": "1.16.0"}, "1.2.0": {"six": "1.17.0"}},
        known_bad=(
            KnownBad(
                when={"gymnasium": "<1.1", "python": "==3.99"},
                reason="fixture: gymnasium 1.0 predates Python 3.99",
            ),
        ),
    )
