"""Flat emulation: any Gymnasium or PettingZoo env becomes one with a flat observation
buffer, a flat action space and fixed agent slots.

Observations
    The observation tree is laid out in one aligned numpy structured dtype (``obs_dtype``)
    and exposed as a 1-D ``Box``: of the leaves' dtype when they all share one, else of uint8
    bytes. ``unflatten_observation`` returns zero-copy views, for one row or a batch.
Actions
    A bare Discrete stays ``Discrete(n)``; other all-discrete trees become one
    ``MultiDiscrete``; trees with a Box leaf become one float ``Box`` (mixed trees included).
    See :class:`puffer_core.env.flatten.ActionLayout` for the exact rules.
Agents
    ``PettingZooEmulator`` gives every name in ``possible_agents`` a fixed row. A row is
    live (``mask`` True) on the steps its agent reports an observation, including the step
    it ends on; afterwards its observation is zeroed and its mask False. When the episode
    is over for everyone, every row has ``terminals | truncations`` True (rows that ended
    earlier get both flags), so ``emulator.done`` and ``(terminals | truncations).all()``
    agree.

Observations returned
    ``reset`` and ``step`` return a fresh copy of the flat observation (Gymnasium's contract:
    a caller may keep it across steps). ``step_in_place`` is the same step without that copy:
    it returns the buffer itself, which the next step overwrites; the vector backends use it,
    since they hand out their shared buffers anyway.

Emulators never autoreset: the vector layer resets an env on the step after it ended.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from puffer_core.env.buffers import Buffers
from puffer_core.env.flatten import ActionLayout, ObservationLayout, observation_dtype
from puffer_core.env.postprocess import EpisodeStats
from puffer_core.errors import APIUsageError, SpaceError
from puffer_core.plugins.apis import is_aec, is_parallel, to_parallel

__all__ = [
    "ActionLayout",
    "Buffers",
    "GymnasiumEmulator",
    "ObservationLayout",
    "PettingZooEmulator",
    "emulate",
    "observation_dtype",
    "offer_observation_buffer",
    "to_parallel",
]


def _scalar_store(array: np.ndarray) -> Any:
    """A memoryview of a 1-row array when possible: item assignment on it costs half what
    numpy's does, which matters on CartPole-sized steps."""
    try:
        return memoryview(array)
    except (TypeError, ValueError, BufferError):
        return array


def offer_observation_buffer(env: Any, views: Any) -> bool:
    """Offer ``views`` (the observation tree of zero-copy views into the buffer row) to the
    first layer of ``env``'s wrapper chain that defines ``puffer_bind_observation(views)``.

    The method returns True to promise that, from then on, the observations the env returns
    hold exactly these arrays, already filled in (an env whose engine writes into buffers it
    is handed, like NLE's); the emulator then skips the copy of every leaf that *is* its
    view. It returns False when it cannot, and the emulator copies as usual.
    """
    layer, depth = env, 0
    while layer is not None and depth < 64:
        if callable(getattr(type(layer), "puffer_bind_observation", None)):
            return bool(layer.puffer_bind_observation(views))
        layer, depth = getattr(layer, "env", None), depth + 1
    return False


def _compile_step(emu: GymnasiumEmulator) -> Any:
    """The emulator's ``step`` as a closure over everything it touches.

    On a CartPole-sized step (~5 µs) every lookup shows, so the closure reads free
    variables instead of ``self.…``, copies a single-leaf observation inline, stores scalars
    through memoryviews (half the cost of numpy item assignment) and, when the env is an
    ``EpisodeStats``, steps the env beneath it and calls its ``record_step`` instead of
    paying for its Python frame.
    """
    env = emu.env
    stats = env if type(env) is EpisodeStats else None  # exact type: an overridden step must run
    env_step = stats.env.step if stats is not None else env.step
    record = stats.record_step if stats is not None else None
    to_env_action = emu._to_env_action
    layout, buf, row = emu.obs_layout, emu.buf, emu._obs
    diagnose = layout.diagnose
    rewards, terminals, truncations = buf.rewards, buf.terminals, buf.truncations
    reward_mv, terminal_mv, truncation_mv = (_scalar_store(a) for a in (rewards, terminals, truncations))
    # One plain leaf is copied inline; a zero-copy env goes through the identity-checking writer.
    dst = layout.views(row)[0] if layout.single_leaf and not emu.zero_copy else None
    write = emu._write

    def store_scalars(reward: Any, terminated: Any, truncated: Any) -> None:
        rewards[0] = reward
        terminals[0] = terminated
        truncations[0] = truncated

    def step(action: Any) -> tuple[np.ndarray, Any, Any, Any, dict]:
        ob, reward, terminated, truncated, info = env_step(to_env_action(action))
        try:
            if dst is not None:
                dst[...] = ob  # inline: one leaf, no call
            else:
                write(ob)
        except Exception as e:  # the fast path checks nothing; explain what did not fit
            raise diagnose(ob) from e
        try:
            reward_mv[0] = reward
            terminal_mv[0] = terminated
            truncation_mv[0] = truncated
        except TypeError:  # e.g. a 0-d array reward, which a memoryview refuses
            store_scalars(reward, terminated, truncated)
        if record is not None:
            info = record(reward, terminated, truncated, info)
        return row, reward, terminated, truncated, info

    return step


