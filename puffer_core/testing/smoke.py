"""The smoke run a matrix cell runs inside its venv: ``python -m puffer_core.testing.smoke --plugin NAME --json``.

For each of a few of the plugin's envs: ``puffer_core.make``, reset, a few random steps,
the emulation round trip (unflatten a flat observation, flatten it back, same bytes), and a
2-env Multiprocessing vector run of the first env (the conformance check's own,
:func:`~puffer_core.testing.conformance.multiprocessing_run`). Prints one JSON document on
stdout (everything the envs print goes to stderr), exit code 0 when every check passed.

Which envs: the plugin's module may name them in ``PUFFER_SMOKE_ENVS``; else the first
two it declares. ``--env`` overrides both.

It is not ``puffer check``: a cell asks only whether the plugin installs, imports and runs
through the core with these versions, so the first failure ends the run and says whether
it was an import (``import-failed``) or a run (``smoke-failed``); the conformance checks
(determinism, the peers' own API checkers) judge a plugin's quality, which the matrix
does not record.

At import time the module imports only the standard library and what ``puffer_core`` has
loaded already, so a plugin or an environment package that does not import is reported as
JSON. Python imports
``puffer_core`` and ``puffer_core.testing`` before it: when those fail, no report is
printed, and the matrix records the ImportError the run died of as ``import-failed``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import re
import sys
import time
import traceback
from typing import Any

# Loaded already: Python imports puffer_core (whose __init__ imports environments) before this module.
from puffer_core.env.environments import installed_versions

__all__ = ["main", "smoke"]

DEFAULT_ENVS_PER_PLUGIN = 2
DEFAULT_STEPS = 16


def _error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[0][:500] if lines else type(exc).__name__


class Check:
    """Records stages; the first failure ends the plugin's smoke."""

    def __init__(self, report: dict[str, Any]):
        self.report = report

    @contextlib.contextmanager
    def stage(self, name: str, env_id: str | None = None, kind: str = "smoke"):
        start = time.perf_counter()
        entry = {"stage": name, "env": env_id, "ok": False}
        self.report["stages"].append(entry)
        try:
            yield entry
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            entry["error"] = _error(exc)
            entry["traceback"] = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]
            frames = traceback.extract_tb(exc.__traceback__)
            if frames:
                entry["where"] = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}"
            failed_kind = "import" if kind == "import" or isinstance(exc, ImportError) else "smoke"
            self.report.update(
                ok=False,
                failed_stage=name,
                failed_env=env_id,
                kind=failed_kind,
                error=entry["error"],
                where=entry.get("where"),
            )
            raise _Stop from exc
        else:
            entry["ok"] = True
        finally:
            entry["seconds"] = round(time.perf_counter() - start, 3)


class _Stop(Exception):
    pass


def _sample_actions(space: Any, rows: int | None, np: Any) -> Any:
    if rows is None:
        return space.sample()
    return np.stack([np.asarray(space.sample()) for _ in range(rows)])


def _round_trip(env: Any, obs: Any, np: Any) -> None:
    """unflatten a flat observation, flatten it back: the same bytes (first slot of a multi-agent env)."""
    row = obs[0] if hasattr(env, "obs_layouts") else obs
    nested = env.unflatten_observation(row)
    back = np.asarray(env.flatten_observation(nested))
    flat = np.asarray(row)
    if back.shape != flat.shape or back.tobytes() != flat.tobytes():
        raise AssertionError(
            f"flatten(unflatten(obs)) differs from obs (shape {back.shape} vs {flat.shape}, dtype {back.dtype})"
        )


def smoke_env(check: Check, env_id: str, steps: int, np: Any) -> None:
    import puffer_core  # deferred: see the module docstring

    with check.stage("make", env_id):
        env = puffer_core.make(env_id)
    try:
        multi = hasattr(env, "obs_layouts")  # PettingZooEmulator
        rows = env.num_agents if multi else None
        with check.stage("reset", env_id):
            obs, _ = env.reset(seed=0)
        with check.stage("emulation", env_id):
            _round_trip(env, obs, np)
        with check.stage("step", env_id):
            for _ in range(steps):
                if multi:
                    obs, _, _, _, _ = env.step(_sample_actions(env.single_action_space, rows, np))
                    done = env.done
                else:
                    obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
                    done = bool(terminated) or bool(truncated)
                if done:
                    obs, _ = env.reset()
    finally:
        with contextlib.suppress(Exception):
            env.close()


def smoke_vector(check: Check, env_id: str, steps: int) -> None:
    with check.stage("vector", env_id):
        from puffer_core.testing.conformance import multiprocessing_run  # deferred: see the module docstring

        multiprocessing_run(env_id, steps)


_MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def import_requirements(spec: Any) -> None:
    """What the env's ``requires`` names must be here (the core's own check), and its modules import.

    Importing the module names surfaces broken installs (a missing shared library, an ABI
    mismatch) as import failures rather than as failures of the first ``make``.
    """
    try:
        from puffer_core.env.environments import missing_requirements  # deferred: see the module docstring
    except ImportError:  # pragma: no cover - a core without the helper
        missing = []
    else:
        missing = missing_requirements(spec)
    if missing:
        raise ImportError(f"{spec.id} needs {', '.join(missing)}, which this environment does not have")
    for entry in spec.requires:
        if _MODULE_NAME.match(entry):
            importlib.import_module(entry)


def pick_envs(plugin_set: Any, name: str, wanted: list[str] | None, count: int) -> list[str]:
    if wanted:
        return wanted
    obj = plugin_set.pm.get_plugin(name)
    marked = getattr(obj, "PUFFER_SMOKE_ENVS", None)
    if marked:
        return list(marked)
    return list(plugin_set.plugins[name].envs)[:count]


def smoke(
    plugin: str,
    envs: list[str] | None = None,
    steps: int = DEFAULT_STEPS,
    vector: bool = True,
    count: int = DEFAULT_ENVS_PER_PLUGIN,
) -> dict[str, Any]:
    """Smoke-run one plugin here; a JSON-able report (``ok``, ``kind`` of failure, ``error``, stages)."""
    report: dict[str, Any] = {"plugin": plugin, "ok": True, "envs": [], "stages": [], "python": sys.version.split()[0]}
    check = Check(report)
    try:
        with check.stage("import", kind="import"):
            import numpy as np

            import puffer_core  # noqa: F401  (deferred: see the module docstring)
            from puffer_core.plugins import LOADED, load_plugins  # deferred: see the module docstring

            plugin_set = load_plugins()
            info = plugin_set.plugins.get(plugin)
            if info is None:
                raise ImportError(f"plugin {plugin!r} is not installed here (found: {', '.join(plugin_set.plugins)})")
            if info.status != LOADED:
                raise ImportError(f"plugin {plugin!r} did not load: {info.error}")
            report["distribution"] = info.distribution
            report["plugin_version"] = info.version
        with check.stage("choose envs", kind="import"):
            chosen = pick_envs(plugin_set, plugin, envs, count)
            if not chosen:
                raise RuntimeError(f"plugin {plugin!r} declares no environments to smoke-run")
            report["envs"] = chosen
        with check.stage("import env packages", kind="import"):
            for env_id in chosen:
                import_requirements(plugin_set.get_spec(env_id))
        from puffer_core.plugins import reset_plugins  # deferred: see the module docstring

        reset_plugins()  # make() uses the process-wide set; load it the ordinary way
        for env_id in chosen:
            smoke_env(check, env_id, steps, np)
        if vector:
            smoke_vector(check, chosen[0], steps)
    except _Stop:
        pass
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m puffer_core.testing.smoke", description=__doc__.splitlines()[0])
    parser.add_argument("--plugin", action="append", required=True, help="plugin to smoke-run (repeatable)")
    parser.add_argument("--env", action="append", help="env id to use instead of the plugin's choice (repeatable)")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--no-vector", action="store_true", help="skip the 2-env Multiprocessing run")
    parser.add_argument("--packages", default="", help="comma list of packages whose versions to report")
    parser.add_argument("--json", action="store_true", help="print a JSON report on stdout")
    args = parser.parse_args(argv)

    names = [p for item in args.plugin for p in item.split(",") if p]
    start = time.perf_counter()
    saved = None
    if args.json:  # whatever the envs print (even from C) must not spoil the JSON on stdout
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
    try:
        reports = []
        for name in names:
            envs = [e for e in (args.env or []) if e.split("/", 1)[0] == name] or None
            reports.append(smoke(name, envs, args.steps, vector=not args.no_vector))
    finally:
        if saved is not None:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
    wanted = ["puffer-core", *(p for p in args.packages.split(",") if p)]
    wanted += [r["distribution"] for r in reports if r.get("distribution")]
    result = {
        "ok": all(r["ok"] for r in reports),
        "plugins": reports,
        "versions": installed_versions(dict.fromkeys(wanted)),
        "python": sys.version.split()[0],
        "seconds": round(time.perf_counter() - start, 3),
    }
    if args.json:
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
    else:
        for report in reports:
            status = "ok" if report["ok"] else f"FAILED at {report['failed_stage']}: {report['error']}"
            print(f"{report['plugin']}: {', '.join(report['envs'])}: {status}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
