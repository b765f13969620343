"""One checked-settings object for every backend (``VectorSettings``): each bad value is refused
by the same check, in the same line, on Serial, Multiprocessing and Ray, whether the backend
is built by ``vector.make`` or directly; nothing is built or started first. ``record`` and
``check_actions`` are parameters of ``vector.make``, not ``vector_kwargs`` keys."""

from __future__ import annotations

import dataclasses
import inspect
import multiprocessing

import gymnasium
import numpy as np
import pytest

from puffer_core import vector
from puffer_core.env.factory import EnvFactory
from puffer_core.errors import APIUsageError
from puffer_core.vector.vector_settings import RECORDING_CLOSE_GRACE, VectorSettings

BACKENDS = ["serial", "multiprocessing", "ray"]
CLASSES = {"serial": "Serial", "multiprocessing": "Multiprocessing", "ray": "Ray"}
#: envs the creator below built in this process (the probe env is the first a backend builds)
BUILT: list[int] = []


def counted_cartpole():
    BUILT.append(1)
    return gymnasium.make("CartPole-v1")


def _build(backend: str, path: str, env=counted_cartpole, vector_kwargs=None, **kwargs):
    """The vector env ``backend`` makes through ``vector.make``, or built directly."""
    if path == "make":
        return vector.make(env, backend=backend, vector_kwargs=vector_kwargs, **kwargs)
    return getattr(vector, CLASSES[backend])(env, **kwargs, **(vector_kwargs or {}))


#: (the culprit, make's arguments, the start of the one line that refuses it)
COMMON = [
    ("env", {"env": 5}, "env must be a registered env id (str) or a zero-argument creator, got int"),
    ("num_envs", {"num_envs": 0}, "num_envs must be ≥ 1 and ≤ 65,536, got 0"),
    ("num_envs", {"num_envs": 2.0}, "num_envs must be an int ≥ 1 and ≤ 65,536, got 2.0"),
    ("num_workers", {"num_envs": 2, "num_workers": 0}, "num_workers must be ≥ 1 and ≤ 1,024, got 0"),
    ("batch_size", {"num_envs": 2, "batch_size": 3}, "batch_size 3 is more than num_envs 2"),
    ("seed", {"seed": -1}, "seed must be"),
    (
        "autoreset",
        {"autoreset": "sometimes"},
        "autoreset must be one of 'next_step', 'same_step', 'disabled', got 'sometimes'",
    ),
    (
        "autoreset",
        {"num_envs": 2, "batch_size": 1, "autoreset": "disabled"},
        "autoreset='disabled' needs batch_size == num_envs (2), got batch_size 1",
    ),
    ("on_fault", {"on_fault": "ignore"}, "on_fault must be 'raise' or 'restart', got 'ignore'"),
]


