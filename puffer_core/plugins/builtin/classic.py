"""The built-in ``classic`` plugin: gymnasium's classic-control envs and the probe envs."""

from __future__ import annotations

import functools
from typing import Any

from puffer_core.plugins.builtin import probes
from puffer_core.specs.compat import CompatAxes
from puffer_core.specs.declarations import EnvSpec
from puffer_core.specs.hooks import hookimpl
from puffer_core.specs.kwarg_rules import Flag, FloatRange, IntRange, KwargRule

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

#: The classic-control envs whose gymnasium registration has a vector entry point (native batches).
VECTOR_ENTRY_POINTS = frozenset({"cartpole"})

PROBES = {
    "probe_dict": ("ProbeDictEnv", "probe: nested Dict/Tuple observation, Dict action", "gymnasium"),
    "probe_mixed": ("ProbeMixedActionEnv", "probe: mixed discrete + continuous Tuple action", "gymnasium"),
    "probe_multiagent": ("ProbeMultiAgentEnv", "probe: 3 agents that leave one by one (Parallel API)", "pettingzoo"),
    "probe_memory": (
        "MemoryProbeEnv",
        "memory probe: 2 actions, obs [cue, query]: a cue -1 or +1, blank_steps blank obs (default 4), then the "
        "query: reward +1 for action = (cue > 0) else -1 (V = 1 with memory, chance without: needs policy=lstm)",
        "gymnasium",
    ),
    "probe_memory_2agents": (
        "MemoryProbeTwoAgentEnv",
        "memory probe for 2 agents, each with its own cue; agent_1 has one blank step fewer, its row then masked "
        "(Parallel API)",
        "pettingzoo",
    ),
}

#: The creator kwargs a checkpoint may bring back (EnvSpec.restorable), per id name: the
#: episode limit of every classic-control env and each env's own knobs.
_EPISODE_STEPS = {"max_episode_steps": IntRange(1, 10_000_000)}
CLASSIC_RESTORABLE: dict[str, dict[str, KwargRule]] = {
    "cartpole": {**_EPISODE_STEPS, "sutton_barto_reward": Flag()},
    "acrobot": _EPISODE_STEPS,
    "mountaincar": {**_EPISODE_STEPS, "goal_velocity": FloatRange(-10, 10)},
    "mountaincar_continuous": {**_EPISODE_STEPS, "goal_velocity": FloatRange(-10, 10)},
    "pendulum": {**_EPISODE_STEPS, "g": FloatRange(0, 100)},
}
_EPISODE_LENGTH = IntRange(1, 100_000)
PROBE_RESTORABLE: dict[str, dict[str, KwargRule]] = {
    "probe_dict": {"episode_length": _EPISODE_LENGTH},
    "probe_mixed": {"episode_length": _EPISODE_LENGTH},
    "probe_multiagent": {"num_agents": IntRange(1, 64), "episode_length": _EPISODE_LENGTH},
    "probe_memory": {"blank_steps": IntRange(0, 10_000)},
    "probe_memory_2agents": {"blank_steps": IntRange(0, 10_000)},
}

#: Andy Jones' RL debugging probes (puffer_core.plugins.builtin.probes.DebugProbeEnv): number -> what it tests
DEBUG_PROBES = {
    1: "debug probe 1, value: 1 action, obs 0, reward +1 (V = 1)",
    2: "debug probe 2, obs-dependent value: 1 action, obs -1 or +1, reward = obs (V(obs) = obs)",
    3: "debug probe 3, discounting: 1 action, obs 0 then 1, reward +1 at the end (V(0) = gamma, V(1) = 1)",
    4: "debug probe 4, policy: 2 actions, obs 0, reward +1 for action 1, -1 for action 0 (V = 1)",
    5: "debug probe 5, obs-dependent policy: 2 actions, obs -1 or +1, reward +1 for action = (obs > 0) else -1 (V = 1)",
}

#: id suffix -> (class in puffer_core.plugins.builtin.probes, api, how the variant presents the probe)
DEBUG_PROBE_VARIANTS = {
    "": ("DebugProbeEnv", "gymnasium", ""),
    "_dict": ("DebugProbeDictEnv", "gymnasium", "; obs inside a nested Dict of mixed dtypes"),
    "_2agents": ("DebugProbeTwoAgentEnv", "pettingzoo", "; 2 staggered agents, dead rows masked (Parallel API)"),
}


def make_gymnasium(gym_id: str, **kwargs: Any) -> Any:
    """Build a gymnasium env; the passive checker is off since emulation validates spaces."""
    import gymnasium

    kwargs.setdefault("disable_env_checker", True)
    return gymnasium.make(gym_id, **kwargs)


def make_gymnasium_vec(gym_id: str, num_envs: int, **kwargs: Any) -> Any:
    """``num_envs`` of a gymnasium env in its own vector entry point (CartPole's numpy
    ``CartPoleVectorEnv``): one array step for the batch. Seeding: one generator from the seed."""
    import gymnasium

    kwargs.pop("disable_env_checker", None)  # the vector entry point takes no checker
    return gymnasium.make_vec(gym_id, num_envs, vectorization_mode="vector_entry_point", **kwargs)


def make_probe(class_name: str, **kwargs: Any) -> Any:
    return getattr(probes, class_name)(**kwargs)


def make_probe_batch(class_name: str, num_envs: int, **kwargs: Any) -> Any:
    """``num_envs`` probes in gymnasium's ``SyncVectorEnv`` (env i seeded seed + i, as the per-env
    path seeds it): a native batch that steps the same trajectories as single envs, so the
    probes check the hosting of native batches; it is no faster than single envs."""
    from gymnasium.vector import SyncVectorEnv

    return SyncVectorEnv([functools.partial(make_probe, class_name, **kwargs)] * num_envs)


@hookimpl
def puffer_envs() -> list[EnvSpec]:
    specs = [
        EnvSpec(
            id=f"classic/{name}",
            creator=functools.partial(make_gymnasium, gym_id),
            description=description,
            restorable=CLASSIC_RESTORABLE[name],
            batch_creator=functools.partial(make_gymnasium_vec, gym_id) if name in VECTOR_ENTRY_POINTS else None,
            aliases=(gym_id,),
        )
        for name, (gym_id, description) in CLASSIC_CONTROL.items()
    ]
    specs += [
        EnvSpec(
            id=f"classic/{name}",
            creator=functools.partial(make_probe, class_name),
            api=api,
            description=description,
            restorable=PROBE_RESTORABLE[name],
        )
        for name, (class_name, description, api) in PROBES.items()
    ]
    specs += [
        EnvSpec(
            id=f"classic/probe_{number}{suffix}",
            creator=functools.partial(make_probe, class_name),
            kwargs={"number": number},
            api=api,
            description=description + variant,
            restorable={"number": IntRange(1, 5)},
            batch_creator=functools.partial(make_probe_batch, class_name) if api == "gymnasium" else None,
        )
        for suffix, (class_name, api, variant) in DEBUG_PROBE_VARIANTS.items()
        for number, description in DEBUG_PROBES.items()
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
        # numpy's newest releases as rows of their own (`puffer matrix discover`): every other
        # plugin installs gymnasium, so this row says first whether a numpy release breaks it.
        follow={"numpy": ">=2.5"},
    )
