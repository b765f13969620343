"""Andy Jones' debugging probes (``classic/probe_1`` … ``probe_5``, ``_dict``, ``_2agents``):
their dynamics, emulation, agent masks, the API checkers, and the expectation table."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env as gymnasium_check_env
from pettingzoo.test import parallel_api_test

import puffer_core
from puffer_core import vector
from puffer_core.errors import APIUsageError
from puffer_core.plugins.builtin.probes import PROBE_VARIANTS, parse_probe_id, probe_expectations
from puffer_core.testing import check_env as puffer_check_env, envs_json, run_python

NUMBERS = (1, 2, 3, 4, 5)
SINGLE_IDS = [f"classic/probe_{n}{suffix}" for suffix in ("", "_dict") for n in NUMBERS]
AGENT_IDS = [f"classic/probe_{n}_2agents" for n in NUMBERS]
ALL_IDS = SINGLE_IDS + AGENT_IDS
GAMMA = 0.5

# The probes as the task states them, written out independently of puffer_core.plugins.builtin.probes.
EPISODE_LENGTH = {1: 1, 2: 1, 3: 2, 4: 1, 5: 1}
NUM_ACTIONS = {1: 1, 2: 1, 3: 1, 4: 2, 5: 2}
OBSERVATIONS_BY_STEP = {1: [{0.0}], 2: [{-1.0, 1.0}], 3: [{0.0}, {1.0}], 4: [{0.0}], 5: [{-1.0, 1.0}]}


def expected_reward(number: int, observation: float, action: int, last: bool) -> float:
    if number == 1:
        return 1.0
    if number == 2:
        return observation
    if number == 3:
        return 1.0 if last else 0.0
    if number == 4:
        return 1.0 if action == 1 else -1.0
    return 1.0 if action == int(observation > 0) else -1.0


def signal_of(observation) -> float:
    """The decisive value of a raw observation of any variant."""
    if isinstance(observation, dict):
        return float(observation["signal"][0])
    return float(observation[0])


# --------------------------------------------------------------------------- dynamics


def play_episode(env, seed, action):
    """(signals before each step, rewards, terminated flags, final signal) of one seeded episode."""
    observation, _ = env.reset(seed=seed)
    signals, rewards, flags = [], [], []
    terminated = False
    while not terminated:
        signals.append(signal_of(observation))
        observation, reward, terminated, truncated, _ = env.step(action)
        assert not truncated
        rewards.append(reward)
        flags.append(terminated)
    return signals, rewards, flags, signal_of(observation)


@pytest.mark.parametrize("env_id", SINGLE_IDS)
def test_single_agent_probe_dynamics(env_id):
    number, _ = parse_probe_id(env_id)
    env = puffer_core.make(env_id).unwrapped
    seen = set()
    for seed in range(16):
        for action in range(NUM_ACTIONS[number]):
            signals, rewards, flags, final = play_episode(env, seed, action)
            length = EPISODE_LENGTH[number]
            assert len(signals) == length and flags == [False] * (length - 1) + [True]
            for t, signal in enumerate(signals):
                assert signal in OBSERVATIONS_BY_STEP[number][t]
                assert rewards[t] == expected_reward(number, signal, action, t == length - 1)
            assert final == signals[-1]  # the observation an episode ends on repeats its last one
            seen.add(signals[0])
    assert seen == OBSERVATIONS_BY_STEP[number][0]  # 16 seeds show both signs in probes 2 and 5
    with pytest.raises(APIUsageError, match="episode is over"):
        env.step(0)
    env.reset(seed=0)
    with pytest.raises(APIUsageError, match=r"not in Discrete"):
        env.step(NUM_ACTIONS[number])


def test_dict_probe_keeps_its_constant_context():
    env = puffer_core.make("classic/probe_5_dict").unwrapped
    observation, _ = env.reset(seed=3)
    assert env.observation_space.contains(observation)
    assert observation["context"]["flag"] == 2 and observation["context"]["bits"].tolist() == [1, 0]
    observation, *_ = env.step(0)
    assert observation["context"]["flag"] == 2 and observation["context"]["bits"].tolist() == [1, 0]


@pytest.mark.parametrize("number", NUMBERS)
def test_two_agent_probe_staggers_the_agents(number):
    """agent_1 plays the probe's last step from the start; agent_0 joins a step later and plays it all."""
    env = puffer_core.make(f"classic/probe_{number}_2agents").unwrapped
    length = EPISODE_LENGTH[number]
    for seed in range(8):
        for action in range(NUM_ACTIONS[number]):
            observations, _ = env.reset(seed=seed)
            assert env.agents == ["agent_1"] and list(observations) == ["agent_1"]
            first = signal_of(observations["agent_1"])
            assert first in OBSERVATIONS_BY_STEP[number][-1]
            observations, rewards, terminations, truncations, _ = env.step({"agent_1": action})
            assert rewards["agent_1"] == expected_reward(number, first, action, True) and terminations["agent_1"]
            assert rewards["agent_0"] == 0.0 and not terminations["agent_0"]  # joins with the first step
            assert not any(truncations.values())
            assert env.agents == ["agent_0"]
            for t in range(length):
                signal = signal_of(observations["agent_0"])
                assert signal in OBSERVATIONS_BY_STEP[number][t]
                observations, rewards, terminations, _, _ = env.step({"agent_0": action})
                assert set(rewards) == {"agent_0"}
                assert rewards["agent_0"] == expected_reward(number, signal, action, t == length - 1)
                assert terminations["agent_0"] == (t == length - 1)
            assert env.agents == []
            assert signal_of(observations["agent_0"]) == signal


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_same_seed_same_episodes(env_id):
    def trace(seed):
        env = puffer_core.make(env_id)
        rows = [env.reset(seed=seed)[0].copy()]
        for _ in range(9):  # several episodes: unseeded resets continue the seeded RNG
            step = env.step(np.zeros(env.num_agents, np.int64) if env.num_agents > 1 else 0)
            rows.append(step[0].copy())
            if env.done if env.num_agents > 1 else step[2]:
                rows.append(env.reset()[0].copy())
        return np.array(rows)

    assert np.array_equal(trace(5), trace(5))
    if parse_probe_id(env_id)[0] in (2, 5):
        assert not np.array_equal(trace(5), trace(6))


