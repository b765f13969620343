"""`puffer_core.train.collect`: the rollout's bookkeeping on real vector envs: which steps count,
where a row's state starts afresh (under both autoreset modes, with masked agents), the
states stored for the replay, rows of different lengths with async batches, and the step in
flight carried into the next rollout."""

from __future__ import annotations

import numpy as np
import pytest
from optional import require

torch = require("torch")

from puffer_core import vector  # noqa: E402
from puffer_core.train.collect import Collector  # noqa: E402
from puffer_core.train.policy import Policy  # noqa: E402
from puffer_core.train.recurrent import zero_where  # noqa: E402
from puffer_core.train.rollout import Rollout  # noqa: E402

HIDDEN = 8
T, F = True, False


class Run:
    """A vector env, an LSTM policy, a rollout and its collector, driven as the trainer drives them."""

    def __init__(self, env_id, steps, num_envs=2, batch_size=None, autoreset="next_step", kind="lstm", **kwargs):
        torch.manual_seed(0)
        self.envs = vector.make(env_id, num_envs=num_envs, batch_size=batch_size, autoreset=autoreset, seed=0, **kwargs)
        space = self.envs.single_observation_space
        self.policy = Policy(self.envs.driver_env.obs_layout, self.envs.single_action_space, HIDDEN, kind)
        state = None if kind == "mlp" else (2, HIDDEN)
        cpu = torch.device("cpu")
        actions = self.envs.single_action_space.shape  # () for Discrete
        self.rollout = Rollout(steps, self.envs.num_envs, space.shape, space.dtype, actions, torch.int64, cpu, state)
        self.collector = Collector(self.envs, self.policy, self.rollout, autoreset, cpu, lambda a: a.numpy())
        self.collector.start(0)
        self.infos: list = []
        self.completed = 0

    def collect(self) -> None:
        self.rollout.begin()
        self.collector.act()
        while True:
            batch = self.envs.recv()
            self.completed += self.collector.record(batch)
            self.infos.append(list(batch[4]))
            if self.collector.full:
                return
            self.collector.act()

    def close(self) -> None:
        self.envs.close()


@pytest.fixture
def runs():
    made = []

    def make(*args, **kwargs):
        made.append(Run(*args, **kwargs))
        return made[-1]

    yield make
    for run in made:
        run.close()


def check_replayed_states(run: Run, rows: list[int]) -> None:
    """Each stored state is the state after the row's previous step, zeroed where the flag says."""
    r, memory = run.rollout, run.policy.memory
    for row in rows:
        state = r.states[0, row : row + 1]
        for t in range(int(r.lengths[row])):
            expected = zero_where(state, r.resets[t, row : row + 1])
            torch.testing.assert_close(r.states[t, row : row + 1], expected)
            with torch.no_grad():
                features = run.policy.trunk(run.policy.encoder(r.obs[t, row : row + 1]))
                _, state = memory.step(features, expected)


# probe_memory with one blank step: episodes of 3 steps (cue, blank, query), terminated at the query.
NEXT_STEP_RESETS = [T, F, F, F, T, F, F, F]  # the observation after the end continues it; the reset one does not
NEXT_STEP_VALID = [T, T, T, F, T, T, T, F]
SAME_STEP_RESETS = [T, F, F, T, F, F, T, F]  # the step after the end is the next episode's first
SAME_STEP_VALID = [T] * 8


@pytest.mark.parametrize(
    ("autoreset", "resets", "valid"),
    [("next_step", NEXT_STEP_RESETS, NEXT_STEP_VALID), ("same_step", SAME_STEP_RESETS, SAME_STEP_VALID)],
)
def test_known_episode_ends_set_the_flags_and_zero_the_states(runs, autoreset, resets, valid):
    run = runs("classic/probe_memory", 8, autoreset=autoreset, blank_steps=1)
    run.collect()
    r = run.rollout
    assert r.lengths.tolist() == [8, 8] and run.completed == 16
    for row in range(2):
        assert r.resets[:, row].tolist() == resets
        assert r.valid[:, row].tolist() == valid
        assert not r.states[r.resets[:, row], row].any()  # zeroed wherever the flag is set
        assert r.states[~r.resets[:, row], row].abs().sum(-1).min() > 0  # carried everywhere else
    check_replayed_states(run, [0, 1])
    ends = [2, 5] if autoreset == "same_step" else [2, 6]
    assert r.ended[:, 0].nonzero().squeeze(1).tolist() == ends


