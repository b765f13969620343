"""Conformance checks for plugin authors: ``check_env`` / ``check_plugin`` (and `puffer check`).

Each check runs in isolation and returns a ``CheckResult``; one failing check never
hides the others. Besides Puffer's own checks, every env goes through its peer library's
own checker (``run_peer_checker``): Gymnasium's ``check_env`` for a single-agent env,
PettingZoo's ``parallel_api_test`` for a multi-agent one. Use from a plugin's own tests::

    from puffer_core.testing import check_plugin

    def test_conforms():
        report = check_plugin("myplugin")
        assert report.passed, report.summary()
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import re
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

import puffer_core
from puffer_core import vector
from puffer_core.env.emulation import PettingZooEmulator
from puffer_core.env.environments import make_raw, missing_requirements
from puffer_core.env.random_actions import random_actions
from puffer_core.errors import PufferError, UnknownEnvError
from puffer_core.plugins import LOADED, PluginSet, get_plugins
from puffer_core.plugins.apis import is_multiagent
from puffer_core.plugins.gymnasium_ids import unregistered_aliases
from puffer_core.specs.declarations import EnvSpec
from puffer_core.testing.assertions import assert_trees_equal
from puffer_core.testing.native_conformance import native_contract, native_determinism, native_multiprocessing_run

__all__ = [
    "GYMNASIUM_CHECK",
    "PETTINGZOO_CHECK",
    "CheckReport",
    "CheckResult",
    "check_env",
    "check_plugin",
    "multiprocessing_run",
    "peer_checker_name",
    "run_peer_checker",
]

DEFAULT_STEPS = 64

#: Names of the peer-checker check in a report.
GYMNASIUM_CHECK = "gymnasium check_env"
PETTINGZOO_CHECK = "pettingzoo parallel_api_test"

# Gymnasium's check_env warns about every emulator whatever its env: an emulator wraps its
# env (so it is not its own ``unwrapped``) and, not made by gymnasium.make, has no spec.
# They say nothing about the env under test, so they are left out of the report.
_EMULATOR_WARNINGS = ("is different from the unwrapped version", "due to the environment not having a spec")
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
_MAX_WARNING_CHARS = 160


@dataclass
class CheckResult:
    target: str
    name: str
    passed: bool
    detail: str = ""
    seconds: float = 0.0
    #: Not run because the env's own package is missing here (neither passed nor failed).
    skipped: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "check": self.name,
            "passed": self.passed,
            "skipped": self.skipped,
            "detail": self.detail,
            "seconds": round(self.seconds, 3),
        }


@dataclass
class CheckReport:
    target: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        ran = [r for r in self.results if not r.skipped]
        return bool(ran) and all(r.passed for r in ran)

    def summary(self) -> str:
        lines = [f"{_mark(r, 'SKIP', 'PASS', 'FAIL')} {r.target}: {r.name} {r.detail}".rstrip() for r in self.results]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "passed": self.passed, "results": [r.to_json() for r in self.results]}


def _mark(result: CheckResult, skipped: str, passed: str, failed: str) -> str:
    return skipped if result.skipped else passed if result.passed else failed


class _Checks:
    """Collects results; each ``check`` context records pass/fail with timing."""

    def __init__(self, target: str):
        self.report = CheckReport(target)

    def run(self, name: str, fn: Callable[[], str | None]) -> bool:
        start = time.perf_counter()
        try:
            detail = fn() or ""
            passed = True
        except AssertionError as exc:
            passed, detail = False, str(exc) or "assertion failed"
        except PufferError as exc:
            passed, detail = False, str(exc)
        except Exception as exc:
            tb = traceback.format_exception(exc)
            passed, detail = False, f"{type(exc).__name__}: {exc}\n{''.join(tb[-3:]).rstrip()}"
        self.report.results.append(CheckResult(self.report.target, name, passed, detail, time.perf_counter() - start))
        return passed


def _agents_of(env: Any) -> list[str] | None:
    return list(env.possible_agents) if is_multiagent(env) else None


class _ActionSampler:
    """Seeded random actions; holds each agent's space since some envs build a new one per call."""

    def __init__(self, env: Any, seed: int | None = None):
        self.agents = _agents_of(env)
        if self.agents is None:
            self.spaces = {None: env.action_space}
        else:
            self.spaces = {agent: env.action_space(agent) for agent in self.agents}
        if seed is not None:
            for i, space in enumerate(self.spaces.values()):
                space.seed(seed + i)

    def sample(self, live: list[str] | None) -> Any:
        if self.agents is None:
            return self.spaces[None].sample()
        return {agent: self.spaces[agent].sample() for agent in (live or [])}