# --------------------------------------------------------------------------- emulation and masks


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_make_gives_the_expected_flat_spaces(env_id):
    number, variant = parse_probe_id(env_id)
    env = puffer_core.make(env_id)
    assert type(env.unwrapped) is PROBE_VARIANTS[variant]
    assert env.action_space == spaces.Discrete(NUM_ACTIONS[number])
    flat, _ = env.reset(seed=0)
    if variant == "_dict":
        # Mixed leaf dtypes (float32, int64, int8): the emulator lays the observation out as bytes.
        assert env.observation_space.dtype == np.uint8 and env.observation_space.shape == (env.obs_dtype.itemsize,)
        nested = env.unflatten_observation(flat)
        assert signal_of(nested) in OBSERVATIONS_BY_STEP[number][0]
        assert nested["context"]["flag"] == 2 and nested["context"]["bits"].tolist() == [1, 0]
    else:
        assert env.observation_space == spaces.Box(-1.0, 1.0, (1,), np.float32)
    if variant == "_2agents":
        assert env.possible_agents == ["agent_0", "agent_1"] and flat.shape == (2, 1)
    else:
        assert flat.shape == env.observation_space.shape


# (masks, terminals, truncations) of agent rows [agent_0, agent_1] from reset to the episode's end.
ONE_STEP_ROWS = (
    [[0, 1], [1, 1], [1, 0]],
    [[0, 0], [0, 1], [1, 1]],
    [[0, 0], [0, 0], [0, 1]],
)
PROBE_3_ROWS = (
    [[0, 1], [1, 1], [1, 0], [1, 0]],
    [[0, 0], [0, 1], [0, 0], [1, 1]],
    [[0, 0], [0, 0], [0, 0], [0, 1]],
)


