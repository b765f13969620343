"""Autotune: measure a small grid of vector settings on one env, within a time budget, and
name the fastest as a ready-to-paste ``puffer_core.vector.make(...)`` call.

What ``puffer_core.vector.autotune(env, ...)`` and ``puffer autotune ENV`` run, over the
grid of :mod:`puffer_core.vector.settings`.

Each setting is built, stepped with random actions and closed, ``rounds`` times (at least
two), interleaved with the others (``puffer_core.vector.timing.run_rounds``), so a burst of noise
on a shared machine hits one round of several settings rather than every round of one;
each keeps its best round. The budget covers building and closing too: before each
measurement the time left is split evenly over the measurements left, less what building
and closing this setting took before.

Per setting: steps/second (agent rows, timed by ``puffer_core.vector.timing.time_async``, the loop
``puffer bench`` uses), RAM per env (the memory of the main process and the workers over
``num_envs``, :mod:`puffer_core.vector.process_memory`) and the reset fraction (episode
ends over steps, counted in an untimed pass before the timed one, since every end costs
a reset).
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

from puffer_core.env.factory import has_native_batches
from puffer_core.env.random_actions import random_action_batches
from puffer_core.errors import PufferError
from puffer_core.specs.limits import MAX_SECONDS, check_int, check_number
from puffer_core.vector.backends import make
from puffer_core.vector.checks import available_cpus
from puffer_core.vector.process_memory import child_pids, ram_per_env
from puffer_core.vector.settings import Setting, default_num_envs, ray_grid, settings_grid
from puffer_core.vector.timing import Measured, Progress, Turn, run_rounds, time_async

__all__ = [
    "COLUMNS",
    "DEFAULT_BUDGET",
    "autotune",
    "make_call",
    "print_result",
    "summary_lines",
    "table_lines",
    "table_rows",
    "table_title",
]

#: Seconds the whole run may take (building, measuring and closing every setting).
DEFAULT_BUDGET = 60.0
#: Shares of one measurement: an untimed pass that counts episode ends, the timing loop's
#: warm-up, and the timed steps.
_COUNT_SHARE, _WARMUP_SHARE = 0.2, 0.1
#: The fewest agent steps the untimed pass counts episode ends over.
_MIN_COUNT_STEPS = 256
#: The share of the budget kept for building and closing that runs over its guess.
_RESERVE = 0.1
#: The shortest timed measurement (a tiny budget still steps every setting a little).
_MIN_SECONDS = 0.02
#: The columns of the result table (``table_rows``).
COLUMNS = ("backend", "workers", "batch", "steps/s", "vs best", "RAM/env MB", "resets")


class _Trial:
    """What one setting's measurements gather besides its steps/second: episode ends and
    steps, peak RAM per env, and how long building and closing it took last time."""

    def __init__(self, setting: Setting):
        self.setting = setting
        self.ends = 0
        self.steps = 0
        self.ram_mb: float | None = None
        self.ram_source: str | None = None
        self.overhead: float | None = None

    def row(self, num_envs: int, measured: Measured) -> dict[str, Any]:
        s = self.setting
        return {
            "name": s.name,
            "backend": s.backend,
            "num_envs": num_envs,
            "num_workers": s.num_workers,
            "batch_size": s.batch_size,
            "main_share": s.main_share,
            "main_envs": s.main_envs,
            "native": s.native,
            "sps": None if measured.best is None else round(measured.best, 1),
            "sps_rounds": [round(x, 1) for x in measured.figures],
            "ram_per_env_mb": None if self.ram_mb is None else round(self.ram_mb, 2),
            "ram_source": self.ram_source,
            "reset_fraction": round(self.ends / self.steps, 5) if self.steps else None,
            "error": measured.error,
        }


def _count_ends(envs: Any, seconds: float, seed: int) -> tuple[int, int]:
    """(episode ends, agent steps) of ``seconds`` of random actions through recv/send."""
    actions = random_action_batches(envs.single_action_space, envs.batch_size, 64, seed)
    envs.async_reset(seed)
    ends = steps = n = 0
    deadline = time.perf_counter() + seconds
    # At least _MIN_COUNT_STEPS agent steps (or batches, should masks hide every row),
    # however short the share: a reset fraction from a handful of steps would be noise.
    while (steps < _MIN_COUNT_STEPS and n < _MIN_COUNT_STEPS) or time.perf_counter() < deadline:
        _, _, terminals, truncations, _, _, masks = envs.recv()
        ended = terminals | truncations
        if masks is not None:
            ended = ended & masks
        ends += int(np.count_nonzero(ended))
        steps += len(ended) if masks is None else int(np.count_nonzero(masks))
        envs.send(actions[n % 64])
        n += 1
    return ends, steps


def _measure(trial: _Trial, env: Any, num_envs: int, seconds: float, seed: int, env_kwargs: dict) -> float:
    """Build the setting, count episode ends, time it, read its memory, close it; its steps/second."""
    before = child_pids()
    started = time.perf_counter()
    envs = make(env, seed=seed, **trial.setting.make_kwargs(num_envs), **env_kwargs)
    try:
        built = time.perf_counter()
        ends, steps = _count_ends(envs, seconds * _COUNT_SHARE, seed)
        trial.ends, trial.steps = trial.ends + ends, trial.steps + steps
        timed = seconds * (1 - _COUNT_SHARE - _WARMUP_SHARE)
        sps = time_async(envs, timed, seconds * _WARMUP_SHARE, envs.batch_size, envs.single_action_space, seed)
        measured = time.perf_counter()
        # Ray's workers are no children of this process (and a first Ray setting starts Ray's own
        # services here): their memory is not ours to read.
        ram, source = (None, None) if trial.setting.backend == "ray" else ram_per_env(num_envs, child_pids() - before)
        if ram is not None and (trial.ram_mb is None or ram > trial.ram_mb):  # the peak: a budget is set by it
            trial.ram_mb, trial.ram_source = ram, source
    finally:
        envs.close()
    trial.overhead = (built - started) + (time.perf_counter() - measured)
    return sps


def autotune(
    env: Any,
    num_envs: int | None = None,
    budget: float = DEFAULT_BUDGET,
    *,
    rounds: int = 2,
    seed: int = 0,
    cpus: int | None = None,
    progress: Progress | None = None,
    verbose: bool = True,
    ray: dict[str, Any] | None = None,
    **env_kwargs: Any,
) -> dict[str, Any]:
    """Measure the grid of vector settings on ``env`` within ``budget`` seconds; return the
    rows and the best, and (``verbose``) print them with the best as a ``vector.make`` call.

    Args:
        env: what ``vector.make`` takes (an env id or a creator; ``env_kwargs`` go to it).
        num_envs: envs per setting; default ``default_num_envs(env)``.
        budget: seconds for the whole run, building and closing included.
        rounds: interleaved rounds (at least 2) sharing the budget.
        seed: the seed of every setting's envs and random actions.
        cpus: sets the grid's worker counts; default the CPUs this process may use.
        progress: ``progress(name, done, total)``, called before each measurement.
        verbose: print the table and the best setting as a ``vector.make(...)`` call.
        ray: measure the Ray backend instead of Multiprocessing (beside Serial), with these
            ``vector_kwargs`` (``{}``: Ray on this machine; ``{"address": ..., "placement":
            ...}``: a cluster).

    Returns:
        ``{"env", "env_kwargs", "num_envs", "cpus", "budget_seconds", "seconds", "rounds",
        "rows", "best", "make_kwargs", "make_call"}``; each row has ``sps``,
        ``ram_per_env_mb``, ``reset_fraction`` and ``error`` (a setting that fails is
        reported, not raised).

    Raises:
        APIUsageError: a count, budget or round number that cannot work.
        PufferError: Serial cannot build or step the env (then no setting can), or no
            setting could be measured.
    """
    num_envs = default_num_envs(env) if num_envs is None else check_int("num_envs", num_envs, 1)
    budget = check_number("budget (seconds)", budget, 0, MAX_SECONDS, low_open=True)
    rounds = check_int("rounds (interleaved, against noise)", rounds, 2)
    cpus = available_cpus() if cpus is None else check_int("cpus", cpus, 1)
    grid = settings_grid(num_envs, cpus, has_native_batches(env)) if ray is None else ray_grid(num_envs, cpus, ray)
    trials = [_Trial(s) for s in grid]
    started = time.perf_counter()
    # A tenth of the budget stays in reserve: a setting built for the first time (more
    # workers, a heavy env) may take longer to build and close than the guess for it.
    deadline = started + (1 - _RESERVE) * budget

    def measure(turn: Turn) -> float:
        trial = trials[turn.index]
        seconds = max(_MIN_SECONDS, (deadline - time.perf_counter()) / turn.left - _overhead_guess(trial, trials))
        return _measure(trial, env, num_envs, seconds, seed, env_kwargs)

    def fatal(turn: Turn, exc: Exception) -> bool:
        # Serial (the first setting) failing on its first round with an error of Puffer Core's
        # own (an unknown id, a bad kwarg): every setting would fail alike.
        return turn.index == 0 and turn.round == 0 and isinstance(exc, PufferError)

    names = [trial.setting.name for trial in trials]
    measured = run_rounds(names, measure, rounds, progress=progress, fatal=fatal)
    if progress is not None:
        progress("done", len(names) * rounds, len(names) * rounds)
    rows = [trial.row(num_envs, m) for trial, m in zip(trials, measured)]
    result = _result(env, rows, trials, num_envs, cpus, budget, rounds, time.perf_counter() - started, env_kwargs)
    if verbose:
        print_result(result)
    return result


def _overhead_guess(trial: _Trial, trials: list[_Trial]) -> float:
    """Seconds building and closing ``trial`` will take: its own last time, else the mean so far."""
    if trial.overhead is not None:
        return trial.overhead
    seen = [t.overhead for t in trials if t.overhead is not None]
    return sum(seen) / len(seen) if seen else 0.0


def _result(
    env: Any,
    rows: list[dict[str, Any]],
    trials: list[_Trial],
    num_envs: int,
    cpus: int,
    budget: float,
    rounds: int,
    seconds: float,
    env_kwargs: dict,
) -> dict[str, Any]:
    measured = [r for r in rows if r["sps"]]
    if not measured:
        raise PufferError(f"autotune: no setting of {_env_label(env)} could be measured: {rows[0]['error']}")
    best = max(measured, key=lambda r: r["sps"])
    for row in rows:
        row["ratio_vs_best"] = round(row["sps"] / best["sps"], 3) if row["sps"] else None
    setting = next(t.setting for t in trials if t.setting.name == best["name"])
    kwargs = setting.make_kwargs(num_envs)
    return {
        "env": _env_label(env),
        "env_kwargs": env_kwargs,
        "num_envs": num_envs,
        "cpus": cpus,
        "budget_seconds": budget,
        "seconds": round(seconds, 2),
        "rounds": rounds,
        "rows": rows,
        "best": best,
        "make_kwargs": kwargs,
        "make_call": make_call(env, kwargs, env_kwargs),
    }


def _env_label(env: Any) -> str:
    if isinstance(env, str):
        return env
    name = getattr(env, "__name__", None)  # not __qualname__: "f.<locals>.g" is no Python name
    return name if isinstance(name, str) and name.isidentifier() else "env"


def make_call(env: Any, kwargs: dict[str, Any], env_kwargs: dict[str, Any] | None = None) -> str:
    """``puffer_core.vector.make(...)`` as Python source: the env id (or the creator's name),
    ``kwargs`` and the env's own kwargs."""
    first = _source(env) if isinstance(env, str) else _env_label(env)
    parts = [first] + [f"{key}={_source(value)}" for key, value in {**kwargs, **(env_kwargs or {})}.items()]
    return f"puffer_core.vector.make({', '.join(parts)})"


def _source(value: Any) -> str:
    """Python source for a plain value (str, number, bool, None, list, dict), double-quoted."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_source(k)}: {_source(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_source(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_source(v) for v in value) + (",)" if len(value) == 1 else ")")
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a valid Python literal for any str
    return repr(value)


# --------------------------------------------------------------------------- the table


def table_title(result: dict[str, Any]) -> str:
    return f"puffer autotune {result['env']} ({result['num_envs']} envs, {result['cpus']} CPUs)"


def table_rows(result: dict[str, Any]) -> list[tuple[dict[str, Any], list[str]]]:
    """(row, its cells under ``COLUMNS``), fastest first; a failed row's steps/s cell is
    ``failed <error>`` and the cells after it are empty."""
    out = []
    for row in sorted(result["rows"], key=lambda r: -(r["sps"] or 0)):
        label = Setting("multiprocessing", 1, 1, row["main_share"], row.get("main_envs")).main_label
        workers = "–" if row["backend"] == "serial" else f"{row['num_workers']}{label}"
        backend = row["backend"] + (" native" if row.get("native") else "")
        cells = [backend, workers, str(row["batch_size"])]
        if row["sps"] is None:
            out.append((row, [*cells, f"failed: {row['error'] or ''}", "", "", ""]))
            continue
        out.append(
            (
                row,
                [
                    *cells,
                    f"{row['sps']:,.0f}",
                    "best" if row["name"] == result["best"]["name"] else f"{row['ratio_vs_best']:.2f}×",
                    "–" if row["ram_per_env_mb"] is None else f"{row['ram_per_env_mb']:.1f}",
                    "–" if row["reset_fraction"] is None else f"{row['reset_fraction']:.2%}",
                ],
            )
        )
    return out


def table_lines(result: dict[str, Any]) -> list[str]:
    """The table as plain text: the title, the header and one line per row, columns aligned."""
    body = [cells for _, cells in table_rows(result)]
    widths = [max(len(line[i]) for line in (COLUMNS, *body)) for i in range(len(COLUMNS))]

    def line(cells: Any) -> str:
        padded = [cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(cells, widths))]
        return "  ".join(padded).rstrip()

    return [table_title(result), line(COLUMNS), *(line(cells) for cells in body)]


def print_result(result: dict[str, Any]) -> None:
    """The table and the summary, as plain lines on stdout (``puffer autotune`` draws its own table)."""
    for line in (*table_lines(result), *summary_lines(result)):
        print(line)


def summary_lines(result: dict[str, Any]) -> list[str]:
    """What follows the table: the time taken and the best setting as a make(...) call."""
    measured = len(result["rows"])
    return [
        f"{measured} settings × {result['rounds']} rounds in {result['seconds']:.1f} s "
        f"(budget {result['budget_seconds']:g} s); each setting's best round counts.",
        f"best: {result['best']['name']}, {result['best']['sps']:,.0f} steps/s",
        "import puffer_core.vector",
        result["make_call"],
    ]
