"""Emulation through the public API: real envs, nested spaces, buffers, agents."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from puffer_core.emulation import (
    ActionLayout,
    Buffers,
    GymnasiumEmulator,
    ObservationLayout,
    PettingZooEmulator,
    emulate,
)
from puffer_core.errors import APIUsageError, SpaceError
from puffer_core.postprocess import EpisodeStats

# ----------------------------------------------------------------------------- test envs

NESTED_OBS = spaces.Dict(
    {
        "pos": spaces.Box(-1, 1, (2,), np.float32),
        "inv": spaces.Tuple((spaces.Discrete(5, start=1), spaces.MultiBinary(3))),
        "img": spaces.Box(0, 255, (3, 4), np.uint8),
        "flag": spaces.Box(0, 1, (), bool),
        "deep": spaces.Dict(
            {"hp": spaces.Box(0, 100, (), np.int16), "md": spaces.MultiDiscrete([3, 4], start=[-1, 2])}
        ),
    }
)
NESTED_ACTION = spaces.Dict({"move": spaces.Discrete(4, start=-2), "aim": spaces.Box(-1, 1, (2,), np.float32)})


class NestedEnv(gymnasium.Env):
    """Returns fresh samples of a nested space and records the actions it gets."""

    observation_space = NESTED_OBS
    action_space = NESTED_ACTION
    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, episode_length: int = 3):
        self.episode_length = episode_length
        self.actions: list = []
        self.closed = False

    def reset(self, seed=None, options=None):
        self.observation_space.seed(seed)
        self.t = 0
        self.last_obs = self.observation_space.sample()
        return self.last_obs, {"reset": True}

    def step(self, action):
        assert self.action_space.contains(action), action
        self.actions.append(action)
        self.t += 1
        self.last_obs = self.observation_space.sample()
        return self.last_obs, float(self.t), self.t >= self.episode_length, False, {"t": self.t}

    def render(self):
        return np.full((2, 2, 3), 7, np.uint8)

    def close(self):
        self.closed = True


def assert_tree_equal(got, expected):
    if isinstance(expected, dict):
        assert isinstance(got, dict) and list(got) == list(expected)
        for key in expected:
            assert_tree_equal(got[key], expected[key])
    elif isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_tree_equal(g, e)
    else:
        expected = np.asarray(expected)
        got = np.asarray(got)
        assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
        assert got.shape == expected.shape, (got.shape, expected.shape)
        np.testing.assert_array_equal(got, expected)


def leaves(tree):
    if isinstance(tree, dict):
        return [x for v in tree.values() for x in leaves(v)]
    if isinstance(tree, tuple):
        return [x for v in tree for x in leaves(v)]
    return [tree]


# ----------------------------------------------------------------------------- gymnasium


def test_cartpole_matches_the_raw_env_step_for_step():
    raw = gymnasium.make("CartPole-v1")
    emu = GymnasiumEmulator(gymnasium.make("CartPole-v1"))
    assert isinstance(emu.action_space, spaces.Discrete) and emu.action_space.n == 2
    assert emu.observation_space.shape == (4,) and emu.observation_space.dtype == np.float32
    assert emu.single_observation_space is emu.observation_space
    assert emu.emulated is False and emu.num_agents == 1 and len(emu.possible_agents) == 1
    raw_obs, _ = raw.reset(seed=3)
    obs, _ = emu.reset(seed=3)
    np.testing.assert_array_equal(obs, raw_obs)
    rng = np.random.default_rng(0)
    ended = False
    for _ in range(200):
        action = rng.integers(2)
        raw_obs, raw_rew, raw_term, raw_trunc, _ = raw.step(int(action))
        obs, rew, term, trunc, _ = emu.step(np.int64(action))
        np.testing.assert_array_equal(obs, raw_obs)
        assert (rew, term, trunc) == (raw_rew, raw_term, raw_trunc)
        assert emu.buf.rewards[0] == rew and emu.buf.terminals[0] == term and emu.buf.truncations[0] == trunc
        np.testing.assert_array_equal(emu.buf.observations[0], obs)  # written in place,
        assert not np.shares_memory(obs, emu.buf.observations)  # returned as a copy the caller may keep
        if term or trunc:
            ended = True
            break
    assert ended, "random CartPole should end within 200 steps"


def test_nested_observations_unflatten_to_zero_copy_views_of_what_the_env_returned():
    emu = GymnasiumEmulator(NestedEnv())
    assert emu.emulated is True
    # Mixed dtypes: the flat space is bytes, as long as the structured dtype.
    assert emu.observation_space.dtype == np.uint8
    assert emu.observation_space.shape == (emu.obs_dtype.itemsize,)
    _, info = emu.reset(seed=1)
    assert info == {"reset": True}
    obs = emu.buf.observations[0]
    for _ in range(2):
        view = emu.unflatten_observation(obs)
        assert_tree_equal(view, emu.env.last_obs)
        for leaf in leaves(view):
            assert np.shares_memory(leaf, emu.buf.observations)
        obs, *_ = emu.step_in_place(emu.action_space.sample())


def test_structured_dtype_is_aligned_so_every_leaf_can_be_viewed_in_place():
    dtype = ObservationLayout(NESTED_OBS).dtype
    assert dtype.names == ("deep", "flag", "img", "inv", "pos")  # gymnasium sorts Dict keys
    offsets = {name: dtype.fields[name][1] for name in dtype.names}
    assert offsets["pos"] % 4 == 0 and dtype.itemsize % 8 == 0  # float32 aligned; rows of a batch stay aligned
    inv = dtype.fields["inv"][0]
    assert inv.metadata["puffer"] == "tuple" and (offsets["inv"] + inv.fields["0"][1]) % 8 == 0


def test_uniform_leaves_keep_their_dtype_and_concatenated_bounds():
    space = spaces.Dict({"a": spaces.Box(-2, 3, (2,), np.float32), "b": spaces.Box(0, 1, (1, 2), np.float32)})
    layout = ObservationLayout(space)
    assert layout.space.dtype == np.float32 and layout.space.shape == (4,)
    np.testing.assert_array_equal(layout.space.low, [-2, -2, 0, 0])
    np.testing.assert_array_equal(layout.space.high, [3, 3, 1, 1])
    discrete = ObservationLayout(spaces.Tuple((spaces.Discrete(3, start=2), spaces.MultiDiscrete([4, 5]))))
    assert discrete.space.dtype == np.int64 and discrete.space.shape == (3,)
    np.testing.assert_array_equal(discrete.space.low, [2, 0, 0])
    np.testing.assert_array_equal(discrete.space.high, [4, 3, 4])


@pytest.mark.parametrize("lead", [(5,), (2, 3)])
def test_unflatten_observation_keeps_leading_dims(lead):
    layout = ObservationLayout(NESTED_OBS)
    NESTED_OBS.seed(0)
    samples = [NESTED_OBS.sample() for _ in range(int(np.prod(lead)))]
    flat = np.stack([layout.flatten(s) for s in samples]).reshape((*lead, layout.size))
    views = layout.unflatten(flat)
    assert views["img"].shape == (*lead, 3, 4) and views["inv"][0].shape == lead
    assert views["deep"]["md"].shape == (*lead, 2)
    for leaf in leaves(views):
        assert np.shares_memory(leaf, flat)
    index = np.unravel_index(len(samples) - 1, lead)
    assert_tree_equal(layout.unflatten(flat[index]), samples[-1])
    # Writing through a view lands in the flat buffer: they really are views.
    views["deep"]["hp"][...] = 42
    assert layout.unflatten(flat[index])["deep"]["hp"] == 42


def test_flatten_observation_accepts_a_batch_too():
    emu = GymnasiumEmulator(NestedEnv())
    NESTED_OBS.seed(4)
    samples = [NESTED_OBS.sample() for _ in range(3)]
    stacked = {
        "deep": {
            "hp": np.stack([s["deep"]["hp"] for s in samples]),
            "md": np.stack([s["deep"]["md"] for s in samples]),
        },
        "flag": np.stack([s["flag"] for s in samples]),
        "img": np.stack([s["img"] for s in samples]),
        "inv": (np.stack([s["inv"][0] for s in samples]), np.stack([s["inv"][1] for s in samples])),
        "pos": np.stack([s["pos"] for s in samples]),
    }
    flat = emu.flatten_observation(stacked)
    assert flat.shape == (3, emu.observation_space.shape[0])
    for i, sample in enumerate(samples):
        np.testing.assert_array_equal(flat[i], emu.flatten_observation(sample))


def test_a_caller_provided_buffer_is_written_in_place_and_never_rebound():
    probe = GymnasiumEmulator(NestedEnv())
    n = probe.observation_space.shape[0]
    shared_obs = np.zeros((3, n), np.uint8)
    shared_rew = np.zeros(3, np.float32)
    shared_term = np.zeros(3, bool)
    shared_trunc = np.zeros(3, bool)
    shared_mask = np.zeros(3, bool)
    buf = Buffers(shared_obs[1:2], shared_rew[1:2], shared_term[1:2], shared_trunc[1:2], shared_mask[1:2])
    arrays = (buf.observations, buf.rewards, buf.terminals, buf.truncations, buf.masks)
    emu = GymnasiumEmulator(NestedEnv(episode_length=2), buf=buf)
    emu.reset(seed=5)
    assert shared_mask[1]
    np.testing.assert_array_equal(shared_obs[1], probe.flatten_observation(emu.env.last_obs))
    obs, rew, term, _, _ = emu.step_in_place(emu.action_space.sample())
    obs, rew, term, _, _ = emu.step_in_place(emu.action_space.sample())
    assert np.shares_memory(obs, shared_obs)
    np.testing.assert_array_equal(shared_obs[1], probe.flatten_observation(emu.env.last_obs))
    assert shared_rew[1] == rew == 2.0 and shared_term[1] and term
    assert not shared_obs[0].any() and not shared_obs[2].any() and not shared_rew[[0, 2]].any()
    assert all(
        a is b for a, b in zip(arrays, (buf.observations, buf.rewards, buf.terminals, buf.truncations, buf.masks))
    )
    assert emu.buf is buf


def test_a_single_box_buffer_is_written_in_place_for_cartpole_too():
    shared = np.zeros((2, 4), np.float32)
    buf = Buffers(shared[1:], np.zeros(1, np.float32), np.zeros(1, bool), np.zeros(1, bool), np.zeros(1, bool))
    emu = GymnasiumEmulator(gymnasium.make("CartPole-v1"), buf=buf)
    obs, _ = emu.reset(seed=0)
    obs, *_ = emu.step_in_place(1)
    assert np.shares_memory(obs, shared) and shared[1].any() and not shared[0].any()
    np.testing.assert_array_equal(shared[1], obs)


def test_a_buffer_that_does_not_fit_is_refused_with_the_field_named():
    bad = Buffers.allocate(1, spaces.Box(0, 1, (5,), np.float32))
    with pytest.raises(APIUsageError, match=r"Buffers\.observations must have shape \(1, 4\)"):
        GymnasiumEmulator(gymnasium.make("CartPole-v1"), buf=bad)
    wrong_rewards = Buffers.allocate(1, spaces.Box(0, 1, (4,), np.float32))
    wrong_rewards.rewards = np.zeros(1, np.float64)
    with pytest.raises(APIUsageError, match=r"Buffers\.rewards"):
        GymnasiumEmulator(gymnasium.make("CartPole-v1"), buf=wrong_rewards)


def test_nested_actions_reach_the_env_unflattened_with_start_restored():
    emu = GymnasiumEmulator(NestedEnv())
    assert isinstance(emu.action_space, spaces.Box) and emu.action_space.shape == (3,)
    assert emu.action_space.dtype == np.float32
    np.testing.assert_array_equal(emu.action_space.low, [-1, -1, 0])  # Dict keys sorted: aim, move
    np.testing.assert_array_equal(emu.action_space.high, [1, 1, 3])
    emu.reset(seed=0)
    emu.step(np.array([0.5, -0.25, 3.0], np.float32))
    got = emu.env.actions[-1]
    assert got["move"] == 1 and got["move"].dtype == np.int64  # index 3 of Discrete(4, start=-2)
    assert isinstance(got["move"], np.integer)  # a scalar, like Discrete.sample(), not a 0-d array
    np.testing.assert_array_equal(got["aim"], np.array([0.5, -0.25], np.float32))


def test_env_errors_in_observations_name_the_leaf():
    class Broken(NestedEnv):
        def step(self, action):
            obs, *rest = super().step(action)
            del obs["deep"]["md"]
            return (obs, *rest)

    emu = GymnasiumEmulator(Broken())
    emu.reset(seed=0)
    with pytest.raises(SpaceError, match=r"obs\['deep'\]\['md'\]: missing"):
        emu.step(emu.action_space.sample())


def test_render_close_and_env_are_forwarded():
    inner = NestedEnv()
    emu = GymnasiumEmulator(inner)
    assert emu.env is inner
    assert emu.render().sum() == 7 * 12
    emu.close()
    assert inner.closed


# ----------------------------------------------------------------------------- unsupported spaces


def _graph() -> spaces.Space:
    return spaces.Graph(node_space=spaces.Box(0, 1, (2,)), edge_space=spaces.Discrete(2))


@pytest.mark.parametrize(
    ("leaf", "name"),
    [
        (spaces.Text(5), "Text"),
        (spaces.Sequence(spaces.Discrete(3)), "Sequence"),
        (_graph(), "Graph"),
        (spaces.OneOf((spaces.Discrete(2), spaces.Box(0, 1))), "OneOf"),
    ],
)
def test_unsupported_leaves_raise_space_error_naming_their_path(leaf, name):
    space = spaces.Dict({"inventory": spaces.Tuple((spaces.Discrete(2), spaces.Box(0, 1, (1,)), leaf))})
    with pytest.raises(SpaceError, match=rf"obs\['inventory'\]\[2\]: gymnasium\.spaces\.{name} cannot be flattened"):
        ObservationLayout(space)
    with pytest.raises(SpaceError, match=rf"action\['inventory'\]\[2\]: gymnasium\.spaces\.{name}"):
        ActionLayout(space)

    class Env(NestedEnv):
        observation_space = space

    with pytest.raises(SpaceError, match=r"obs\['inventory'\]\[2\]"):
        GymnasiumEmulator(Env())


# ----------------------------------------------------------------------------- actions


def test_a_bare_discrete_stays_discrete_and_keeps_its_offset():
    plain = ActionLayout(spaces.Discrete(6))
    assert plain.space == spaces.Discrete(6) and plain.fast_unflatten() is int
    shifted = ActionLayout(spaces.Discrete(4, start=10))
    assert shifted.space == spaces.Discrete(4)
    assert shifted.unflatten(0) == 10 and shifted.flatten(13) == 3
    np.testing.assert_array_equal(shifted.unflatten(np.array([[0, 3], [1, 2]])), [[10, 13], [11, 12]])
    assert shifted.fast_unflatten()(np.int64(2)) == 12


def test_all_discrete_trees_become_one_zero_based_multidiscrete():
    space = spaces.Tuple(
        (
            spaces.Discrete(3, start=-1),
            spaces.MultiDiscrete([[2, 5], [4, 2]], start=[[1, 0], [0, 7]]),
            spaces.MultiBinary(2),
        )
    )
    layout = ActionLayout(space)
    assert isinstance(layout.space, spaces.MultiDiscrete)
    np.testing.assert_array_equal(layout.space.nvec, [3, 2, 5, 4, 2, 2, 2])
    action = (np.int64(1), np.array([[2, 4], [3, 8]]), np.array([1, 0], np.int8))
    flat = layout.flatten(action)
    np.testing.assert_array_equal(flat, [2, 1, 4, 3, 1, 1, 0])
    assert_tree_equal(layout.unflatten(flat), action)


def test_mixed_trees_become_a_box_that_rounds_and_clips_discrete_leaves():
    space = spaces.Dict(
        {
            "d": spaces.Discrete(3, start=1),
            "b": spaces.Box(-1, 1, (2,), np.float32),
            "i": spaces.Box(0, 9, (), np.int32),
        }
    )
    layout = ActionLayout(space)
    assert isinstance(layout.space, spaces.Box) and layout.space.dtype == np.float32
    # Order: b (2), d (1), i (1)
    got = layout.unflatten(np.array([0.3, -2.5, 7.6, 11.2], np.float32))
    assert got["d"] == 3 and got["d"].dtype == np.int64  # 7.6 → index 2 (clipped) → 2 + start
    assert got["i"] == 9 and got["i"].dtype == np.int32  # clipped to the Box's high
    np.testing.assert_array_equal(got["b"], np.array([0.3, -2.5], np.float32))  # continuous: untouched
    assert layout.unflatten(np.array([0, 0, -3.0, 0.4], np.float32))["d"] == 1
    assert layout.unflatten(np.array([0, 0, 0.6, 0.4], np.float32))["d"] == 2


def test_mixed_trees_switch_to_float64_when_float32_would_lose_values():
    assert (
        ActionLayout(spaces.Tuple((spaces.Box(-1, 1, (1,), np.float64), spaces.Discrete(2)))).space.dtype == np.float64
    )
    big = spaces.Tuple((spaces.Box(-1, 1, (1,), np.float32), spaces.Discrete(2**25)))
    layout = ActionLayout(big)
    assert layout.space.dtype == np.float64
    assert layout.unflatten(layout.flatten((np.array([0.5], np.float32), np.int64(2**25 - 1))))[1] == 2**25 - 1


@pytest.mark.parametrize("lead", [(4,), (2, 3)])
def test_actions_flatten_and_unflatten_in_batches(lead):
    layout = ActionLayout(NESTED_ACTION)
    flat = np.zeros((*lead, 3), np.float32)
    flat[..., 2] = 2
    flat[..., 0] = 0.5
    nested = layout.unflatten(flat)
    assert nested["move"].shape == lead and (nested["move"] == 0).all()
    assert nested["aim"].shape == (*lead, 2)
    np.testing.assert_array_equal(layout.flatten(nested), flat)


def test_flat_actions_of_the_wrong_width_are_refused():
    with pytest.raises(SpaceError, match=r"shape \(\.\.\., 3\)"):
        ActionLayout(NESTED_ACTION).unflatten(np.zeros(4))


# ----------------------------------------------------------------------------- pettingzoo


def test_pistonball_parallel_env_gets_one_row_per_piston():
    from pettingzoo.butterfly import pistonball_v6

    env = pistonball_v6.parallel_env(n_pistons=4, max_cycles=5)
    emu = PettingZooEmulator(env)
    assert emu.num_agents == 4 and emu.possible_agents == [f"piston_{i}" for i in range(4)]
    assert emu.observation_space.shape == (457 * 120 * 3,) and emu.observation_space.dtype == np.uint8
    assert isinstance(emu.action_space, spaces.Box) and emu.action_space.shape == (1,)
    obs, infos = emu.reset(seed=0)
    assert obs.shape == (4, 457 * 120 * 3) and emu.mask.all() and infos == {}
    raw = pistonball_v6.parallel_env(n_pistons=4, max_cycles=5)
    raw_obs, _ = raw.reset(seed=0)
    for i, agent in enumerate(emu.possible_agents):
        np.testing.assert_array_equal(emu.unflatten_observation(obs[i]), raw_obs[agent])
    for _step in range(5):
        actions = np.full((4, 1), 0.5, np.float32)
        obs, rewards, terminals, truncations, _ = emu.step(actions)
        raw_obs, raw_rew, *_ = raw.step({a: np.array([0.5], np.float32) for a in raw.agents})
        np.testing.assert_array_equal(emu.unflatten_observation(obs)[2], raw_obs["piston_2"])
        np.testing.assert_allclose(rewards, [raw_rew[a] for a in emu.possible_agents], rtol=1e-6)
        assert emu.mask.all()
    assert truncations.all() and emu.done  # max_cycles reached
    emu.close()


def test_connect_four_aec_env_is_converted_and_plays_to_the_end():
    from pettingzoo.classic import connect_four_v3

    emu = emulate(connect_four_v3.env())
    assert isinstance(emu, PettingZooEmulator) and emu.num_agents == 2
    assert isinstance(emu.action_space, spaces.Discrete) and emu.action_space.n == 7
    obs, _ = emu.reset(seed=0)
    views = emu.unflatten_observation(emu.buf.observations)
    assert views["action_mask"].shape == (2, 7) and views["observation"].shape == (2, 6, 7, 2)
    assert np.shares_memory(views["action_mask"], emu.buf.observations)
    moves = 0
    while not emu.done:
        masks = emu.unflatten_observation(obs)["action_mask"]
        active = int(np.flatnonzero(masks.any(axis=1))[0])  # only the player to move has legal moves
        actions = np.full(2, 6)  # the waiting player's action must be ignored, legal or not
        actions[active] = 0 if moves % 2 == 0 else 1  # player 0 stacks column 0 and wins vertically
        obs, rewards, terminals, truncations, _ = emu.step(actions)
        moves += 1
        assert moves < 50
    assert terminals.all() and moves == 7
    assert sorted(rewards.tolist()) == [-1.0, 1.0] and rewards[0] == 1.0


class DyingEnv:
    """A Parallel env where 'b' dies after step 1 and 'c' joins at step 2; ends at step 3."""

    possible_agents = ["a", "b", "c"]
    metadata: dict = {}

    def observation_space(self, agent):
        return spaces.Box(-100, 100, (2,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(3)

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = ["a", "b"]
        self.received: list = []
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def _obs(self, agent):
        return np.array([self.t, self.possible_agents.index(agent) + 1], np.float32)

    def step(self, actions):
        assert set(actions) == set(self.agents), f"got actions for {sorted(actions)}, live {self.agents}"
        self.received.append(dict(actions))
        self.t += 1
        acting = list(self.agents)
        obs = {a: self._obs(a) for a in acting}
        rewards = {a: float(actions[a]) for a in acting}
        terminations = {a: a == "b" and self.t == 1 for a in acting}
        truncations = {a: self.t == 3 for a in acting}
        infos = {a: ({"note": self.t} if a == "a" else {}) for a in acting}
        self.agents = [a for a in acting if not (terminations[a] or truncations[a])]
        if self.t == 2:
            self.agents.append("c")
            obs["c"] = self._obs("c")
        return obs, rewards, terminations, truncations, infos

    def render(self):
        return None

    def close(self):
        pass


def test_agents_that_die_or_join_keep_their_slots():
    emu = emulate(DyingEnv())
    assert isinstance(emu, PettingZooEmulator)
    obs, _ = emu.reset()
    np.testing.assert_array_equal(emu.mask, [True, True, False])
    np.testing.assert_array_equal(obs[2], [0, 0])

    # Step 1: b terminates; its final transition is live (mask True, terminal True).
    obs, rewards, terminals, truncations, infos = emu.step(np.array([1, 2, 0]))
    np.testing.assert_array_equal(emu.mask, [True, True, False])
    np.testing.assert_array_equal(terminals, [False, True, False])
    np.testing.assert_array_equal(rewards, [1, 2, 0])
    np.testing.assert_array_equal(obs[1], [1, 2])
    assert infos == {"a": {"note": 1}}  # empty infos are left out
    assert not emu.done

    # Step 2: b is gone (row zeroed, mask False, its action ignored); c joins.
    obs, rewards, terminals, truncations, _ = emu.step(np.array([2, 1, 1]))
    assert emu.env.received[-1] == {"a": 2}
    np.testing.assert_array_equal(emu.mask, [True, False, True])
    np.testing.assert_array_equal(obs, [[2, 1], [0, 0], [2, 3]])
    np.testing.assert_array_equal(rewards, [2, 0, 0])
    assert not terminals.any() and not truncations.any()

    # Step 3: a and c are truncated; the episode is over, every slot says so.
    obs, rewards, terminals, truncations, _ = emu.step(np.array([0, 0, 2]))
    assert emu.env.received[-1] == {"a": 0, "c": 2}
    np.testing.assert_array_equal(truncations, [True, True, True])
    np.testing.assert_array_equal(emu.mask, [True, False, True])
    assert emu.done and (terminals | truncations).all()
    np.testing.assert_array_equal(rewards, [0, 0, 2])

    # Reset brings the original agents back and clears the flags.
    obs, _ = emu.reset()
    np.testing.assert_array_equal(emu.mask, [True, True, False])
    assert not emu.buf.terminals.any() and not emu.buf.truncations.any() and not emu.done


def test_pettingzoo_actions_must_have_one_row_per_slot():
    emu = PettingZooEmulator(DyingEnv())
    emu.reset()
    with pytest.raises(APIUsageError, match=r"shape \(3, \.\.\.\)"):
        emu.step(np.zeros(2, np.int64))


def test_agents_with_different_layouts_are_refused():
    class Uneven(DyingEnv):
        def observation_space(self, agent):
            return spaces.Box(0, 1, (2 if agent == "a" else 3,), np.float32)

    with pytest.raises(SpaceError, match=r"obs\['b'\]"):
        PettingZooEmulator(Uneven())


def test_pettingzoo_writes_into_a_given_buffer():
    shared = np.zeros((5, 2), np.float32)
    buf = Buffers(shared[1:4], np.zeros(3, np.float32), np.zeros(3, bool), np.zeros(3, bool), np.zeros(3, bool))
    emu = PettingZooEmulator(DyingEnv(), buf=buf)
    emu.reset()
    obs, *_ = emu.step_in_place(np.array([1, 1, 1]))
    assert obs is buf.observations and np.shares_memory(obs, shared)
    np.testing.assert_array_equal(shared[1:3], [[1, 1], [1, 2]])
    assert not shared[0].any() and not shared[4].any()


def test_emulate_picks_the_emulator_by_api():
    from pettingzoo.classic import tictactoe_v3

    assert isinstance(emulate(gymnasium.make("CartPole-v1")), GymnasiumEmulator)
    assert isinstance(emulate(tictactoe_v3.env()), PettingZooEmulator)
    assert isinstance(emulate(DyingEnv()), PettingZooEmulator)
    with pytest.raises(APIUsageError, match=r"neither a gymnasium\.Env nor a PettingZoo"):
        emulate(object())


def test_emulators_survive_pickling():
    import pickle

    emu = GymnasiumEmulator(NestedEnv())
    emu.reset(seed=2)
    clone = pickle.loads(pickle.dumps(emu))
    obs, *_ = clone.step_in_place(clone.action_space.sample())
    assert np.shares_memory(obs, clone.buf.observations)
    assert_tree_equal(clone.unflatten_observation(obs), clone.env.last_obs)

    multi = pickle.loads(pickle.dumps(PettingZooEmulator(DyingEnv())))
    obs, _ = multi.reset()
    np.testing.assert_array_equal(obs[:2], [[0, 1], [0, 2]])


class SelfWritingEnv(gymnasium.Env):
    """Writes each observation into arrays it was handed, like NLE's engine does."""

    observation_space = spaces.Dict({"a": spaces.Box(0, 9, (3,), np.int16), "b": spaces.Box(0, 9, (2,), np.uint8)})
    action_space = spaces.Discrete(2)

    def __init__(self, accept=True):
        self.accept = accept
        self.arrays = {"a": np.zeros(3, np.int16), "b": np.zeros(2, np.uint8)}
        self.offered = None

    def puffer_bind_observation(self, views):
        self.offered = views
        if self.accept:
            self.arrays = views
        return self.accept

    def reset(self, seed=None, options=None):
        self.t = 0
        return self._observe(), {}

    def _observe(self):
        self.arrays["a"][...] = self.t
        self.arrays["b"][...] = self.t + 1
        return dict(self.arrays)

    def step(self, action):
        self.t += 1
        return self._observe(), 0.0, False, False, {}