def test_masked_agents_are_zeroed_and_left_out(runs):
    # agent_1 has one blank step fewer: it leaves a step before agent_0, its row then masked
    run = runs("classic/probe_memory_2agents", 5, num_envs=1, blank_steps=1)
    run.collect()
    r = run.rollout
    assert r.resets.T.tolist() == [[T, F, F, F, T], [T, F, F, T, T]]
    assert r.valid.T.tolist() == [[T, T, T, F, T], [T, T, F, F, T]]
    check_replayed_states(run, [0, 1])


def test_same_step_truncations_keep_the_final_observations_value(runs):
    run = runs("classic/probe_dict", 4, num_envs=2, autoreset="same_step", kind="lstm", episode_length=3)
    run.collect()
    r = run.rollout
    assert r.has_final[:, 0].tolist() == [F, F, T, F] and r.has_final[:, 1].tolist() == [F, F, T, F]
    finals = [info for info in run.infos[2] if "final_observation" in info]
    assert sorted(info["env_id"] for info in finals) == [0, 1]
    # V(final observation) with the state after the truncated step: its own step from the stored state
    obs = torch.from_numpy(np.stack([info["final_observation"] for info in sorted(finals, key=lambda i: i["env_id"])]))
    with torch.no_grad():
        _, _, after = run.policy.act(r.obs[2], r.states[2])
        expected = run.policy.value(obs, after)
    torch.testing.assert_close(r.final_values[2], expected)


def test_async_batches_give_rows_their_own_lengths_and_carry_the_step_in_flight(runs):
    # Serial steps groups of batch_size envs round robin: rows 0-1, then rows 2-3, and so on.
    run = runs("classic/probe_memory", 3, num_envs=4, batch_size=2, blank_steps=1)
    run.collect()
    r = run.rollout
    # rows 0-1 completed their third step first; rows 2-3 have their third step in flight
    assert r.lengths.tolist() == [3, 3, 2, 2] and r.counts.tolist() == [3, 3, 3, 3]
    assert run.completed == 10 and r.complete == 10
    assert r.counted().sum(0).tolist() == [3, 3, 2, 2]
    check_replayed_states(run, [0, 1, 2, 3])
    in_flight = {name: getattr(r, name)[2, 2:].clone() for name in ("obs", "actions", "values", "states", "resets")}
    run.collector.bootstrap()  # the pending rows' values go after their last steps
    rows, obs, _ = run.collector.pending
    assert rows.tolist() == [0, 1]
    with torch.no_grad():
        expected = run.policy.value(obs, run.collector.state[rows])
    torch.testing.assert_close(r.values[3, :2], expected)
    torch.testing.assert_close(r.values[2, 2:], in_flight["values"])  # the step in flight's own value
    run.collect()
    for name, before in in_flight.items():
        torch.testing.assert_close(getattr(r, name)[0, 2:], before, msg=name)
    # the carried step completed first in its rows, so they end this rollout ahead
    assert r.lengths.tolist() == [2, 2, 3, 3]


def test_full_batches_fill_every_row_as_before(runs):
    run = runs("classic/probe_3", 5, num_envs=3, kind="mlp")
    run.collect()
    r = run.rollout
    assert r.lengths.tolist() == [5, 5, 5] and run.collector.pending[0].tolist() == [0, 1, 2]
    # probe 3: two-step episodes under next-step autoreset: obs 0, obs 1 (ends), obs 1 again (no step)
    assert r.valid[:, 0].tolist() == [T, T, F, T, T]
    assert r.ended[:, 0].tolist() == [F, T, F, F, T]
