"""Native batches (``EnvSpec.batch_creator``, ``vector_kwargs={"native": True}``) hosted by every
backend: the probes, batched in gymnasium's SyncVectorEnv, step exactly the per-env path's
trajectories; CartPole steps in gymnasium's numpy CartPoleVectorEnv with the per-env path's
spaces and episode statistics; what native batches cannot do is refused in one line."""

from __future__ import annotations

import functools

import gymnasium
import numpy as np
import pytest

from puffer_core import EnvSpec, vector
from puffer_core.env.environments import SpecCreator
from puffer_core.errors import APIUsageError, WorkerError

BACKENDS = ["serial", "multiprocessing", pytest.param("ray", marks=pytest.mark.ray)]
STEPS = 60


def run(env, native: bool, backend: str = "serial", num_envs: int = 6, seed: int = 11, **kwargs) -> dict:
    """Per env id: what each of its steps gave (observation, reward, flags) and its episodes.

    Each env's action at its t-th step is a function of its id and t, so the trajectories do
    not depend on the order in which asynchronous batches come back."""
    workers = None if backend == "serial" else 2
    seen: dict[int, list] = {}
    with vector.make(
        env, num_envs=num_envs, num_workers=workers, backend=backend, seed=seed,
        vector_kwargs={"native": native, **kwargs.pop("vector_kwargs", {})}, **kwargs,
    ) as envs:  # fmt: skip
        n = envs.single_action_space.n
        envs.async_reset(seed)
        for _ in range(STEPS):
            obs, rewards, terminals, truncations, infos, env_ids, masks = envs.recv()
            assert masks.all()
            ended = {info["env_id"]: (info["episode_return"], info["episode_length"]) for info in infos}
            for row, i in enumerate(env_ids.tolist()):
                step = (obs[row].tolist(), float(rewards[row]), bool(terminals[row]), bool(truncations[row]))
                seen.setdefault(i, []).append((step, ended.get(i)))
            envs.send(np.array([(7 * i + len(seen[i])) % n for i in env_ids.tolist()]))
    return seen


def assert_same(want: dict, got: dict) -> None:
    """Each env's steps agree as far as both runs took it (asynchronous batches come back in the
    order they finish, so one run may have stepped an env further than the other)."""
    compared = 0
    for i in set(want) & set(got):
        for t, (a, b) in enumerate(zip(want[i], got[i])):
            assert a == b, f"env {i}, its step {t}: {a} per env, {b} native"
            compared += 1
    assert compared >= STEPS


def episodes(seen: dict) -> int:
    return sum(ended is not None for steps in seen.values() for _, ended in steps)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("env_id", ["classic/probe_3", "classic/probe_5", "classic/probe_5_dict"])
def test_a_probe_in_native_batches_steps_the_per_env_trajectories(request, backend, env_id):
    if backend == "ray":
        request.getfixturevalue("local_ray")
    per_env = run(env_id, False, backend)
    native = run(env_id, True, backend)
    assert episodes(native) > 20, "episodes must end"
    assert_same(per_env, native)


@pytest.mark.parametrize(("backend", "batch_size"), [("serial", 2), ("serial", 3), ("multiprocessing", 3)])
def test_async_batches_of_native_units_step_the_per_env_trajectories(backend, batch_size):
    # Serial: one native batch per group of batch_size envs; Multiprocessing: one per worker.
    assert_same(
        run("classic/probe_5", False, backend, batch_size=batch_size),
        run("classic/probe_5", True, backend, batch_size=batch_size),
    )


@pytest.mark.parametrize("batch_size", [2, 6])
def test_the_main_share_steps_its_envs_as_one_native_batch(batch_size):
    kwargs = {"num_envs": 6, "batch_size": batch_size, "vector_kwargs": {"main_share": True}}
    with vector.make(
        "classic/probe_5", num_envs=6, num_workers=2, batch_size=batch_size, backend="multiprocessing",
        vector_kwargs={"native": True, "main_share": True},
    ) as envs:  # fmt: skip
        assert envs.settings.counts == (2, 2, 2)  # two workers, then the main process's share
    want = run("classic/probe_5", False, "multiprocessing", **dict(kwargs))
    got = run("classic/probe_5", True, "multiprocessing", **dict(kwargs))
    assert {4, 5} <= set(got)  # the main share's envs stepped
    assert_same(want, got)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cartpole_in_its_numpy_vector_env_has_the_per_env_spaces_and_episode_statistics(request, backend):
    if backend == "ray":
        request.getfixturevalue("local_ray")
    with vector.make("classic/cartpole", num_envs=4, seed=0, vector_kwargs={"native": False}) as per_env:
        spaces = (per_env.single_observation_space, per_env.single_action_space)
    workers = None if backend == "serial" else 2
    with vector.make(
        "classic/cartpole", num_envs=8, num_workers=workers, backend=backend, seed=0, vector_kwargs={"native": True}
    ) as envs:
        assert (envs.single_observation_space, envs.single_action_space) == spaces
        envs.async_reset(0)
        episodes, ones, rng = [], 0, np.random.default_rng(0)
        for _ in range(400):
            obs, rewards, terminals, truncations, infos, env_ids, _ = envs.recv()
            assert obs.shape == (len(env_ids), 4) and obs.dtype == np.float32
            ones += int((rewards == 1).sum())
            episodes += [(info["episode_return"], info["episode_length"]) for info in infos]
            envs.send(rng.integers(0, 2, len(env_ids)))
    assert len(episodes) > 50
    # CartPole pays 1 a step: a return is its length, the native batch's reset step not counted.
    assert all(ret == length for ret, length in episodes)
    assert 10 < np.mean([length for _, length in episodes]) < 40  # random actions keep a pole up briefly