def expected_rows(number):
    return tuple(np.array(part, bool) for part in (PROBE_3_ROWS if number == 3 else ONE_STEP_ROWS))


@pytest.mark.parametrize("number", NUMBERS)
def test_two_agent_masks_through_make(number):
    masks, terminals, truncations = expected_rows(number)
    env = puffer_core.make(f"classic/probe_{number}_2agents")
    flat, _ = env.reset(seed=1)
    got = [(env.mask.copy(), np.zeros(2, bool), np.zeros(2, bool), flat.copy())]
    for _ in range(len(masks) - 1):
        assert not env.done
        flat, _, term, trunc, _ = env.step(np.ones(2, np.int64) * (NUM_ACTIONS[number] - 1))
        got.append((env.mask.copy(), term.copy(), trunc.copy(), flat.copy()))
    assert env.done
    for t, (mask, term, trunc, rows) in enumerate(got):
        assert mask.tolist() == masks[t].tolist(), f"step {t}"
        assert term.tolist() == terminals[t].tolist() and trunc.tolist() == truncations[t].tolist(), f"step {t}"
        assert not rows[~mask].any(), f"step {t}: a masked row is not zeroed"


def flat_cases(table):
    """The table's observations laid out as the probe's emulator lays them out."""
    env = puffer_core.make(table.env_id)
    try:
        return table.flat_observations(env)
    finally:
        env.close()


def vector_rollout(env_id, steps, action=None, **make_kwargs):
    """(obs, rewards, terminals, truncations, masks) of a seeded vector run, each (steps + 1, rows, ...).

    Rows act as ``action``, or else greedily by the expectation table (action 0 off the table).
    """
    table = probe_expectations(env_id, GAMMA)
    cases = flat_cases(table)
    frames = []
    with vector.make(env_id, seed=0, **make_kwargs) as envs:
        envs.async_reset(seed=0)
        for t in range(steps + 1):
            obs, rewards, terminals, truncations, _, _, masks = envs.recv()
            frames.append([np.array(part) for part in (obs, rewards, terminals, truncations, masks)])
            if t == steps:
                break
            if action is not None or table.best_actions is None:
                envs.send(np.full(envs.num_envs, action or 0, np.int64))
            else:
                found = case_index(table, cases, obs)
                envs.send(np.where(found >= 0, table.best_actions[found], 0))
    return tuple(np.stack(part) for part in zip(*frames))


def case_index(table, cases, rows, by_agent=True):
    """The table row of each flat vector row (same observation, and same agent if ``by_agent``), -1 if none."""
    matches = (rows[:, None, :] == cases[None, :, :]).all(-1)
    if by_agent:
        agents = sorted(set(table.agents))  # as possible_agents orders the rows of each env
        row_agents = np.array([agents[j % len(agents)] for j in range(len(rows))])
        matches &= row_agents[:, None] == np.array(table.agents)
    return np.where(matches.any(1), matches.argmax(1), -1)


@pytest.mark.parametrize("number", NUMBERS)
@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_two_agent_masks_through_vector_backends(number, backend):
    masks, terminals, truncations = expected_rows(number)
    cycle = len(masks)  # the episode's steps, then the next-step autoreset shows the reset rows again
    kwargs = {"num_workers": 2} if backend == "multiprocessing" else {}
    obs, rewards, terms, truncs, got_masks = vector_rollout(
        f"classic/probe_{number}_2agents", 3 * cycle - 1, num_envs=2, backend=backend, **kwargs
    )
    for name, got, expected in (("masks", got_masks, masks), ("terminals", terms, terminals)):
        np.testing.assert_array_equal(got, np.tile(expected, (3, 2)), err_msg=name)
    np.testing.assert_array_equal(truncs, np.tile(truncations, (3, 2)))
    assert not obs[~got_masks].any()  # masked rows are zeroed
    assert not rewards[~got_masks].any()


