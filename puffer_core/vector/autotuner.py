"""Autotune: measure a small grid of vector settings on one env, within a time budget, and
name the fastest as a ready-to-paste ``puffer_core.vector.make(...)`` call.

What ``puffer_core.vector.autotune(env, ...)`` and ``puffer autotune ENV`` run. The grid
(``settings_grid``) is Serial, and Multiprocessing with ``num_workers`` in {1, cores − 1,
cores, 2 × cores} (clipped to ``num_envs``), ``batch_size`` ``num_envs`` and, where valid,
``num_envs // 2`` (EnvPool-style: whichever workers finish first), each with the main
process stepping one share of the envs (``main_share``) and without; it includes every
setting ``puffer bench`` measures (``bench.settings``).

Each setting is built, stepped with random actions and closed, ``rounds`` times (at least
two), interleaved with the others, so a burst of noise on a shared machine hits one round
of several settings rather than every round of one; each keeps its best round. The budget
covers building and closing too: before each measurement the time left is split evenly
over the measurements left, less what building and closing this setting took before.

Per setting: steps/second (agent rows, timed by ``bench.timing.time_async``, the loop
``puffer bench`` uses), RAM per env (the memory of the main process and the workers over
``num_envs``; proportional set size where Linux reports it, so pages the forked workers
share with the main process count once, else resident set size) and the reset fraction
(episode ends over steps, counted in an untimed pass before the timed one, since every
end costs a reset).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from puffer_core import vector
from puffer_core.bench.settings import STANDARD, main_share_settings, mp_settings
from puffer_core.bench.timing import random_action_batches, time_async
from puffer_core.cli.errors import one_line
from puffer_core.cli.tables import print_table
from puffer_core.errors import APIUsageError, PufferError
from puffer_core.vector.base import available_cpus, check_counts

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_NUM_ENVS",
    "Setting",
    "autotune",
    "child_pids",
    "default_num_envs",
    "make_call",
    "memory_mb",
    "render_table",
    "settings_grid",
    "summary_lines",
]

#: Seconds the whole run may take (building, measuring and closing every setting).
DEFAULT_BUDGET = 60.0
#: Envs per setting when the env has no standard count (``bench.settings.STANDARD``).
DEFAULT_NUM_ENVS = 16
#: Shares of one measurement: an untimed pass that counts episode ends, the timing loop's
#: warm-up, and the timed steps.
_COUNT_SHARE, _WARMUP_SHARE = 0.2, 0.1
#: The fewest agent steps the untimed pass counts episode ends over.
_MIN_COUNT_STEPS = 256
#: The share of the budget kept for building and closing that runs over its guess.
_RESERVE = 0.1
#: The shortest timed measurement (a tiny budget still steps every setting a little).
_MIN_SECONDS = 0.02

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Setting:
    """One vector setting: ``backend``, worker processes, envs per batch, whether the main
    process steps a share, and how many envs that share holds (None: an even share)."""

    backend: str
    num_workers: int
    batch_size: int
    main_share: bool = False
    main_envs: int | None = None

    @property
    def name(self) -> str:
        if self.backend == "serial":
            return "Serial"
        return f"Multiprocessing w={self.num_workers}{self.main_label} b={self.batch_size}"

    @property
    def main_label(self) -> str:
        """ "+main" (an even share), "+main(7)" (7 envs) or ""."""
        if not self.main_share:
            return ""
        return "+main" if self.main_envs is None else f"+main({self.main_envs})"

    def make_kwargs(self, num_envs: int) -> dict[str, Any]:
        """The ``vector.make`` keyword arguments of this setting (the env and its kwargs aside)."""
        if self.backend == "serial":
            return {"num_envs": num_envs, "backend": "serial"}
        kwargs: dict[str, Any] = {
            "num_envs": num_envs,
            "num_workers": self.num_workers,
            "batch_size": self.batch_size,
            "backend": "multiprocessing",
        }
        if self.main_share:  # off is the default: the pasted call stays short
            kwargs["vector_kwargs"] = {"main_share": True if self.main_envs is None else self.main_envs}
        return kwargs


def default_num_envs(env: Any) -> int:
    """The env's count in the standard bench set (8 for NetHack and Breakout), else 16."""
    return STANDARD.get(env, DEFAULT_NUM_ENVS) if isinstance(env, str) else DEFAULT_NUM_ENVS


