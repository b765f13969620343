"""The built-in ``classic`` plugin: gymnasium's classic-control envs and the probe envs."""

from __future__ import annotations

import functools
from typing import Any

from puffer_core.hooks import hookimpl
from puffer_core.specs import CompatAxes, EnvSpec

#: puffer id name -> (gymnasium id, description)
CLASSIC_CONTROL = {
    "cartpole": ("CartPole-v1", "balance a pole on a cart (Gymnasium CartPole-v1)"),
    "acrobot": ("Acrobot-v1", "swing a two-link arm above a line (Gymnasium Acrobot-v1)"),
    "mountaincar": ("MountainCar-v0", "drive an underpowered car up a hill (Gymnasium MountainCar-v0)"),
    "mountaincar_continuous": (
        "MountainCarContinuous-v0",
        "mountain car with a continuous throttle (Gymnasium MountainCarContinuous-v0)",
    ),
    "pendulum": ("Pendulum-v1", "swing up and balance a pendulum, continuous torque (Gymnasium Pendulum-v1)"),
}

PROBES = {
    "probe_dict": ("ProbeDictEnv", "probe: nested Dict/Tuple observation, Dict action", "gymnasium"),
    "probe_mixed": ("ProbeMixedActionEnv", "probe: mixed discrete + continuous Tuple action", "gymnasium"),
    "probe_multiagent": ("ProbeMultiAgentEnv", "probe: 3 agents that leave one by one (Parallel API)", "pettingzoo"),
}


def make_gymnasium(gym_id: str, **kwargs: Any) -> Any:
    """Build a gymnasium env; the passive checker is off since emulation validates spaces."""
    import gymnasium

    kwargs.setdefault("disable_env_checker", True)
    return gymnasium.make(gym_id, **kwargs)


def make_probe(class_name: str, **kwargs: Any) -> Any:
    from puffer_core import probes

    return getattr(probes, class_name)(**kwargs)


@hookimpl
def puffer_envs() -> list[EnvSpec]:
    specs = [
        EnvSpec(
            id=f"classic/{name}",
            creator=functools.partial(make_gymnasium, gym_id),
            description=description,
        )
        for name, (gym_id, description) in CLASSIC_CONTROL.items()
    ]
    specs += [
        EnvSpec(
            id=f"classic/{name}",
            creator=functools.partial(make_probe, class_name),
            api=api,
            description=description,
        )
        for name, (class_name, description, api) in PROBES.items()
    ]
    return specs


@hookimpl
def puffer_compat_axes() -> CompatAxes:
    return CompatAxes(
        package="gymnasium",
        versions=("0.29.1", "1.0.0", "1.1.1", "1.2.0"),
        python=("3.10", "3.11", "3.12", "3.13"),
        # gymnasium 0.29 predates numpy 2 (its Acrobot uses np.float_).
        pins={"0.29.1": {"numpy": "1.26.4"}},
    )