class _LayoutMethods:
    """What both emulators delegate to their layouts and their env."""

    obs_layout: ObservationLayout
    action_layout: ActionLayout
    env: Any

    def unflatten_observation(self, x: Any) -> Any:
        """The observation tree the raw env gave, as zero-copy views of flat observation(s).

        Args:
            x: One flat observation, or a batch of shape ``(..., N)``: leading dims are kept
                on every leaf.

        Returns:
            Nested dicts / tuples of numpy views into ``x``, each leaf of its space's dtype.

        Raises:
            SpaceError: ``x`` does not have this env's flat size, or its last axis is not
                contiguous (a view could not be taken without a copy).
        """
        return self.obs_layout.unflatten(x)

    def flatten_observation(self, obs: Any) -> np.ndarray:
        return self.obs_layout.flatten(obs)

    def flatten_action(self, action: Any) -> Any:
        """The flat action for a nested action of the raw env.

        Args:
            action: An action of the raw env's action space, or a batch (leading dims on
                every leaf).

        Returns:
            The flat action (an int or int array for a bare Discrete, else an array of
            ``action_space``'s dtype, leading dims kept).

        Raises:
            SpaceError: A leaf is missing or has the wrong shape, named by its path.
        """
        return self.action_layout.flatten(action)

    def unflatten_action(self, x: Any) -> Any:
        """The nested action the raw env expects, from a flat action.

        Args:
            x: A flat action, or a batch of shape ``(..., N)``. Discrete leaves of a
                continuous tree are rounded and clipped back into their range.

        Returns:
            The action tree (leading dims kept), with each leaf's ``start`` restored.

        Raises:
            SpaceError: ``x`` does not have this env's flat action size.
        """
        return self.action_layout.unflatten(x)

    def render(self) -> Any:
        return self.env.render()

    # An emulator wraps its env the way a gymnasium.Wrapper does: ``unwrapped`` and the RNG
    # are the base env's (gymnasium's env checker and scripts like ``env.unwrapped.ale``
    # rely on that).
    @property
    def unwrapped(self) -> Any:
        return getattr(self.env, "unwrapped", self.env)

    @property
    def np_random(self) -> np.random.Generator:
        return self.env.np_random

    @np_random.setter
    def np_random(self, value: np.random.Generator) -> None:
        self.env.np_random = value

    @property
    def np_random_seed(self) -> int | None:
        return getattr(self.env, "np_random_seed", None)

    def close(self) -> None:
        self.env.close()