@pytest.mark.parametrize("env_id", ["classic/probe_5_dict", "classic/probe_3_2agents"])
def test_backends_agree(env_id):
    serial = vector_rollout(env_id, 12, num_envs=2, backend="serial")
    multi = vector_rollout(env_id, 12, num_envs=2, backend="multiprocessing", num_workers=2)
    for a, b in zip(serial, multi):
        np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------- checkers and listing


@pytest.mark.parametrize("env_id", SINGLE_IDS)
def test_gymnasium_env_checker_passes(env_id):
    env = puffer_core.make(env_id)
    # Gymnasium cannot re-make an env that has no gymnasium EnvSpec, and says so; the emulator
    # wraps the probe, and the checker says that too. Anything else is a complaint.
    for target, allowed in (
        (env, ("render modes", "different from the unwrapped")),
        (env.unwrapped, ("render modes",)),
    ):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gymnasium_check_env(target)
        messages = [str(w.message) for w in caught]
        assert [m for m in messages if not any(text in m for text in allowed)] == [], type(target).__name__


@pytest.mark.parametrize("env_id", AGENT_IDS)
def test_pettingzoo_parallel_api_test_passes(env_id):
    env = puffer_core.make(env_id)
    for target in (env.env, env.unwrapped):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # its complaints (e.g. a live agent without a reward) are warnings
            parallel_api_test(target, num_cycles=50)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_puffer_conformance_check_passes(env_id):
    report = puffer_check_env(env_id, steps=12)
    assert report.passed, report.summary()


def test_puffer_envs_lists_every_probe_without_pettingzoo():
    listed = {env["id"]: env for env in envs_json("--plugin", "classic", block=("pettingzoo",))["envs"]}
    for env_id in ALL_IDS:
        assert listed[env_id]["available"] is True, listed[env_id]
        assert listed[env_id]["api"] == ("pettingzoo" if env_id.endswith("_2agents") else "gymnasium")
        assert f"debug probe {parse_probe_id(env_id)[0]}," in listed[env_id]["description"]


def test_two_agent_probe_runs_without_pettingzoo():
    code = """
    import numpy as np
    import puffer_core
    from puffer_core import vector
    env = puffer_core.make("classic/probe_3_2agents")
    env.reset(seed=0)
    env.step(np.zeros(2, np.int64))
    with vector.make("classic/probe_3_2agents", num_envs=2, backend="serial", seed=0) as envs:
        envs.reset()
        envs.step(np.zeros(envs.num_envs, np.int64))
    print(env.mask.tolist())
    """
    result = run_python(code, block=("pettingzoo",))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[True, True]"


# --------------------------------------------------------------------------- expectations


def test_expectation_table_values():
    three = probe_expectations("classic/probe_3", 0.9)
    np.testing.assert_allclose(three.values, [0.9, 1.0])
    assert [signal_of(o) for o in three.observations] == [0.0, 1.0] and three.best_actions is None
    agents = probe_expectations("classic/probe_3_2agents", 0.9)
    assert agents.agents == ("agent_0", "agent_0", "agent_1")
    np.testing.assert_allclose(agents.values, [0.9, 1.0, 1.0])
    two = probe_expectations("probe_2_dict", 0.9)  # the plugin prefix is optional
    assert two.env_id == "classic/probe_2_dict"
    assert [signal_of(o) for o in two.observations] == [-1.0, 1.0]
    np.testing.assert_allclose(two.values, [-1.0, 1.0])
    five = probe_expectations("classic/probe_5_2agents", 0.9)
    assert five.best_actions.tolist() == [0, 1, 0, 1] and five.values.tolist() == [1.0] * 4
    assert probe_expectations("classic/probe_4", 0.0).best_actions.tolist() == [1]
    assert len(probe_expectations("classic/probe_1_2agents", 1.0)) == 2