def _rollout(env_id: str, plugins: PluginSet, seed: int, steps: int) -> list[Any]:
    """Observations of a seeded rollout with seeded random actions (for determinism)."""
    env = make_raw(env_id, plugins=plugins)
    try:
        sampler = _ActionSampler(env, seed)
        obs, _ = env.reset(seed=seed)
        trace = [obs]
        for _ in range(steps):
            result = env.step(sampler.sample(getattr(env, "agents", None)))
            trace.append(result[0])
            if sampler.agents is None and (result[2] or result[3]):
                break
            if sampler.agents is not None and not env.agents:
                break
        return trace
    finally:
        env.close()


def _contract(env_id: str, plugins: PluginSet, steps: int) -> str:
    """Spaces declared match what the env returns; reset/step return the right shapes."""
    env = make_raw(env_id, plugins=plugins)
    try:
        agents = _agents_of(env)
        sampler = _ActionSampler(env, seed=0)
        reset = env.reset(seed=0)
        assert isinstance(reset, tuple) and len(reset) == 2, f"reset() must return (obs, info), got {type(reset)}"
        obs, info = reset
        if agents is None:
            assert isinstance(info, dict), "reset() info must be a dict"
            assert env.observation_space.contains(obs), f"reset() observation is outside observation_space: {obs!r}"
        else:
            for agent, value in obs.items():
                assert agent in agents, f"reset() returned an observation for unknown agent {agent!r}"
                space = env.observation_space(agent)
                assert space.contains(value), f"reset() observation of {agent!r} is outside its observation_space"
        count = 0
        for count in range(1, steps + 1):
            result = env.step(sampler.sample(getattr(env, "agents", None)))
            assert isinstance(result, tuple) and len(result) == 5, "step() must return a 5-tuple"
            obs, reward, terminated, truncated, info = result
            if agents is None:
                assert env.observation_space.contains(obs), f"step {count}: observation outside observation_space"
                assert np.isscalar(reward) or np.ndim(reward) == 0, f"step {count}: reward must be a scalar"
                assert isinstance(terminated, (bool, np.bool_)), "terminated must be a bool"
                assert isinstance(truncated, (bool, np.bool_)), "truncated must be a bool"
                assert isinstance(info, dict), "info must be a dict"
                if terminated or truncated:
                    env.reset()
            else:
                for agent, value in obs.items():
                    assert env.observation_space(agent).contains(value), f"step {count}: {agent}'s obs out of space"
                for name, part in (("rewards", reward), ("terminations", terminated), ("truncations", truncated)):
                    assert isinstance(part, dict), f"step() {name} must be a dict keyed by agent"
                if not env.agents:
                    env.reset()
        return f"{count} steps"
    finally:
        env.close()


def _determinism(env_id: str, plugins: PluginSet, steps: int) -> str:
    first = _rollout(env_id, plugins, seed=123, steps=steps)
    second = _rollout(env_id, plugins, seed=123, steps=steps)
    assert len(first) == len(second), f"same seed gave episodes of {len(first)} and {len(second)} steps"
    for i, (a, b) in enumerate(zip(first, second)):
        assert_trees_equal(a, b, f"step {i} obs")
    return f"{len(first)} observations identical"


def _emulation(env_id: str) -> str:
    env = puffer_core.make(env_id)
    try:
        flat, _ = env.reset(seed=0)
        raw_env = env.env
        agents = _agents_of(raw_env)
        expected = env.observation_space.shape if agents is None else (len(agents), *env.observation_space.shape)
        assert flat.shape == expected, f"flat observation has shape {flat.shape}, expected {expected}"
        assert flat.dtype == env.observation_space.dtype, f"flat observation dtype {flat.dtype}"
        obs_space = raw_env.observation_space if agents is None else raw_env.observation_space(agents[0])
        act_space = raw_env.action_space if agents is None else raw_env.action_space(agents[0])
        obs_space.seed(0)
        act_space.seed(0)
        for _ in range(8):
            sample = obs_space.sample()
            assert_trees_equal(env.unflatten_observation(env.flatten_observation(sample)), sample, "obs")
            action = act_space.sample()
            assert_trees_equal(env.unflatten_action(env.flatten_action(action)), action, "action")
        env.step(_flat_random_action(env.action_space, getattr(env, "num_agents", 1), agents is not None))
        return f"obs {tuple(env.observation_space.shape)} {env.observation_space.dtype}, action {env.action_space}"
    finally:
        env.close()