@pytest.mark.parametrize("accept", [True, False])
def test_envs_that_write_into_the_buffer_themselves_skip_the_copy(accept):
    inner = SelfWritingEnv(accept)
    emu = GymnasiumEmulator(gymnasium.wrappers.OrderEnforcing(inner))  # found through wrappers
    assert emu.zero_copy is accept
    assert all(np.shares_memory(v, emu.buf.observations) for v in inner.offered.values())
    emu.reset()
    obs, *_ = emu.step(0)
    obs, *_ = emu.step(0)
    views = emu.unflatten_observation(obs)
    np.testing.assert_array_equal(views["a"], [2, 2, 2])
    np.testing.assert_array_equal(views["b"], [3, 3])
    assert np.shares_memory(inner.arrays["a"], emu.buf.observations) is accept


def test_emulation_overhead_benchmark_reports_both_loops():
    from puffer_core.bench.emulation import emulation_overhead

    result = emulation_overhead(lambda: gymnasium.make("CartPole-v1"), steps=400, rounds=2)
    assert set(result) == {"raw_sps", "emulated_sps", "ratio"}
    assert result["raw_sps"] > 0 and result["emulated_sps"] > 0 and 0.2 < result["ratio"] < 5


@pytest.mark.parametrize("episode_stats", [True, False])
def test_emulation_overhead_times_the_emulator_with_or_without_episode_stats(monkeypatch, episode_stats):
    import puffer_core.bench.emulation as bench_emulation

    wrapped = []

    class CountedStats(bench_emulation.EpisodeStats):
        def __init__(self, env):
            wrapped.append(env)
            super().__init__(env)

    monkeypatch.setattr(bench_emulation, "EpisodeStats", CountedStats)
    result = bench_emulation.emulation_overhead(
        lambda: gymnasium.make("CartPole-v1"), steps=200, rounds=2, episode_stats=episode_stats
    )
    assert len(wrapped) == int(episode_stats) and result["ratio"] > 0