@pytest.mark.parametrize("path", ["make", "direct"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("culprit", "kwargs", "message"), COMMON, ids=[f"{c[0]}-{i}" for i, c in enumerate(COMMON)])
def test_every_backend_refuses_each_bad_setting_in_one_line_before_anything_starts(
    backend, path, culprit, kwargs, message
):
    """The same check refuses the same value, in the same line, on every backend and both ways
    in: before an env is built or a process (or Ray) started."""
    before = multiprocessing.active_children()
    BUILT.clear()
    kwargs = dict(kwargs)
    env = kwargs.pop("env", counted_cartpole)
    with pytest.raises(APIUsageError) as caught:
        _build(backend, path, env=env, **kwargs)
    text = str(caught.value)
    assert text.startswith(message) and culprit in text and len(text.splitlines()) == 1
    assert BUILT == [] and multiprocessing.active_children() == before


def test_more_than_one_worker_is_refused_on_serial_naming_the_backend_that_has_them():
    """Serial steps every env in this process: num_workers=2 there would be ignored silently."""
    BUILT.clear()
    for path in ("make", "direct"):
        with pytest.raises(APIUsageError, match=r"^num_workers=2 needs worker processes, but the serial backend") as e:
            _build("serial", path, num_envs=4, num_workers=2)
        assert "backend='multiprocessing'" in str(e.value) and len(str(e.value).splitlines()) == 1
    assert BUILT == []
    with _build("serial", "make", num_envs=4, num_workers=1) as envs:  # one worker is what Serial is
        assert envs.num_workers == 1
    BUILT.clear()


def test_restart_is_refused_on_serial_alone_both_ways_in():
    for path in ("make", "direct"):
        with pytest.raises(APIUsageError, match=r"^on_fault='restart' replaces a worker process, and the serial"):
            _build("serial", path, on_fault="restart")
    assert BUILT == []


#: (backend, its own setting, the start of the line that refuses it, made by make / built directly)
OWN = [
    ("multiprocessing", {"timeout": float("nan")}, "{}timeout{} (seconds) must be a number in (0,"),
    ("multiprocessing", {"startup_timeout": 0}, "{}startup_timeout{} (seconds) must be a number in (0,"),
    ("multiprocessing", {"max_restarts": 0}, "{}max_restarts{} must be ≥ 1 and ≤ 1,000,000, got 0"),
    ("multiprocessing", {"spin_us": -1}, "{}spin_us{} (microseconds) must be a number in [0, 1,000,000], got -1"),
    ("multiprocessing", {"info_buffer_bytes": 2.5}, "{}info_buffer_bytes{} must be an int ≥ 0"),
    ("multiprocessing", {"main_share": "half"}, "{}main_share{} must be True, False, 'auto' or a number of envs"),
    ("multiprocessing", {"start_method": 5}, "{}start_method{} must be one of 'fork'"),
    ("ray", {"timeout": -5}, "{}timeout{} (seconds) must be a number in (0,"),
    ("ray", {"max_restarts": 10**7}, "{}max_restarts{} must be ≥ 1 and ≤ 1,000,000, got 10,000,000"),
    ("ray", {"actor_options": [1]}, "{}actor_options{} must be a dict (Ray's actor .options()), got [1]"),
    ("ray", {"allow_unauthenticated_ray": "no"}, "{}allow_unauthenticated_ray{} must be True or False, got 'no'"),
    ("ray", {"address": "nowhere"}, "{}address{} must be None, 'auto', 'host:port' or 'ray://host:port'"),
    ("ray", {"placement": "scatter"}, "{}placement{} must be 'spread', 'pack' or None, got 'scatter'"),
]


@pytest.mark.parametrize("path", ["make", "direct"])
@pytest.mark.parametrize(("backend", "setting", "message"), OWN)
def test_a_backends_own_settings_are_checked_the_same_both_ways_in(backend, setting, message, path):
    """A backend's own setting is checked by its ``Options`` whichever way it is built: named
    ``vector_kwargs['key']`` through make, ``key`` when built directly."""
    before = multiprocessing.active_children()
    BUILT.clear()
    with pytest.raises(APIUsageError) as caught:
        _build(backend, path, num_envs=2, vector_kwargs=setting)
    key = "vector_kwargs['" if path == "make" else ""
    expected = message.format(key, "']" if key else "")
    assert str(caught.value).startswith(expected) and len(str(caught.value).splitlines()) == 1
    assert BUILT == [] and multiprocessing.active_children() == before


@pytest.mark.parametrize("path", ["make", "direct"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_setting_the_backend_does_not_take_is_refused_both_ways_in(backend, path):
    prefix = "vector_kwargs " if path == "make" else ""
    with pytest.raises(APIUsageError) as caught:
        _build(backend, path, num_envs=2, vector_kwargs={"no_such_setting": 1})
    takes = ", ".join(vector.backend_kwargs_of(getattr(vector, CLASSES[backend]))) or "none"
    assert str(caught.value).startswith(f"{prefix}'no_such_setting' not taken by the {CLASSES[backend]} backend")
    assert str(caught.value).endswith(f"; it takes: {takes}" if takes != "none" else "; it takes none")
    if backend != "ray":  # Ray's own keys name Ray on the other backends
        with pytest.raises(APIUsageError) as caught:
            _build(backend, path, num_envs=2, vector_kwargs={"placement": "spread"})
        ray_setting = f"{prefix}'placement' is a Ray setting ('placement': how Ray places the workers"
        assert str(caught.value).startswith(ray_setting)


@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_make_and_a_direct_build_check_into_equal_frozen_settings(backend):
    own = {"timeout": 5.0, "max_restarts": 2} if backend == "multiprocessing" else {}
    kwargs = {"num_envs": 4, "batch_size": 2, "seed": 7, "autoreset": "same_step"}
    with (
        _build(backend, "make", vector_kwargs=own, **kwargs) as made,
        _build(backend, "direct", **kwargs, **own) as built,
    ):
        assert isinstance(made.settings, VectorSettings)
        assert dataclasses.replace(made.settings, factory=None) == dataclasses.replace(built.settings, factory=None)
        assert made.settings.options == built.settings.options
        assert (made.settings.num_envs, made.settings.batch_size, made.settings.seed) == (4, 2, 7)
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.settings.seed = 8
        if backend == "multiprocessing":
            assert made.timeout == 5.0 and made.settings.options.timeout == 5.0


@pytest.mark.ray
def test_ray_built_directly_takes_its_own_settings_as_keywords_as_make_takes_vector_kwargs(local_ray):
    own = {"timeout": 30.0, "max_restarts": 2, "actor_options": {"num_cpus": 0.5}}
    kwargs = {"num_envs": 2, "num_workers": 2, "seed": 3}
    with vector.make(counted_cartpole, backend="ray", vector_kwargs=own, **kwargs) as made:
        with vector.Ray(counted_cartpole, **kwargs, **own) as built:
            assert dataclasses.replace(made.settings, factory=None) == dataclasses.replace(built.settings, factory=None)
            assert built.timeout == 30.0 and built.settings.options.actor_options == {"num_cpus": 0.5}
            made.reset(seed=3)
            built.reset(seed=3)
            for _ in range(5):
                step_made = made.step(np.zeros(2, np.int64))
                step_built = built.step(np.zeros(2, np.int64))
                np.testing.assert_array_equal(step_made[0], step_built[0])


def test_a_backends_constructor_shows_its_own_settings_as_keywords():
    parameters = inspect.signature(vector.Multiprocessing).parameters
    assert list(parameters)[:8] == [
        "env",
        "num_envs",
        "num_workers",
        "batch_size",
        "seed",
        "env_kwargs",
        "autoreset",
        "on_fault",
    ]
    own = {name: p.default for name, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert own["timeout"] == 60.0 and own["spin_us"] is None and own["main_share"] is False
    assert sorted(own) == vector.backend_kwargs_of(vector.Multiprocessing)
    assert "record" not in inspect.signature(vector.Serial).parameters


# ---------------------------------------------------------------- record and check_actions
@pytest.mark.parametrize("key", ["record", "check_actions"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_record_and_check_actions_in_vector_kwargs_say_to_pass_them_to_make(backend, key, tmp_path):
    value = str(tmp_path / "run.gif") if key == "record" else False
    with pytest.raises(APIUsageError) as caught:
        vector.make("classic/cartpole", num_envs=2, backend=backend, vector_kwargs={key: value})
    text = str(caught.value)
    assert text.startswith(f"vector_kwargs[{key!r}] is a parameter of vector.make: pass {key}=… (")
    assert len(text.splitlines()) == 1
    assert not (tmp_path / "run.gif").exists()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"record": float("nan")}, "record must be a path (.mp4, .gif or .cast) or a planned Recording, got nan"),
        ({"record": "run.avi"}, "cannot record to 'run.avi': unknown suffix '.avi'"),
        ({"check_actions": "no"}, "check_actions must be True or False, got 'no'"),
    ],
)
def test_bad_record_and_check_actions_are_make_errors_on_every_backend(backend, kwargs, message):
    before = multiprocessing.active_children()
    with pytest.raises(APIUsageError) as caught:
        vector.make("classic/cartpole", num_envs=2, backend=backend, **kwargs)
    assert str(caught.value).startswith(message) and len(str(caught.value).splitlines()) == 1
    assert multiprocessing.active_children() == before


@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_record_and_check_actions_are_parameters_of_make(backend, tmp_path):
    path = tmp_path / "run.gif"
    workers = {"num_workers": 2} if backend != "serial" else {}
    with vector.make(
        "classic/cartpole", num_envs=2, backend=backend, record=str(path), check_actions=False, **workers
    ) as envs:
        assert envs.check_actions is False and envs.settings.check_actions is False
        assert envs.settings.records and envs.settings.close_grace(1.0) == RECORDING_CLOSE_GRACE
        envs.reset(seed=0)
        for _ in range(3):
            envs.step(np.zeros(2, np.int64))
    assert path.stat().st_size > 0


def test_record_goes_with_an_env_id_not_a_factory_of_its_own():
    factory = EnvFactory("classic/cartpole")
    with pytest.raises(APIUsageError, match=r"^record goes with an env id or creator, not an EnvFactory"):
        vector.make(factory, num_envs=1, record="run.gif")