@pytest.mark.parametrize("bad", [("classic/probe_6", 0.9), ("classic/probe_dict", 0.9), ("classic/probe_1", 1.5)])
def test_expectation_table_refuses_what_it_does_not_know(bad):
    with pytest.raises(APIUsageError):
        probe_expectations(*bad)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_expectation_table_matches_what_the_env_emits(env_id):
    table = probe_expectations(env_id, GAMMA)
    env = puffer_core.make(env_id)
    flat = table.flat_observations(env)
    assert flat.shape == (len(table), *env.observation_space.shape) and flat.dtype == env.observation_space.dtype
    # The same observation always has the same value and best action, whoever sees it.
    for i, j in zip(*np.nonzero((flat[:, None] == flat[None]).all(-1))):
        assert table.values[i] == table.values[j]
        assert table.best_actions is None or table.best_actions[i] == table.best_actions[j]


def one_step_targets(env_id, steps, use_masks=True, use_dones=True, action=None, by_agent=True):
    """Mean one-step target r + gamma * V(next) (V from the table) per table row, as a learner
    that skips masked rows (``use_masks``) and rows that just ended (``use_dones``) computes it.

    ``by_agent=False``: one critic for both agents, so targets are pooled by observation into
    the first table row that has it."""
    table = probe_expectations(env_id, GAMMA)
    cases = flat_cases(table)
    values = dict(enumerate(table.values))
    obs, rewards, terms, truncs, masks = vector_rollout(env_id, steps, action=action, num_envs=3)
    sums, counts = np.zeros(len(table)), np.zeros(len(table))
    for t in range(steps):
        now, later = case_index(table, cases, obs[t], by_agent), case_index(table, cases, obs[t + 1], by_agent)
        for row in range(obs.shape[1]):
            if (use_masks and not masks[t, row]) or (use_dones and (terms[t, row] or truncs[t, row])):
                continue
            if now[row] < 0:  # a masked row of probe 2 or 5: observation 0 has no value in the table
                continue
            bootstrap = 0.0 if terms[t + 1, row] else GAMMA * values[int(later[row])]
            sums[now[row]] += rewards[t + 1, row] + bootstrap
            counts[now[row]] += 1
    return sums / np.maximum(counts, 1), counts


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_expected_values_are_what_stepping_earns(env_id):
    """Acting greedily by the table, every canonical observation's targets average its value."""
    table = probe_expectations(env_id, GAMMA)
    means, counts = one_step_targets(env_id, 24)
    assert (counts > 0).all()
    np.testing.assert_allclose(means, table.values)
    if table.best_actions is not None:  # the other action earns less: reward -1
        worst = 1 - table.best_actions
        for action in (0, 1):
            means, counts = one_step_targets(env_id, 24, action=action)
            np.testing.assert_allclose(means[worst == action], -1.0)


def test_learning_from_masked_rows_shows_in_the_values():
    """The numbers probe_expectations documents for a learner that ignores agent masks."""
    for number, expected in ((1, (2 + GAMMA) / 3), (4, (2 + GAMMA) / 3), (3, GAMMA * (1 + GAMMA) / 3)):
        env_id = f"classic/probe_{number}_2agents"
        table = probe_expectations(env_id, GAMMA)
        zero = [signal_of(o) for o in table.observations].index(0.0)
        right, _ = one_step_targets(env_id, 24, by_agent=False)
        wrong, _ = one_step_targets(env_id, 24, use_masks=False, by_agent=False)
        assert right[zero] == pytest.approx(table.values[zero])
        assert wrong[zero] == pytest.approx(expected)


def test_learning_from_the_step_after_the_end_shows_in_the_values():
    means, _ = one_step_targets("classic/probe_1", 24, use_dones=False)
    np.testing.assert_allclose(means, [(1 + GAMMA) / 2])


def test_only_probes_1_to_5_exist():
    with pytest.raises(APIUsageError, match="probes 1 to 5"):
        puffer_core.make("classic/probe_2_2agents", number=6)