def test_the_floor_loop_does_the_emulators_work_on_the_same_games():
    # The floor is a fair lower bound only if it does what the emulator does: same
    # observations, rewards, flags and infos, episode statistics included.
    from puffer_core.bench.emulation import _floor_loop

    step, reset = _floor_loop(gymnasium.make("CartPole-v1"))
    emu = GymnasiumEmulator(EpisodeStats(gymnasium.make("CartPole-v1")))
    obs, _ = reset(seed=3)
    np.testing.assert_array_equal(obs, emu.reset(seed=3)[0])
    ends = 0
    for t in range(300):
        action = (t // 3) % 2
        ours, theirs = step(action), emu.step_in_place(action)
        np.testing.assert_array_equal(ours[0], theirs[0])
        assert ours[1:] == theirs[1:]
        if ours[2] or ours[3]:
            ends += 1
            assert ours[4]["episode_length"] > 0
            np.testing.assert_array_equal(reset()[0], emu.reset()[0])
    assert ends >= 2


def test_floor_overhead_applies_only_where_the_floor_loop_is_written_for():
    from puffer_core.bench.emulation import floor_overhead

    result = floor_overhead(lambda: gymnasium.make("CartPole-v1"), steps=400, rounds=2)
    assert set(result) == {"raw_sps", "emulated_sps", "ratio"} and result["ratio"] > 0
    assert floor_overhead(lambda: gymnasium.make("Pendulum-v1"), steps=100, rounds=2) is None  # a Box action


def test_unflatten_refuses_rows_it_could_only_copy():
    layout = ObservationLayout(NESTED_OBS)
    columns = np.zeros((layout.size, 2), np.uint8)[:, 0]  # strided last axis
    with pytest.raises(SpaceError, match="contiguous last axis"):
        layout.unflatten(columns)
    with pytest.raises(SpaceError, match=rf"shape \(\.\.\., {layout.size}\)"):
        layout.unflatten(np.zeros(layout.size + 1, np.uint8))


@pytest.mark.parametrize("multi", [False, True])
def test_attach_moves_an_emulator_onto_new_buffers(multi):
    emu = PettingZooEmulator(DyingEnv()) if multi else GymnasiumEmulator(NestedEnv())
    emu.reset(seed=0)
    old = emu.buf
    new = Buffers.allocate(emu.num_agents, emu.observation_space)
    emu.attach(new)
    assert emu.buf is new
    np.testing.assert_array_equal(new.observations, old.observations)  # current state carried over
    np.testing.assert_array_equal(new.masks, old.masks)
    before = old.observations.copy()
    actions = np.zeros((3,), np.int64) if multi else emu.action_space.sample()
    obs, *_ = emu.step_in_place(actions)
    assert np.shares_memory(obs, new.observations)
    np.testing.assert_array_equal(old.observations, before)  # the old buffer is left alone
    assert not np.array_equal(new.observations, before)
    with pytest.raises(APIUsageError):
        emu.attach(Buffers.allocate(emu.num_agents + 1, emu.observation_space))


@pytest.mark.parametrize("multi", [False, True])
def test_reset_and_step_return_observations_the_caller_may_keep(multi):
    """Gymnasium's contract (gymnasium 1.4's env checker tests it): a returned observation is
    not overwritten by the next step; step_in_place is the buffer-returning variant."""
    emu = PettingZooEmulator(DyingEnv()) if multi else GymnasiumEmulator(NestedEnv())
    actions = np.zeros((3,), np.int64) if multi else emu.action_space.sample()
    first, _ = emu.reset(seed=0)
    kept = first.copy()
    second, *_ = emu.step(actions)
    np.testing.assert_array_equal(first, kept)
    assert not np.shares_memory(second, emu.buf.observations)
    third, *_ = emu.step_in_place(actions) if not multi or not emu.done else (emu.buf.observations,)
    assert np.shares_memory(third, emu.buf.observations)
