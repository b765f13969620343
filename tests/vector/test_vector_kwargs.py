"""`vector.make(..., vector_kwargs=...)`: a key the backend does not take, or a timeout that
is not a positive finite number of seconds, is a one-line APIUsageError naming it, raised
before any process starts."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from puffer_core import vector
from puffer_core.errors import APIUsageError


@pytest.mark.parametrize(
    ("backend", "vector_kwargs", "message"),
    [
        ("serial", {"timeout": 5}, "vector_kwargs 'timeout' not taken by the Serial backend; it takes: native"),
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


SPIN = "vector_kwargs['spin_us'] (microseconds) must be a number in [0, 1,000,000], got"
MAILBOX = "vector_kwargs['info_buffer_bytes'] must be"
MAILBOX_RANGE = "≥ 0 and ≤ 1,073,741,824, got"
MAIN_SHARE = (
    "vector_kwargs['main_share'] must be True, False, 'auto' or a number of envs (an int ≥ 1 and ≤ 65,536), got"
)
CPUS = "must be a number in [0, 1,000,000], got"


@pytest.mark.parametrize(
    ("backend", "vector_kwargs", "message"),
    [
        # issue 33: a spin of NaN, -1 or 1e12 µs (a busy-wait of days) started workers
        ("multiprocessing", {"spin_us": float("nan")}, f"{SPIN} nan"),
        ("multiprocessing", {"spin_us": -1}, f"{SPIN} -1"),
        ("multiprocessing", {"spin_us": 1e12}, f"{SPIN} 1000000000000.0"),
        ("multiprocessing", {"spin_us": "5"}, f"{SPIN} '5'"),
        # issue 33: -1 was accepted, 2**62 a raw ValueError from numpy
        ("multiprocessing", {"info_buffer_bytes": -1}, f"{MAILBOX} {MAILBOX_RANGE} -1"),
        ("multiprocessing", {"info_buffer_bytes": 2**62}, f"{MAILBOX} {MAILBOX_RANGE} 4,611,686,018,427,387,904"),
        ("multiprocessing", {"info_buffer_bytes": 2.5}, f"{MAILBOX} an int {MAILBOX_RANGE} 2.5"),
        # issue 33: -1 said it "leaves 5 for 2 worker(s)"
        ("multiprocessing", {"main_share": -1}, f"{MAIN_SHARE} -1"),
        ("multiprocessing", {"main_share": float("nan")}, f"{MAIN_SHARE} nan"),
        ("multiprocessing", {"max_restarts": 10**15}, "max_restarts'] must be ≥ 1 and ≤ 1,000,000, got 1,000,"),
        ("multiprocessing", {"start_method": 5}, "vector_kwargs['start_method'] must be one of 'fork'"),
        ("ray", {"actor_options": {"num_cpus": float("nan")}}, f"['actor_options']['num_cpus'] {CPUS} nan"),
        ("ray", {"actor_options": {"num_gpus": -1}}, f"['actor_options']['num_gpus'] {CPUS} -1"),
        ("ray", {"actor_options": {1: 2}}, "['actor_options'] must be a dict (Ray's actor .options()), got {1: 2}"),
        ("ray", {"timeout": float("nan")}, "vector_kwargs['timeout'] (seconds) must be a number in (0,"),
    ],
)
def test_unchecked_settings_of_issue_33_are_one_line_errors(backend, vector_kwargs, message):
    test_bad_vector_kwargs_are_one_line_errors(backend, vector_kwargs, message)


def _every_key():
    for backend in vector.BACKENDS:
        cls = {"serial": vector.Serial, "multiprocessing": vector.Multiprocessing, "ray": vector.Ray}[backend]
        yield from ((backend, key) for key in vector.backend_kwargs_of(cls))


@pytest.mark.parametrize(("backend", "key"), list(_every_key()))
@pytest.mark.parametrize("value", [float("nan"), -1, 10**18, object()], ids=["nan", "negative", "huge", "object"])
def test_every_vector_kwarg_of_every_backend_refuses_nonsense_in_one_line(backend, key, value):
    """Whatever the key, a NaN, a negative, an absurdly large or a wrong-typed value is refused
    before anything starts, in one line naming the key (Ray's too: before Ray is imported)."""
    before = multiprocessing.active_children()
    with pytest.raises(APIUsageError) as caught:
        vector.make("classic/cartpole", num_envs=2, backend=backend, vector_kwargs={key: value})
    assert key in str(caught.value) and len(str(caught.value).splitlines()) == 1
    assert multiprocessing.active_children() == before


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"spin_us": float("nan")}, r"^spin_us \(microseconds\) must be a number in \[0, 1,000,000\], got nan$"),
        ({"info_buffer_bytes": -1}, r"^info_buffer_bytes must be ≥ 0 and ≤ 1,073,741,824, got -1$"),
        ({"main_share": -1}, r"^main_share must be True, False, 'auto' or a number of envs \(an int ≥ 1 and ≤ 65,536"),
        ({"max_restarts": 10**7}, r"^max_restarts must be ≥ 1 and ≤ 1,000,000, got 10,000,000$"),
    ],
)
def test_a_multiprocessing_env_built_directly_checks_its_settings_too(setting, message):
    before = multiprocessing.active_children()
    with pytest.raises(APIUsageError, match=message):
        vector.Multiprocessing("classic/cartpole", num_envs=2, **setting)
    assert multiprocessing.active_children() == before


def test_settings_within_bounds_still_run():
    kwargs = {"spin_us": 0, "info_buffer_bytes": 0, "main_share": np.int64(1), "max_restarts": 1_000_000}
    with vector.make("classic/cartpole", num_envs=3, num_workers=2, backend="mp", vector_kwargs=kwargs) as envs:
        envs.reset(seed=1)
        observations, *_ = envs.step(np.zeros(3, dtype=np.int64))
        assert observations.shape == (3, 4) and envs.num_workers == 2


def test_the_keys_each_backend_takes_are_listed():
    serial = vector.backend_kwargs_of(vector.Serial)
    mp = vector.backend_kwargs_of(vector.Multiprocessing)
    assert serial == ["native"]  # every backend hosts native batches
    assert {
        "native",
        "timeout",
        "startup_timeout",
        "start_method",
        "spin_us",
        "info_buffer_bytes",
        "main_share",
    } <= set(mp)
    assert not {"env", "num_envs", "seed", "self", "check_actions", "record"} & set(mp)
    # A name, as make takes it, lists the same keys as the class.
    assert vector.backend_kwargs_of("multiprocessing") == vector.backend_kwargs_of("mp") == mp
    assert vector.backend_kwargs_of("serial") == serial


@pytest.mark.parametrize("backend", ["multiproc", 3, dict])
def test_backend_kwargs_of_refuses_what_names_no_backend(backend):
    with pytest.raises(APIUsageError, match=r"^backend must be one of 'serial', 'multiprocessing', 'ray', got "):
        vector.backend_kwargs_of(backend)


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