def _flat_random_action(space: spaces.Space, num_agents: int, multiagent: bool) -> Any:
    batch = random_actions(space, num_agents, np.random.default_rng(0))
    return batch if multiagent else batch[0]


def multiprocessing_run(env_id: str, steps: int) -> str:
    """Reset ``env_id`` vectorized (2 envs, 2 Multiprocessing workers) and take ``steps`` random steps."""
    with vector.make(env_id, num_envs=2, num_workers=2, backend="multiprocessing", seed=0) as envs:
        rng = np.random.default_rng(0)
        envs.reset(seed=0)
        for _ in range(steps):
            envs.step(random_actions(envs.single_action_space, envs.num_envs, rng))
    return f"{steps} steps on 2 workers"


def peer_checker_name(env: Any) -> str:
    """The peer checker that applies to an emulated env: PettingZoo's for a multi-agent one, else Gymnasium's."""
    return PETTINGZOO_CHECK if isinstance(env, PettingZooEmulator) else GYMNASIUM_CHECK


def _checker_function(name: str, cycles: int | None) -> Callable[[Any], None]:
    """The checker function itself, applied to what it expects: the emulator, or a PettingZoo emulator's env."""
    if name == PETTINGZOO_CHECK:
        from pettingzoo.test import parallel_api_test

        num_cycles = {} if cycles is None else {"num_cycles": cycles}
        return lambda env: parallel_api_test(env.env, **num_cycles)
    from gymnasium.utils.env_checker import check_env as gymnasium_check_env

    return gymnasium_check_env


def run_peer_checker(env: Any, cycles: int | None = None) -> list[str]:
    """Run the peer library's own API checker on an emulated env; return its warnings, short and deduplicated.

    ``gymnasium.utils.env_checker.check_env`` on a ``GymnasiumEmulator``;
    ``pettingzoo.test.parallel_api_test`` on a ``PettingZooEmulator``'s adapted Parallel env
    (``env.env``), ``cycles`` steps per episode (the checker's default when None). A failure
    raises ``AssertionError`` with the checker's message.
    """
    name = peer_checker_name(env)
    checker = _checker_function(name, cycles)  # imported before recording: import-time warnings are not its verdict
    # The checkers print (parallel_api_test: "Passed Parallel API test"), which would corrupt `puffer check --json`.
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("always")  # every warning, also those Python would show only once per place
        try:
            checker(env)
        except AssertionError as exc:
            seen = _short_warnings(caught)
            suffix = f" (warnings: {'; '.join(seen)})" if seen else ""
            raise AssertionError(f"{_assertion_message(exc)}{suffix}") from exc
    return _short_warnings(caught)


def _assertion_message(exc: AssertionError) -> str:
    """The assertion's message, or its source line when it has none (many of the checkers' asserts have none)."""
    if str(exc):
        return str(exc)
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    return f"`{frame.line}` ({frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})"


def _short_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    """Warning texts without colour codes or gymnasium's ``WARN:`` prefix, truncated, each once, in order."""
    texts: list[str] = []
    for record in caught:
        text = " ".join(_ANSI_ESCAPE.sub("", str(record.message)).split()).removeprefix("WARN: ")
        if any(marker in text for marker in _EMULATOR_WARNINGS):
            continue
        if len(text) > _MAX_WARNING_CHARS:
            text = text[: _MAX_WARNING_CHARS - 1] + "…"
        if text not in texts:
            texts.append(text)
    return texts


def _check_with_peer_checker(checks: _Checks, env_id: str, steps: int) -> None:
    """Run the peer checker on a fresh emulated env, as a check named after that checker."""
    try:
        env = puffer_core.make(env_id)
    except Exception as exc:  # which checker applies is unknown until the env is made
        checks.run(f"{GYMNASIUM_CHECK} / {PETTINGZOO_CHECK}", functools.partial(_reraise, exc))
        return
    try:
        name = peer_checker_name(env)
        if name == PETTINGZOO_CHECK and importlib.util.find_spec("pettingzoo") is None:
            hint = "not run: needs pettingzoo (pip install pettingzoo)"
            checks.report.results.append(CheckResult(env_id, name, True, hint, skipped=True))
            return
        checks.run(name, lambda: _warnings_detail(run_peer_checker(env, cycles=steps)))
    finally:
        env.close()


