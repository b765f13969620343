"""`vector.make(..., vector_kwargs=...)`: a key the backend does not take, or a timeout that
is not a positive finite number of seconds, is a one-line APIUsageError naming it, raised
before any process starts."""

from __future__ import annotations

import multiprocessing

import pytest

from puffer_core import vector
from puffer_core.errors import APIUsageError


@pytest.mark.parametrize(
    ("backend", "vector_kwargs", "message"),
    [
        ("serial", {"timeout": 5}, "vector_kwargs 'timeout' not taken by the Serial backend; it takes: check_actions"),
        ("multiprocessing", {"spinn_us": 5}, "'spinn_us' not taken by the Multiprocessing backend; it takes:"),
        ("multiprocessing", {"num_envs": 4}, "'num_envs' not taken"),  # make's own argument, not a backend key
        ("multiprocessing", {"timeout": float("inf")}, "vector_kwargs['timeout'] (seconds) must be a number in (0,"),
        ("multiprocessing", {"timeout": float("nan")}, "vector_kwargs['timeout'] (seconds) must be"),
        ("multiprocessing", {"timeout": 0}, "vector_kwargs['timeout'] (seconds) must be"),
        ("multiprocessing", {"startup_timeout": "60"}, "vector_kwargs['startup_timeout'] (seconds) must be"),
        ("multiprocessing", {"timeout": 10**9}, "got 1000000000"),
        ("multiprocessing", ["timeout", 5], "vector_kwargs must be a dict, got list"),
    ],
)
def test_bad_vector_kwargs_are_one_line_errors(backend, vector_kwargs, message):
    before = multiprocessing.active_children()
    with pytest.raises(APIUsageError) as caught:
        vector.make("classic/cartpole", num_envs=2, backend=backend, vector_kwargs=vector_kwargs)
    assert message in str(caught.value) and len(str(caught.value).splitlines()) == 1
    assert multiprocessing.active_children() == before


def test_the_keys_each_backend_takes_are_listed():
    serial = vector.backend_kwargs_of(vector.Serial)
    mp = vector.backend_kwargs_of(vector.Multiprocessing)
    assert serial == ["check_actions", "record"]
    assert {"timeout", "startup_timeout", "start_method", "spin_us", "check_actions", "record"} <= set(mp)
    assert not {"env", "num_envs", "seed", "self"} & set(mp)


@pytest.mark.parametrize(
    ("num_envs", "message"),
    [(100_000_000, "num_envs must be ≥ 1 and ≤ 65,536, got 100,000,000"), (True, "num_envs must be an int")],
)
def test_absurd_counts_are_refused_before_anything_is_built(num_envs, message):
    with pytest.raises(APIUsageError, match=message):
        vector.make("classic/cartpole", num_envs=num_envs, backend="multiprocessing")


def test_a_backend_built_directly_checks_its_startup_timeout_too():
    before = multiprocessing.active_children()
    with pytest.raises(APIUsageError, match=r"^startup_timeout \(seconds\) must be a number in \(0,"):
        vector.Multiprocessing(lambda: None, num_envs=2, startup_timeout=float("nan"))
    assert multiprocessing.active_children() == before