def settings_grid(num_envs: int, cpus: int | None = None) -> list[Setting]:
    """Serial, then every valid Multiprocessing setting of the grid (see the module docstring)."""
    cpus = cpus or available_cpus()
    grid = [Setting("serial", 1, num_envs)]
    grid += [Setting("multiprocessing", w, b) for w, b in mp_settings(num_envs, cpus)]
    grid += [Setting("multiprocessing", w, b, main_share=True) for w, b in main_share_settings(num_envs, cpus)]
    workers = sorted({min(max(1, w), num_envs) for w in (1, cpus - 1, cpus, 2 * cpus)})
    for main_share in (False, True):
        for w in workers:
            for batch in dict.fromkeys((num_envs, num_envs // 2)):
                setting = Setting("multiprocessing", w, batch, main_share)
                if setting not in grid and _valid(setting, num_envs):
                    grid.append(setting)
    # The main process also receives, sends and runs the caller's code, so an even share
    # can make the workers wait for it: the same full-batch settings with one env less for it.
    for setting in [s for s in grid if s.main_share and s.batch_size == num_envs]:
        even = num_envs // (setting.num_workers + 1)
        lighter = Setting("multiprocessing", setting.num_workers, num_envs, True, even - 1)
        if even >= 2 and _valid(lighter, num_envs):
            grid.append(lighter)
    return grid


def _valid(setting: Setting, num_envs: int) -> bool:
    """Whether Multiprocessing accepts the setting (the main share counts as one more unit)."""
    units = setting.num_workers + int(setting.main_share)
    if setting.batch_size < 1 or (setting.main_share and num_envs < 2):
        return False
    if setting.main_envs is not None:  # a count: full batches, room for the workers
        return setting.batch_size == num_envs and 1 <= setting.main_envs <= num_envs - setting.num_workers
    try:
        check_counts(num_envs, units, setting.batch_size, "multiprocessing")
    except APIUsageError:
        return False
    return True


# --------------------------------------------------------------------------- memory


def memory_mb(pid: int) -> tuple[float, str] | None:
    """Memory of process ``pid`` in MB and what was read: "pss" (Linux's proportional set
    size: shared pages split among the processes sharing them), "rss", or None if neither
    /proc nor psutil can tell."""
    for path, key, source in ((f"/proc/{pid}/smaps_rollup", "Pss:", "pss"), (f"/proc/{pid}/status", "VmRSS:", "rss")):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(key):
                        return int(line.split()[1]) / 1024, source  # the kernel reports kB
        except (OSError, ValueError, IndexError):
            continue
    try:
        import psutil  # optional: where /proc is missing (macOS)

        return psutil.Process(pid).memory_info().rss / 2**20, "rss"
    except Exception:
        return None


def child_pids(pid: int | None = None) -> set[int]:
    """Every descendant of ``pid`` (default: this process); empty when it cannot be told."""
    pid = os.getpid() if pid is None else pid
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return _psutil_children(pid)
    children: set[int] = set()
    for task in tasks:
        with contextlib.suppress(OSError, ValueError):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                children.update(int(p) for p in f.read().split())
    for child in list(children):
        children |= child_pids(child)
    return children


def _psutil_children(pid: int) -> set[int]:
    try:
        import psutil

        return {p.pid for p in psutil.Process(pid).children(recursive=True)}
    except Exception:
        return set()


def _ram_per_env(num_envs: int, workers: set[int]) -> tuple[float | None, str | None]:
    """(MB per env, source) over this process and ``workers``; (None, None) if unreadable."""
    readings = [memory_mb(pid) for pid in (os.getpid(), *sorted(workers))]
    known = [r for r in readings if r is not None]
    if not known or readings[0] is None:
        return None, None
    sources = {source for _, source in known}
    return sum(mb for mb, _ in known) / num_envs, "pss" if sources == {"pss"} else "rss"


# --------------------------------------------------------------------------- measuring


class _Trial:
    """One setting's measurements over the rounds."""

    def __init__(self, setting: Setting):
        self.setting = setting
        self.sps: list[float] = []
        self.ends = 0
        self.steps = 0
        self.ram_mb: float | None = None
        self.ram_source: str | None = None
        self.overhead: float | None = None  # seconds to build and close, last time
        self.error: str | None = None

    def row(self, num_envs: int) -> dict[str, Any]:
        s = self.setting
        return {
            "name": s.name,
            "backend": s.backend,
            "num_envs": num_envs,
            "num_workers": s.num_workers,
            "batch_size": s.batch_size,
            "main_share": s.main_share,
            "main_envs": s.main_envs,
            "sps": round(max(self.sps), 1) if self.sps else None,
            "sps_rounds": [round(x, 1) for x in self.sps],
            "ram_per_env_mb": None if self.ram_mb is None else round(self.ram_mb, 2),
            "ram_source": self.ram_source,
            "reset_fraction": round(self.ends / self.steps, 5) if self.steps else None,
            "error": self.error,
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


def _measure(trial: _Trial, env: Any, num_envs: int, seconds: float, seed: int, env_kwargs: dict) -> None:
    """Build the setting, count episode ends, time it, read its memory, close it."""
    s = trial.setting
    kwargs = s.make_kwargs(num_envs)
    before = child_pids()
    started = time.perf_counter()
    envs = vector.make(env, seed=seed, **kwargs, **env_kwargs)
    try:
        built = time.perf_counter()
        ends, steps = _count_ends(envs, seconds * _COUNT_SHARE, seed)
        trial.ends, trial.steps = trial.ends + ends, trial.steps + steps
        timed = seconds * (1 - _COUNT_SHARE - _WARMUP_SHARE)
        trial.sps.append(
            time_async(envs, timed, seconds * _WARMUP_SHARE, envs.batch_size, envs.single_action_space, seed)
        )
        measured = time.perf_counter()
        ram, source = _ram_per_env(num_envs, child_pids() - before)
        if ram is not None and (trial.ram_mb is None or ram > trial.ram_mb):  # the peak: a budget is set by it
            trial.ram_mb, trial.ram_source = ram, source
    finally:
        envs.close()
    trial.overhead = (built - started) + (time.perf_counter() - measured)


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
    **env_kwargs: Any,
) -> dict[str, Any]:
    """Measure the grid of vector settings on ``env`` within ``budget`` seconds; return the
    rows and the best, and (``verbose``) print them with the best as a ``vector.make`` call.

    ``env`` is what ``vector.make`` takes (an env id or a creator; ``env_kwargs`` go to it).
    ``num_envs`` defaults to ``default_num_envs(env)``; ``cpus`` (default: the CPUs this
    process may use) sets the grid's worker counts; ``rounds`` ≥ 2 interleaved rounds share
    the budget; ``progress(name, done, total)`` is called before each measurement.
    Returns ``{"env", "num_envs", "cpus", "budget_seconds", "seconds", "rounds", "rows",
    "best", "make_kwargs", "make_call"}``; each row has ``sps``, ``ram_per_env_mb``,
    ``reset_fraction`` and ``error`` (a setting that fails is reported, not raised; Serial
    failing is raised, since then no setting can work).
    """
    num_envs = default_num_envs(env) if num_envs is None else _positive_int("num_envs", num_envs)
    budget = _positive_seconds(budget)
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 2:
        raise APIUsageError(f"rounds must be an int ≥ 2 (interleaved rounds guard against noise), got {rounds!r}")
    cpus = available_cpus() if cpus is None else _positive_int("cpus", cpus)
    trials = [_Trial(s) for s in settings_grid(num_envs, cpus)]
    started = time.perf_counter()
    # A tenth of the budget stays in reserve: a setting built for the first time (more
    # workers, a heavy env) may take longer to build and close than the guess for it.
    _run_rounds(trials, env, num_envs, started + (1 - _RESERVE) * budget, rounds, seed, env_kwargs, progress)
    result = _result(env, trials, num_envs, cpus, budget, rounds, time.perf_counter() - started, env_kwargs)
    if verbose:
        _print_result(result)
    return result


def _run_rounds(
    trials: list[_Trial],
    env: Any,
    num_envs: int,
    deadline: float,
    rounds: int,
    seed: int,
    env_kwargs: dict,
    progress: Progress | None,
) -> None:
    total = len(trials) * rounds
    done = 0
    for _ in range(rounds):
        for trial in trials:
            if progress is not None:
                progress(trial.setting.name, done, total)
            left = total - done
            done += 1
            if trial.error is not None:
                continue
            seconds = max(_MIN_SECONDS, (deadline - time.perf_counter()) / left - _overhead_guess(trial, trials))
            try:
                _measure(trial, env, num_envs, seconds, seed, env_kwargs)
            except PufferError as exc:
                if trial.setting.backend == "serial" and not trial.sps:
                    raise  # the env itself cannot be built or stepped: every setting would fail alike
                trial.error = _one_line(exc)
            except Exception as exc:
                trial.error = _one_line(exc)
    if progress is not None:
        progress("done", total, total)


def _overhead_guess(trial: _Trial, trials: list[_Trial]) -> float:
    """Seconds building and closing ``trial`` will take: its own last time, else the mean so far."""
    if trial.overhead is not None:
        return trial.overhead
    seen = [t.overhead for t in trials if t.overhead is not None]
    return sum(seen) / len(seen) if seen else 0.0


def _one_line(exc: BaseException) -> str:
    """The error as one line; a worker's quoted traceback is cut to its last line, the cause."""
    return one_line(f"{type(exc).__name__}: {exc}")[:300]


def _result(
    env: Any,
    trials: list[_Trial],
    num_envs: int,
    cpus: int,
    budget: float,
    rounds: int,
    seconds: float,
    env_kwargs: dict,
) -> dict[str, Any]:
    rows = [t.row(num_envs) for t in trials]
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


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise APIUsageError(f"{name} must be an int ≥ 1, got {value!r}")
    return int(value)


def _positive_seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise APIUsageError(f"budget must be a positive number of seconds (e.g. 60), got {value!r}")
    return float(value)


# --------------------------------------------------------------------------- rendering


def render_table(result: dict[str, Any]) -> Any:
    """A rich Table of the rows, fastest first, the best marked."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"puffer autotune {result['env']} ({result['num_envs']} envs, {result['cpus']} CPUs)")
    for column in ("backend", "workers", "batch", "steps/s", "vs best", "RAM/env MB", "resets"):
        table.add_column(column, justify="left" if column == "backend" else "right")
    for row in sorted(result["rows"], key=lambda r: -(r["sps"] or 0)):
        workers = "–" if row["backend"] == "serial" else f"{row['num_workers']}{_main_label(row)}"
        cells = [row["backend"], workers, str(row["batch_size"])]
        if row["sps"] is None:
            table.add_row(*cells, f"[red]failed[/red] {escape(row['error'] or '')}", "", "", "")
            continue
        best = row["name"] == result["best"]["name"]
        table.add_row(
            *cells,
            f"{row['sps']:,.0f}",
            "best" if best else f"{row['ratio_vs_best']:.2f}×",
            "–" if row["ram_per_env_mb"] is None else f"{row['ram_per_env_mb']:.1f}",
            "–" if row["reset_fraction"] is None else f"{row['reset_fraction']:.2%}",
            style="bold green" if best else None,
        )
    return table


def _main_label(row: dict[str, Any]) -> str:
    return Setting("multiprocessing", 1, 1, row["main_share"], row.get("main_envs")).main_label


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


def _print_result(result: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    print_table(console, render_table(result))
    for line in summary_lines(result):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