def _warnings_detail(texts: list[str]) -> str:
    return f"{len(texts)} warning{'s' if len(texts) != 1 else ''}: {'; '.join(texts)}" if texts else "no warnings"


def _reraise(exc: BaseException) -> str:
    raise exc


def _envs_for(target: str, plugins: PluginSet) -> list[str]:
    return [env_id for env_id in plugins.env_ids() if plugins.env_owner[env_id] == target]


def check_env(env_id: str, steps: int = DEFAULT_STEPS, plugins: PluginSet | None = None) -> CheckReport:
    """Run every conformance check on one environment."""
    plugins = get_plugins() if plugins is None else plugins

    checks = _Checks(env_id)
    if not checks.run("spec", lambda: plugins.get_spec(env_id).description or "found"):
        return checks.report
    spec = plugins.get_spec(env_id)
    missing = missing_requirements(spec)
    if missing:
        hint = spec.install_hint or f"pip install {' '.join(missing)}"
        checks.report.results.append(
            CheckResult(env_id, "env checks", True, f"not run: needs {', '.join(missing)} ({hint})", skipped=True)
        )
        return checks.report
    if spec.aliases:
        checks.run("aliases registered", lambda: _aliases(spec))
    checks.run("reset/step contract and spaces", lambda: _contract(env_id, plugins, steps))
    checks.run("determinism by seed", lambda: _determinism(env_id, plugins, steps))
    checks.run("emulation round trip", lambda: _emulation(env_id))
    _check_with_peer_checker(checks, env_id, steps)
    checks.run("multiprocessing run", lambda: multiprocessing_run(env_id, 16))
    if spec.batch_creator is not None:
        checks.run("native batch contract", lambda: native_contract(env_id, plugins, steps))
        checks.run("native batch determinism by seed", lambda: native_determinism(env_id, plugins, steps))
        checks.run("native batches on 2 workers", lambda: native_multiprocessing_run(env_id, 16))
    return checks.report


def _aliases(spec: EnvSpec) -> str:
    missing = unregistered_aliases(spec)
    assert not missing, f"{', '.join(missing)}: not registered with {spec.api} (aliases must be ids it registers)"
    return ", ".join(spec.aliases)


def _plugin_hooks(name: str, plugins: PluginSet) -> str:
    info = plugins.plugins[name]
    assert info.status == LOADED, f"plugin '{name}' is {info.status}: {info.error}"
    parts = [f"hooks: {', '.join(info.hooks) or 'none'}"]
    if name in plugins.docker_layers:
        plugins.docker_layers[name].validate(name)
        parts.append("DockerLayer valid")
    if name in plugins.compat_axes:
        plugins.compat_axes[name].validate(name)
        parts.append("CompatAxes valid")
    return "; ".join(parts)


def check_plugin(name: str, steps: int = DEFAULT_STEPS, plugins: PluginSet | None = None) -> CheckReport:
    """Check a plugin's hooks and run ``check_env`` on each of its envs."""
    plugins = get_plugins() if plugins is None else plugins
    if name not in plugins.plugins:
        raise UnknownEnvError(
            f"no plugin or env named {name!r}; installed plugins: {', '.join(sorted(plugins.plugins))}"
        )
    checks = _Checks(name)
    checks.run("plugin loads, DockerLayer and CompatAxes valid", lambda: _plugin_hooks(name, plugins))
    env_ids = _envs_for(name, plugins)
    checks.run("declares envs", lambda: f"{len(env_ids)} envs" if env_ids else _raise("the plugin declares no envs"))
    for env_id in env_ids:
        checks.report.results += check_env(env_id, steps=steps, plugins=plugins).results
    return checks.report


def _raise(message: str) -> str:
    raise AssertionError(message)


def check(target: str, steps: int = DEFAULT_STEPS) -> CheckReport:
    """``check_plugin`` for a plugin's name, ``check_env`` for an env id (``plugin/name`` or a gymnasium id)."""
    plugins = get_plugins()
    if target not in plugins.plugins and ("/" in target or plugins.knows(target)):
        return check_env(target, steps)
    return check_plugin(target, steps)


def iter_lines(report: CheckReport) -> Iterator[str]:
    for r in report.results:
        yield f"{_mark(r, '-', '✓', '✗')} {r.target}: {r.name}" + (f" — {r.detail}" if r.detail else "")
