"""call / get_attr / set_attr / render reach the envs on every backend, and a failing call
leaves the vector env usable."""

from __future__ import annotations

import contextlib
import threading

import gymnasium
import numpy as np
import pytest
from fork_guard import forking_on_purpose

from puffer_core import vector
from puffer_core.errors import APIUsageError, EnvCallError
from puffer_core.testing import CountingEnv
from puffer_core.vector.calls import is_wrapped

#: Multiprocessing under each start method (calls travel through the mailbox, whatever started the workers)
BACKENDS = [
    "serial",
    "multiprocessing-fork",
    "multiprocessing-forkserver",
    "multiprocessing-spawn",
    pytest.param("ray", marks=pytest.mark.ray),
]


class CallableEnv(CountingEnv):
    """A CountingEnv with things to call: a method, one that raises, one returning the unpicklable."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, episode_length: int = 5, render_mode: str | None = "rgb_array"):
        super().__init__(episode_length=episode_length)
        self.render_mode = render_mode
        self.speed = 1.0

    def times(self, factor: float, offset: float = 0.0) -> float:
        return self.speed * factor + offset

    def explode(self) -> None:
        raise ValueError("boom on purpose")

    def lock(self) -> threading.Lock:
        return threading.Lock()

    def render(self) -> np.ndarray:
        return np.full((4, 6, 3), self.first_seed % 256, np.uint8)


def creator():
    return gymnasium.wrappers.TimeLimit(CallableEnv(), max_episode_steps=50)


@pytest.fixture(params=BACKENDS)
def envs(request):
    backend, _, start_method = request.param.partition("-")
    if backend == "ray":
        request.getfixturevalue("local_ray")
    workers = None if backend == "serial" else 2
    kwargs = {"start_method": start_method} if start_method else None
    with forking_on_purpose() if start_method == "fork" else contextlib.nullcontext():
        with vector.make(creator, num_envs=3, num_workers=workers, backend=backend, vector_kwargs=kwargs) as envs:
            yield envs


def test_get_attr_looks_through_the_wrappers(envs):
    assert envs.get_attr("speed") == (1.0, 1.0, 1.0)  # on the raw env, beneath TimeLimit and the emulator
    assert envs.get_attr("render_mode") == ("rgb_array",) * 3  # the emulator's own
    assert envs.get_attr("_max_episode_steps", env_indices=[2]) == (50,)  # TimeLimit's


def test_set_attr_then_call_sees_it(envs):
    envs.set_attr("speed", [1.0, 2.0, 3.0])
    assert envs.call("times", 10.0, offset=1.0) == (11.0, 21.0, 31.0)
    envs.set_attr("speed", 0.5, env_indices=[0])
    assert envs.get_attr("speed") == (0.5, 2.0, 3.0)


def test_render_returns_every_envs_frame(envs):
    envs.reset(seed=7)
    frames = envs.render()
    assert [frame.shape for frame in frames] == [(4, 6, 3)] * 3
    assert [int(frame[0, 0, 0]) for frame in frames] == [7, 8, 9]


def test_a_function_runs_on_each_env(envs):
    assert envs.call(is_wrapped, gymnasium.wrappers.TimeLimit) == (True, True, True)
    assert envs.call(is_wrapped, gymnasium.wrappers.RecordEpisodeStatistics, env_indices=1) == (False,)


def test_failures_name_the_env_and_leave_the_envs_usable(envs):
    envs.reset(seed=0)
    with pytest.raises(AttributeError, match=r"get_attr\('no_such_thing'\) failed in env 0: .*TimeLimit"):
        envs.get_attr("no_such_thing")
    with pytest.raises(EnvCallError, match=r"call\('explode'\) failed in env 1: ValueError: boom on purpose") as info:
        envs.call("explode", env_indices=[1])
    assert info.value.env_index == 1 and "Traceback" in str(info.value)
    if envs.backend != "serial":
        with pytest.raises(EnvCallError, match=r"call\('lock'\) failed in env 0: PicklingError"):
            envs.call("lock")
    with pytest.raises(APIUsageError, match=r"env index 3 is out of range: this vector env has envs 0–2"):
        envs.get_attr("speed", env_indices=[0, 3])
    with pytest.raises(APIUsageError, match=r"set_attr\('speed'\) got 2 values for 3 envs"):
        envs.set_attr("speed", [1.0, 2.0])
    obs, *_ = envs.step(np.zeros(3, int))
    np.testing.assert_array_equal(obs[:, 0], [1, 1, 1])


def test_calls_wait_for_batches_in_flight_and_leave_them_ready():
    with vector.make(creator, num_envs=4, num_workers=2, batch_size=2, backend="multiprocessing") as envs:
        envs.async_reset(0)
        first = envs.recv()[5].tolist()
        envs.send(np.zeros(2, int))  # one batch in flight while we call
        assert envs.get_attr("speed") == (1.0,) * 4
        seen = set(first)
        for _ in range(3):
            ids = envs.recv()[5].tolist()
            seen.update(ids)
            envs.send(np.zeros(2, int))
        assert seen == {0, 1, 2, 3}


def test_calls_on_a_closed_env_say_so():
    envs = vector.make(creator, num_envs=2)
    envs.close()
    with pytest.raises(APIUsageError, match="closed"):
        envs.get_attr("speed")