class GymnasiumEmulator(_LayoutMethods, gymnasium.Env):
    """A Gymnasium env with a flat 1-D observation (written into ``buf``) and a flat action space.

    ``puffer_core.make`` returns one for every single-agent env. The observation tree lies in
    one aligned numpy structured dtype (``obs_dtype``); all-discrete actions become one
    ``MultiDiscrete`` (a bare ``Discrete`` stays), trees with a Box leaf one ``Box``.

    Args:
        env: A Gymnasium env with any observation and action space tree.
        buf: The buffers to write into (rows of shared memory in a vector env); default: its own.

    Raises:
        SpaceError: A leaf cannot be flattened (Text, Sequence, Graph), named by its path, or
            ``buf`` does not fit the observation space.
    """

    def __init__(self, env: Any, buf: Buffers | None = None):
        self.env = env
        self.obs_layout = ObservationLayout(env.observation_space, "obs")
        self.action_layout = ActionLayout(env.action_space, "action")
        self.obs_dtype = self.obs_layout.dtype
        self.observation_space = self.single_observation_space = self.obs_layout.space
        self.action_space = self.single_action_space = self.action_layout.space
        self.num_agents = 1
        self.possible_agents = ["agent_0"]
        self.agents = list(self.possible_agents)
        self.metadata = getattr(env, "metadata", {})
        self.render_mode = getattr(env, "render_mode", None)
        #: False when the env was already flat (a 1-D Box observation, a 0-based Discrete or 1-D Box action).
        self.emulated = not (
            isinstance(env.observation_space, spaces.Box)
            and len(env.observation_space.shape) == 1
            and (self.action_layout.passthrough or env.action_space == self.action_space)
        )
        if buf is None:
            buf = Buffers.allocate(1, self.observation_space)
        else:
            buf.check(1, self.observation_space, type(env).__name__)
        self.buf = buf
        self._compile()

    def attach(self, buf: Buffers) -> None:
        """Write into ``buf`` from now on (e.g. rows of shared memory handed out after construction)."""
        buf.check(1, self.observation_space, type(self.env).__name__)
        self.buf.copy_into(buf)
        self.buf = buf
        self._compile()

    def _compile(self) -> None:
        """Build the per-step closures (again after unpickling: generated code does not pickle,
        and views must be taken afresh from the unpickled buffer)."""
        self._obs = self.buf.observations[0]
        views = self.obs_layout.views(self._obs)
        #: True when the env took the offer to write observations into the buffer itself.
        self.zero_copy = offer_observation_buffer(self.env, self.obs_layout.nest(views))
        self._write = self.obs_layout.writer(self._obs, views, skip_identical=self.zero_copy)
        self._to_env_action = self.action_layout.fast_unflatten()
        self.step_in_place = step_in_place = _compile_step(self)

        def step(action: Any) -> tuple[np.ndarray, Any, Any, Any, dict]:
            ob, reward, terminated, truncated, info = step_in_place(action)
            return ob.copy(), reward, terminated, truncated, info

        step.__doc__ = GymnasiumEmulator.step.__doc__
        self.step = step

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        for name in ("_obs", "_write", "_to_env_action", "step", "step_in_place"):
            state.pop(name, None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._compile()

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Reset the env.

        Args:
            seed: Passed to the env's ``reset``.
            options: Passed to the env's ``reset``.

        Returns:
            ``(observation, info)``: a copy of the flat observation, and the env's info.
        """
        ob, info = self.env.reset(seed=seed, options=options)
        self._store_obs(ob)
        buf = self.buf
        buf.rewards[0] = 0.0
        buf.terminals[0] = False
        buf.truncations[0] = False
        buf.masks[0] = True
        return self._obs.copy(), info

    def step(self, action: Any) -> tuple[np.ndarray, Any, Any, Any, dict]:
        """Step with a flat action; writes obs, reward, terminal and truncation into ``buf``.

        Args:
            action: A flat action (``flatten_action`` of the raw env's action).

        Returns:
            ``(observation, reward, terminated, truncated, info)``, the observation a copy;
            the info is empty except at an episode's end (``episode_return``,
            ``episode_length`` and the plugin's statistics).
        """
        ob, reward, terminated, truncated, info = self.step_in_place(action)
        return ob.copy(), reward, terminated, truncated, info

    def step_in_place(self, action: Any) -> tuple[np.ndarray, Any, Any, Any, dict]:
        """``step`` returning the buffer row itself (overwritten by the next step), not a copy:
        what the vector backends call."""
        # Replaced per instance by a compiled closure doing exactly this (see ``_compile``), as is ``step``.
        ob, reward, terminated, truncated, info = self.env.step(self._to_env_action(action))
        self._store_obs(ob)
        self.buf.rewards[0] = reward
        self.buf.terminals[0] = terminated
        self.buf.truncations[0] = truncated
        return self.buf.observations[0], reward, terminated, truncated, info

    def _store_obs(self, ob: Any) -> None:
        try:
            self._write(ob)
        except Exception as e:
            raise self.obs_layout.diagnose(ob) from e


class PettingZooEmulator(_LayoutMethods):
    """A PettingZoo Parallel env (AEC envs are converted) as fixed agent rows with a live mask.

    Each of ``possible_agents`` owns a row: observations are ``(num_agents, N)``, rewards,
    terminals and truncations per row, and ``mask`` says which rows hold a live agent.

    Args:
        env: A PettingZoo Parallel or AEC env.
        buf: The buffers to write into (rows of shared memory in a vector env); default: its own.

    Raises:
        APIUsageError: The env has no ``possible_agents``.
        SpaceError: The agents' observation or action spaces do not flatten to one layout, or
            a leaf cannot be flattened.
    """

    def __init__(self, env: Any, buf: Buffers | None = None):
        env = to_parallel(env)
        self.env = env
        self.possible_agents = list(env.possible_agents)
        if not self.possible_agents:
            raise APIUsageError(f"{type(env).__name__}.possible_agents is empty; the emulator needs fixed agent slots")
        self.num_agents = len(self.possible_agents)
        self._slot = {agent: i for i, agent in enumerate(self.possible_agents)}
        self.obs_layouts = [ObservationLayout(env.observation_space(a), f"obs[{a!r}]") for a in self.possible_agents]
        self.action_layouts = [ActionLayout(env.action_space(a), f"action[{a!r}]") for a in self.possible_agents]
        first, first_act = self.obs_layouts[0], self.action_layouts[0]
        for agent, layout, act in zip(self.possible_agents, self.obs_layouts, self.action_layouts):
            if layout.dtype != first.dtype or layout.space.shape != first.space.shape:
                raise SpaceError(
                    f"obs[{agent!r}]: observation space {layout.original_space} does not have the layout of "
                    f"{self.possible_agents[0]!r}'s {first.original_space}; agent slots share one buffer shape, "
                    "so pad the observations to a common space (e.g. SuperSuit's pad_observations_v0)"
                )
            same = (
                type(act.space) is type(first_act.space)
                and act.space.shape == first_act.space.shape
                and act.space.dtype == first_act.space.dtype
                if isinstance(act.space, spaces.Box)
                else act.space == first_act.space  # discrete sizes must match exactly; Box bounds may differ
            )
            if not same:
                raise SpaceError(
                    f"action[{agent!r}]: action space {act.original_space} flattens to {act.space}, but "
                    f"{self.possible_agents[0]!r}'s flattens to {first_act.space}; give all agents one action space"
                )
        self.obs_layout, self.action_layout = first, first_act
        self.obs_dtype = first.dtype
        lows = np.min([layout.space.low for layout in self.obs_layouts], axis=0)
        highs = np.max([layout.space.high for layout in self.obs_layouts], axis=0)
        self.observation_space = self.single_observation_space = spaces.Box(
            lows, highs, first.space.shape, first.space.dtype
        )
        self.action_space = self.single_action_space = self._joint_action_space()
        self.metadata = getattr(env, "metadata", {})
        self.render_mode = getattr(env, "render_mode", None)
        self.emulated = True
        if buf is None:
            buf = Buffers.allocate(self.num_agents, self.observation_space)
        else:
            buf.check(self.num_agents, self.observation_space, type(env).__name__)
        self.buf = buf
        self._live: set = set()
        self.done = False
        self._compile()

    def attach(self, buf: Buffers) -> None:
        """Write into ``buf`` from now on (e.g. rows of shared memory handed out after construction)."""
        buf.check(self.num_agents, self.observation_space, type(self.env).__name__)
        self.buf.copy_into(buf)
        self.buf = buf
        self._compile()

    def _compile(self) -> None:
        """Build the per-slot writers and action converters (again after unpickling)."""
        self._writers = [layout.writer(self.buf.observations[i]) for i, layout in enumerate(self.obs_layouts)]
        self._to_env_action = [act.fast_unflatten() for act in self.action_layouts]

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop("_writers", None)
        state.pop("_to_env_action", None)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._compile()

    def _joint_action_space(self) -> spaces.Space:
        first = self.action_layouts[0].space
        if isinstance(first, spaces.Box):  # same shape and dtype checked above; bounds may differ
            low = np.min([a.space.low for a in self.action_layouts], axis=0)
            high = np.max([a.space.high for a in self.action_layouts], axis=0)
            return spaces.Box(low, high, first.shape, first.dtype)
        return first

    @property
    def mask(self) -> np.ndarray:
        """Bool array of slots that hold a live agent this step."""
        return self.buf.masks

    @property
    def agents(self) -> list:
        return list(self.env.agents)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Reset the env; the rows of the agents it reports become live.

        Args:
            seed: Passed to the env's ``reset``.
            options: Passed to the env's ``reset``.

        Returns:
            ``(observations, infos)``: a copy of the ``(num_agents, N)`` observations (dead
            rows zero) and the non-empty infos by agent.
        """
        obs, infos = self.env.reset(seed=seed, options=options)
        buf = self.buf
        buf.observations[...] = 0
        buf.rewards[...] = 0
        buf.terminals[...] = False
        buf.truncations[...] = False
        buf.masks[...] = False
        for agent, ob in obs.items():
            i = self._slot_of(agent)
            self._write(i, ob)
            buf.masks[i] = True
        self._live = set(obs)
        self.done = not obs
        return buf.observations.copy(), {agent: info for agent, info in (infos or {}).items() if info}

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step every live agent with its row of ``actions``.

        Args:
            actions: One flat action row per slot, ``(num_agents, ...)``; rows of dead slots
                are ignored but must be present.

        Returns:
            ``(observations, rewards, terminals, truncations, infos)``: copies of the per-slot
            arrays, and the infos by agent. A row stays live on its agent's last step, then
            is zeroed and masked.

        Raises:
            APIUsageError: ``actions`` does not have one row per slot.
        """
        obs, rewards, terminals, truncations, infos = self.step_in_place(actions)
        return obs.copy(), rewards.copy(), terminals.copy(), truncations.copy(), infos

    def step_in_place(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        """``step`` returning the buffers themselves (overwritten by the next step), not copies."""
        actions = np.asarray(actions)
        if actions.shape[:1] != (self.num_agents,):
            raise APIUsageError(
                f"PettingZooEmulator.step expects one action row per slot, shape ({self.num_agents}, ...), "
                f"got {actions.shape}; rows of dead agents are ignored but must be present"
            )
        slot, convert = self._slot, self._to_env_action
        env_actions = {}
        for agent in self.env.agents:
            i = self._slot_of(agent)
            env_actions[agent] = convert[i](actions[i])
        obs, rewards, terminations, truncations, infos = self.env.step(env_actions)

        buf = self.buf
        rew, term, trunc, masks = buf.rewards, buf.terminals, buf.truncations, buf.masks
        rew[...] = 0
        term[...] = False
        trunc[...] = False
        masks[...] = False
        for agent, ob in obs.items():
            i = slot[agent] if agent in slot else self._slot_of(agent)
            self._write(i, ob)
            masks[i] = True
        for agent, r in rewards.items():
            rew[self._slot_of(agent)] = r
        for agent, flag in terminations.items():
            if flag:
                i = self._slot_of(agent)
                term[i] = masks[i] = True
        for agent, flag in truncations.items():
            if flag:
                i = self._slot_of(agent)
                trunc[i] = masks[i] = True
        reported = obs.keys()
        for agent in self._live - reported:  # died on an earlier step: blank the row
            buf.observations[slot[agent]] = 0
        self._live = set(reported)
        if not self.env.agents:
            # Episode over for everyone: rows that ended earlier (or never joined) get both flags.
            idle = ~(term | trunc)
            term[idle] = True
            trunc[idle] = True
            self.done = True
        return buf.observations, rew, term, trunc, {agent: info for agent, info in infos.items() if info}

    def _slot_of(self, agent: Any) -> int:
        try:
            return self._slot[agent]
        except KeyError:
            raise APIUsageError(
                f"agent {agent!r} is not in possible_agents {self.possible_agents}; the emulator needs every "
                "agent that can ever appear listed in possible_agents"
            ) from None

    def _write(self, i: int, ob: Any) -> None:
        try:
            self._writers[i](ob)
        except Exception as e:
            raise self.obs_layouts[i].diagnose(ob) from e


def emulate(env: Any, buf: Buffers | None = None) -> GymnasiumEmulator | PettingZooEmulator:
    """Wrap ``env`` in the emulator its API calls for (Gymnasium, PettingZoo Parallel or AEC)."""
    if isinstance(env, gymnasium.Env):
        return GymnasiumEmulator(env, buf)
    if is_aec(env) or is_parallel(env):
        return PettingZooEmulator(env, buf)
    if isinstance(getattr(env, "observation_space", None), spaces.Space) and hasattr(env, "step"):
        return GymnasiumEmulator(env, buf)  # a Gymnasium-API env that does not subclass gymnasium.Env
    raise APIUsageError(
        f"cannot emulate {type(env).__module__}.{type(env).__qualname__}: it is neither a gymnasium.Env nor a "
        "PettingZoo Parallel/AEC env; convert it first (puffer_core.make applies the gym and old-PettingZoo "
        "adapters for you)"
    )