@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_the_same_seed_gives_the_same_cartpole_trajectories(backend):
    first = run("classic/cartpole", True, backend, num_envs=4, seed=5)
    assert_same(first, run("classic/cartpole", True, backend, num_envs=4, seed=5))
    other = run("classic/cartpole", True, backend, num_envs=4, seed=6)
    assert first[0][0] != other[0][0]


@pytest.mark.parametrize(
    ("env_id", "kwargs", "message"),
    [
        ("classic/acrobot", {}, "classic/acrobot has no native batches (its plugin declares no batch_creator): drop"),
        ("classic/cartpole", {"autoreset": "same_step"}, "native batches reset an ended env on its next step"),
        ("classic/cartpole", {"record": "x.mp4"}, "native batches have no env 0 of their own to record"),
    ],
)
def test_what_native_batches_cannot_do_is_refused_in_one_line(env_id, kwargs, message):
    with pytest.raises(APIUsageError) as caught:
        vector.make(env_id, num_envs=2, vector_kwargs={"native": True}, **kwargs)
    assert message in str(caught.value) and len(str(caught.value).splitlines()) == 1


def _batch_of(num_envs: int, **kwargs):
    return gymnasium.vector.SyncVectorEnv([functools.partial(gymnasium.make, "MountainCar-v0")] * num_envs)


def test_a_batch_creator_whose_spaces_are_not_the_envs_is_refused_naming_them():
    spec = EnvSpec(
        id="test/cartpole", creator=functools.partial(gymnasium.make, "CartPole-v1"), batch_creator=_batch_of
    )
    with pytest.raises(APIUsageError, match=r"test/cartpole's native batch does not step the env it makes alone: its "):
        vector.make(SpecCreator(spec), num_envs=2, vector_kwargs={"native": True})


class _Breaks(gymnasium.Wrapper):
    def step(self, action):
        raise RuntimeError("the engine broke")


def _breaking_batch(num_envs: int, **kwargs):
    return gymnasium.vector.SyncVectorEnv([lambda: _Breaks(gymnasium.make("CartPole-v1"))] * num_envs)


@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_a_native_batch_that_raises_is_a_worker_error_naming_its_first_env(backend, no_leaks):
    spec = EnvSpec(
        id="test/breaks", creator=functools.partial(gymnasium.make, "CartPole-v1"), batch_creator=_breaking_batch
    )
    workers = None if backend == "serial" else 2
    envs = vector.make(
        SpecCreator(spec), num_envs=4, num_workers=workers, backend=backend, vector_kwargs={"native": True}
    )
    no_leaks.extend(getattr(envs, "pids", []))
    try:
        envs.async_reset(0)
        envs.recv()
        with pytest.raises(WorkerError, match=r"env (0|2) raised RuntimeError in step"):
            envs.send(np.zeros(envs.batch_size, np.int64))
            envs.recv()
    finally:
        envs.close()


class _CountedBatch(gymnasium.vector.SyncVectorEnv):
    """gymnasium's SyncVectorEnv of CartPole that writes its size to ``folder`` when made."""

    def __init__(self, num_envs: int, folder: str):
        with open(f"{folder}/made", "a") as made:
            made.write(f"{num_envs}\n")
        super().__init__([functools.partial(gymnasium.make, "CartPole-v1")] * num_envs)


@pytest.mark.parametrize(
    ("backend", "num_workers", "batch_size", "sizes"),
    [("serial", None, 2, [1, 2, 2, 2]), ("multiprocessing", 2, None, [1, 3, 3]), ("serial", None, None, [1, 6])],
)
def test_each_unit_makes_one_native_batch_of_its_envs(tmp_path, backend, num_workers, batch_size, sizes):
    # The first batch, of 1 env, is vector.make's check of the batch's spaces in the main process.
    creator = functools.partial(gymnasium.make, "CartPole-v1")
    batch_creator = functools.partial(_CountedBatch, folder=str(tmp_path))
    spec = EnvSpec(id="test/counted", creator=creator, batch_creator=batch_creator)
    with vector.make(
        SpecCreator(spec), num_envs=6, num_workers=num_workers, batch_size=batch_size, backend=backend,
        vector_kwargs={"native": True},
    ) as envs:  # fmt: skip
        envs.reset(seed=0) if batch_size is None else envs.async_reset(0)
    assert sorted(map(int, (tmp_path / "made").read_text().split())) == sorted(sizes)


@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_calls_to_single_envs_are_refused_before_any_worker_is_asked(backend):
    workers = None if backend == "serial" else 2
    with vector.make(
        "classic/cartpole", num_envs=4, num_workers=workers, backend=backend, vector_kwargs={"native": True}
    ) as envs:
        envs.reset(seed=0)
        for call in (lambda: envs.call("render"), lambda: envs.get_attr("spec"), envs.render):
            with pytest.raises(APIUsageError, match=r"native batches have none; make the vector env with"):
                call()
        envs.step(np.zeros(4, np.int64))  # the workers are untouched
