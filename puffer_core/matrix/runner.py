"""The matrix runner: one fresh uv virtual environment per cell, install, smoke run, record.

For each cell the runner

1. creates ``<work>/venvs/<cell-id>`` with ``uv venv --clear --python X`` (no interpreter
   found: ``interpreter-missing``; uv never downloads one, ``UV_PYTHON_DOWNLOADS=never``),
2. installs puffer-core and the plugin (wheels built once per source hash, kept in
   ``<work>/wheels``) with the cell's pins, from uv's one shared cache (``install-failed``),
3. runs ``python -m puffer_core.matrix.smoke --plugin NAME --json`` inside it
   (``import-failed`` / ``smoke-failed``), all within ``--timeout`` seconds (``timeout``),

and writes the record to results.json at once. Everything a cell printed goes to
``compat_matrix/logs/<cell-id>.log``. A cell whose input hash (cell, plugin source,
core source, runner schema) matches its record is skipped unless ``force``; failing
cells never stop the run.

What reaches a command line from plugin data was checked when the plugin loaded
(``CompatAxes.validate``: package names, versions, PEP 508 requirements from the index) and
is checked again just before ``uv pip install`` (the joint cell's pins come from
results.json); options always come before a ``--``. Every command runs with an allowlisted
environment, not the caller's: see :mod:`puffer_core.matrix.environment` and ``--pass-env``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import hashlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from puffer_core.matrix import common as common_mod
from puffer_core.matrix import render
from puffer_core.matrix.environment import STAGES, cell_environment, check_pass_env, unmatched_pass_env
from puffer_core.matrix.model import DEFAULT_PYTHON, Cell, cells_for, select_cells, version_key
from puffer_core.matrix.smoke import REPORTED
from puffer_core.matrix.sources import PluginSource, copy_tree, core_tree_hash, discover
from puffer_core.matrix.store import CellRecord, MatrixError, ResultStore, atomic_write_text, now
from puffer_core.specs import PYTHON_VERSION_RE, requirement_problem

__all__ = ["RunOptions", "RunSummary", "cell_input_hash", "run_matrix", "summarize_log"]

#: Bump when what a cell does changes in a way that invalidates old results.
RUNNER_SCHEMA = 2  # 2: cells see an allowlisted environment
DEFAULT_TIMEOUT = 1800.0
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


@dataclass
class RunOptions:
    root: pathlib.Path = REPO_ROOT  # the core's source tree
    out: pathlib.Path | None = None  # default <root>/compat_matrix
    plugins_dir: pathlib.Path | None = None  # default <root>/plugins
    work: pathlib.Path | None = None  # venvs and wheels; default <out>/.venvs
    plugins: list[str] = field(default_factory=list)
    pythons: list[str] = field(default_factory=list)
    quick: bool = False
    force: bool = False
    jobs: int = 1
    timeout: float = DEFAULT_TIMEOUT
    common: bool = True
    keep_venvs: bool = False
    builtins: bool = True
    dry_run: bool = False  # list what would run, change nothing
    #: Variables (names or ``*``/``?`` globs) cells get besides the allowlist (see environment.py).
    pass_env: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root = pathlib.Path(self.root).resolve()
        self.out = pathlib.Path(self.out).resolve() if self.out else self.root / "compat_matrix"
        self.plugins_dir = pathlib.Path(self.plugins_dir).resolve() if self.plugins_dir else self.root / "plugins"
        self.work = pathlib.Path(self.work).resolve() if self.work else self.out / ".venvs"

    @property
    def full(self) -> bool:
        """A run over every cell of every plugin (what a cold-run rate is quoted for)."""
        return not (self.plugins or self.pythons or self.quick)


@dataclass
class RunSummary:
    ran: int = 0
    skipped: int = 0
    excluded: int = 0
    outcomes: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    common: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def cells_per_minute(self) -> float:
        return self.ran / (self.seconds / 60) if self.seconds > 0 and self.ran else 0.0


class CellTimeout(Exception):
    pass


class _Interrupted(Exception):
    pass


# -- subprocesses ------------------------------------------------------------------------


def find_uv() -> str:
    """uv: $PUFFER_UV, next to this Python, on PATH, or the ``uv`` Python package."""
    explicit = os.environ.get("PUFFER_UV")
    if explicit:
        return explicit
    beside = pathlib.Path(sys.executable).parent / "uv"
    if beside.exists():
        return str(beside)
    found = shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin  # type: ignore[import-not-found]

        return find_uv_bin()
    except Exception as exc:
        raise MatrixError("the matrix needs uv: pip install uv (or set PUFFER_UV to its path)") from exc


class Processes:
    """The child process groups in flight, so an interrupt can end exactly those.

    Each runs with the allowlisted environment of its stage (``install`` for uv's commands,
    ``smoke`` for the run inside the venv; see :mod:`puffer_core.matrix.environment`).
    """

    def __init__(self, pass_env: list[str] | tuple[str, ...] = ()) -> None:
        self._lock = threading.Lock()
        self._live: set[subprocess.Popen] = set()
        self.stopping = False
        self.environments = {stage: cell_environment(stage, pass_env) for stage in STAGES}

    def run(
        self,
        cmd: list[str],
        log: IO[str],
        deadline: float,
        cwd: pathlib.Path | None = None,
        stage: str = "install",
        capture_stdout: bool = False,
    ) -> tuple[int, str, str]:
        """Run ``cmd``, copying its output to ``log``; (returncode, stdout, stderr). Raises CellTimeout."""
        if self.stopping:
            raise _Interrupted()
        log.write(f"\n$ {' '.join(cmd)}\n")
        log.flush()
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CellTimeout()
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if capture_stdout else subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=self.environments[stage],
            text=True,
            errors="replace",
            start_new_session=True,  # its own process group: a timeout ends its children too
        )
        with self._lock:
            self._live.add(proc)
        try:
            out, err = proc.communicate(timeout=remaining)
        except subprocess.TimeoutExpired:
            self._kill(proc)
            out, err = proc.communicate()
            log.write(out or "")
            log.write(err or "")
            raise CellTimeout() from None
        finally:
            with self._lock:
                self._live.discard(proc)
        err = err or ""
        if capture_stdout:
            log.write(err)
            log.write(f"[stdout]\n{out}")
        else:
            log.write(out or "")
        log.write(f"[exit code {proc.returncode}]\n")
        log.flush()
        if self.stopping:
            raise _Interrupted()
        return proc.returncode, out or "", err if capture_stdout else (out or "")

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)

    def kill_all(self) -> None:
        self.stopping = True
        with self._lock:
            for proc in list(self._live):
                self._kill(proc)


# -- log summaries ------------------------------------------------------------------------

_NOISE = re.compile(r"^(\s*(hint|help|note):|\s*\[(stdout|stderr)\]|\s*\$ |\s*\[exit code)", re.IGNORECASE)
_ERRORISH = re.compile(
    r"(error|exception|failed|fatal|not found|no such|cannot|could not|unsatisfiable|traceback)", re.IGNORECASE
)
_BUILD_DETAIL = re.compile(r"(\berror\b|Error:|ERROR|fatal)", re.IGNORECASE)


def _clean(line: str) -> str:
    line = re.sub(r"\x1b\[[0-9;]*m", "", line)
    line = re.sub(r"^[\s│├╰─▶×|]+", "", line).strip()
    return re.sub(r"^(cause|caused by|error|warning):\s+(?=\S)", "", line, flags=re.IGNORECASE)


def summarize_log(text: str, limit: int = 240) -> str:
    """The most telling line of a failed step's output (uv's reason, a build error, the exception)."""
    lines = [_clean(line) for line in text.splitlines()]
    lines = [line for line in lines if line and not _NOISE.match(line)]
    if not lines:
        return "no output"
    pick = None
    for i, line in enumerate(lines):  # uv's resolver explains itself in 'Because … And because …' sentences
        if line.startswith("Because ") or "requirements are unsatisfiable" in line:
            sentence = [line]
            for more in lines[i + 1 : i + 6]:
                if sentence[-1].endswith("unsatisfiable.") or not more.lower().startswith(("and ", "because")):
                    break
                sentence.append(more)
            pick = " ".join(sentence)
            limit = max(limit, 420)
            break
    if pick is None:
        failed_build = next((line for line in lines if line.startswith("Failed to build")), None)
        if failed_build:
            detail = [
                line
                for line in lines
                if _BUILD_DETAIL.search(line)
                and not line.startswith(
                    ("Failed to build", "Call to", "The build backend", "error: subprocess-exited-with-error")
                )
            ]
            pick = failed_build + (f": {detail[-1]}" if detail else "")
    if pick is None:
        for line in reversed(lines):  # a traceback ends with the exception
            if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b", line):
                pick = line
                break
    if pick is None:
        pick = next((line for line in reversed(lines) if _ERRORISH.search(line)), lines[-1])
    pick = re.sub(r"\s+", " ", pick)
    return pick if len(pick) <= limit else pick[: limit - 1] + "…"


_NO_INTERPRETER = re.compile(
    r"(No interpreter found|Failed to inspect Python interpreter|No Python at|not found in|"
    r"Python interpreter not found|No download found|downloads are disabled)",
    re.IGNORECASE,
)


# -- hashing -----------------------------------------------------------------------------


def cell_input_hash(cell: Cell, plugin_hash: str, core_hash: str) -> str:
    data = {
        "runner": RUNNER_SCHEMA,
        "cell": cell.to_json(),
        "plugin_src": plugin_hash,
        "core_src": core_hash,
    }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


# -- wheels ------------------------------------------------------------------------------


class WheelError(Exception):
    def __init__(self, summary: str, log: pathlib.Path):
        super().__init__(summary)
        self.summary = summary
        self.log = log


class Wheels:
    """Wheels of the core and of the plugins, built once per source hash and kept."""

    def __init__(self, options: RunOptions, uv: str, procs: Processes):
        self.options, self.uv, self.procs = options, uv, procs
        self.dir = options.work / "wheels"
        self._lock = threading.Lock()
        self._built: dict[str, pathlib.Path | WheelError] = {}

    def get(self, name: str, src: pathlib.Path, tree_hash: str, core: bool = False) -> pathlib.Path:
        key = f"{name}-{tree_hash}"
        with self._lock:
            if key not in self._built:
                try:
                    self._built[key] = self._build(key, src, core)
                except WheelError as exc:
                    self._built[key] = exc
            found = self._built[key]
        if isinstance(found, WheelError):
            raise found
        return found

    def _build(self, key: str, src: pathlib.Path, core: bool) -> pathlib.Path:
        target = self.dir / key
        existing = sorted(target.glob("*.whl")) if target.is_dir() else []
        if existing:
            return existing[0]
        staging = self.dir / f".src-{key}"
        log_path = self.options.out / "logs" / f"_wheel-{key.rsplit('-', 1)[0]}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        copy_tree(src, staging, core=core)
        tmp_out = self.dir / f".out-{key}"
        shutil.rmtree(tmp_out, ignore_errors=True)
        with open(log_path, "w", encoding="utf-8") as log:
            log.write(f"# wheel of {src} (source hash {key.rsplit('-', 1)[1]}), {now()}\n")
            try:
                rc, out, _ = self.procs.run(
                    [self.uv, "build", "--wheel", "--quiet", "--out-dir", str(tmp_out), "--", str(staging)],
                    log,
                    time.monotonic() + 600,
                )
            except CellTimeout:
                raise WheelError(f"building the wheel of {src.name} took over 600 s", log_path) from None
        shutil.rmtree(staging, ignore_errors=True)
        wheels = sorted(tmp_out.glob("*.whl"))
        if rc != 0 or not wheels:
            raise WheelError(f"building the wheel of {src.name} failed: {summarize_log(out)}", log_path)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp_out, target)
        return target / wheels[0].name


# -- one cell ----------------------------------------------------------------------------


def _rel(path: pathlib.Path, options: RunOptions) -> str:
    try:
        return path.relative_to(options.root).as_posix()
    except ValueError:
        return str(path)


def _requirement_names(extras: Iterable[str]) -> list[str]:
    names = []
    for item in extras:
        try:
            names.append(Requirement(item).name)
        except InvalidRequirement:
            continue
    return names


@dataclass
class Job:
    """What to install and smoke-run in one venv (a matrix cell or the joint common cell)."""

    id: str
    python: str
    plugins: list[PluginSource]
    requirements: list[str]
    reported: list[str]  # packages whose resolved versions the record keeps


@dataclass
class JobResult:
    outcome: str
    seconds: float
    error: str | None = None
    resolved: dict[str, str] = field(default_factory=dict)
    envs: list[str] = field(default_factory=list)
    log: str | None = None


def _python_version(venv: pathlib.Path) -> str | None:
    try:
        for line in (venv / "pyvenv.cfg").read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() in {"version_info", "version"}:
                return value.strip()
    except OSError:
        return None
    return None


@dataclass
class _JobRun:
    """One job's venv, log and deadline; each stage returns False when the job has ended."""

    job: Job
    options: RunOptions
    uv: str
    procs: Processes
    log: IO[str]
    deadline: float
    result: JobResult

    @property
    def venv(self) -> pathlib.Path:
        return self.options.work / "venvs" / self.job.id

    @property
    def python(self) -> pathlib.Path:
        return self.venv / "bin" / "python"

    def run(self, cmd: list[str], **kwargs: Any) -> tuple[int, str, str]:
        return self.procs.run(cmd, self.log, self.deadline, **kwargs)

    def create_venv(self) -> bool:
        if not PYTHON_VERSION_RE.match(self.job.python):  # checked at plugin load; this is the command line
            self.result.error = f"refused to create a venv for Python {self.job.python!r}: not a version like 3.12"
            return False
        rc, out, _ = self.run([self.uv, "venv", "--clear", "--python", self.job.python, "--", str(self.venv)])
        if rc == 0:
            return True
        missing = _NO_INTERPRETER.search(out)
        self.result.outcome = "interpreter-missing" if missing else "install-failed"
        self.result.error = summarize_log(out)
        if missing:
            self.result.error = f"no Python {self.job.python} found by uv: {self.result.error}"
        return False

    def install(self, wheels: Wheels, core_hash: str) -> bool:
        """puffer-core, the plugins and the pins; records the resolved versions."""
        job, options = self.job, self.options
        refused = [f"{req!r} {problem}" for req in job.requirements if (problem := requirement_problem(req))]
        if refused:  # the joint cell's requirements come from results.json, a file anyone can edit
            self.result.error = f"refused to install {'; '.join(refused)}"
            self.log.write(f"\n{self.result.error}\n")
            return False
        try:
            targets = [str(wheels.get("puffer-core", options.root, core_hash, core=True))]
            for plugin in job.plugins:
                if plugin.path is not None:
                    targets.append(str(wheels.get(plugin.name, plugin.path, plugin.tree_hash())))
        except WheelError as exc:
            self.log.write(f"\n{exc.summary}\n(see {exc.log})\n")
            self.result.error = exc.summary
            return False
        rc, out, _ = self.run(
            [self.uv, "pip", "install", "--python", str(self.python), "--", *targets, *job.requirements]
        )
        if rc != 0:
            self.result.error = summarize_log(out)
            return False
        rc, out, _ = self.run(
            [self.uv, "pip", "list", "--format", "json", "--python", str(self.python)], capture_stdout=True
        )
        installed = {}
        if rc == 0:
            with contextlib.suppress(json.JSONDecodeError):
                installed = {canonicalize_name(p["name"]): p["version"] for p in json.loads(out)}
        wanted = dict.fromkeys(canonicalize_name(n) for n in job.reported)
        self.result.resolved = {name: installed[name] for name in wanted if name in installed}
        version = _python_version(self.venv)
        if version:
            self.result.resolved["python"] = version
        return True

    def smoke(self) -> None:
        """The smoke run, from inside the venv (cwd is the venv: never the source tree)."""
        result = self.result
        cmd = [str(self.python), "-X", "faulthandler", "-m", "puffer_core.matrix.smoke", "--json"]
        cmd += [f"--plugin={plugin.name}" for plugin in self.job.plugins]
        rc, out, err = self.run(cmd, cwd=self.venv, stage="smoke", capture_stdout=True)
        report = None
        with contextlib.suppress(json.JSONDecodeError, IndexError):
            report = json.loads(out.strip().splitlines()[-1])
        if report is None:
            result.outcome = "smoke-failed"
            why = f"killed by signal {-rc}" if rc < 0 else f"exit code {rc}"
            result.error = f"smoke run printed no report ({why}): {summarize_log(err)}"
            return
        result.envs = [env for plugin in report["plugins"] for env in plugin.get("envs", [])]
        if report["ok"]:
            result.outcome = "pass"
            return
        failed = next(plugin for plugin in report["plugins"] if not plugin["ok"])
        result.outcome = "import-failed" if failed.get("kind") == "import" else "smoke-failed"
        where = failed.get("failed_stage", "?")
        if failed.get("failed_env"):
            where += f" {failed['failed_env']}"
        result.error = f"{failed['plugin']}: {where}: {failed.get('error')}"
        if failed.get("where"):
            result.error += f" (at {failed['where']})"


def run_job(job: Job, options: RunOptions, uv: str, wheels: Wheels, core_hash: str, procs: Processes) -> JobResult:
    """Fresh venv, install, smoke run; the outcome, never raised (a timeout is an outcome too)."""
    start = time.monotonic()
    log_path = options.out / "logs" / f"{job.id}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    result = JobResult("install-failed", 0.0, log=_rel(log_path, options))
    stage = "install"
    with open(log_path, "w", encoding="utf-8") as log:
        log.write(f"# cell {job.id}: Python {job.python}, plugins {', '.join(p.name for p in job.plugins)}\n")
        log.write(f"# requirements: {' '.join(job.requirements) or '(none)'}\n# started {now()}\n")
        run = _JobRun(job, options, uv, procs, log, start + options.timeout, result)
        try:
            if run.create_venv() and run.install(wheels, core_hash):
                stage = "smoke"
                run.smoke()
        except CellTimeout:
            result.outcome = "timeout"
            result.error = f"timed out after {options.timeout:g} s during {stage}"
            log.write(f"\n{result.error}\n")
        finally:
            result.seconds = round(time.monotonic() - start, 2)
            log.write(f"\n# outcome: {result.outcome} in {result.seconds} s\n")
            if result.error:
                log.write(f"# error: {result.error}\n")
            if not options.keep_venvs:
                shutil.rmtree(run.venv, ignore_errors=True)
    return result


# -- the run -----------------------------------------------------------------------------


def _plugin_meta(source: PluginSource, options: RunOptions) -> dict[str, Any]:
    axes = source.axes
    meta: dict[str, Any] = {
        "source": "builtin" if source.builtin else _rel(source.path, options),
        "distribution": source.distribution,
        "error": source.error,
    }
    if axes is not None:
        meta.update(
            package=axes.package,
            versions=list(axes.versions),
            python=list(axes.python),
            pins={version: dict(pins) for version, pins in axes.pins.items()},
            axes={name: list(values) for name, values in axes.axes.items()},
            extras=list(axes.extras),
            known_bad=[{"when": dict(bad.when), "reason": bad.reason} for bad in axes.known_bad],
        )
    return meta


def _record(cell: Cell, input_hash: str, result: JobResult | None, excluded: bool = False) -> CellRecord:
    data = cell.to_json()
    record = CellRecord(
        id=cell.id,
        plugin=cell.plugin,
        python=cell.python,
        package=cell.package,
        version=cell.version,
        pins=data["pins"],
        companions=data["companions"],
        axes=data["axes"],
        extras=data["extras"],
        row=cell.row,
        outcome="excluded" if excluded else result.outcome,
        input_hash=input_hash,
        finished_at=now(),
    )
    if excluded:
        record.error = cell.excluded
    else:
        record.seconds = result.seconds
        record.resolved = result.resolved
        record.error = result.error
        record.log = result.log
        record.envs = result.envs
    return record


@functools.cache
def _interpreter_found(uv: str, python: str, pass_env: tuple[str, ...] = ()) -> bool:
    env = cell_environment("install", pass_env)
    try:
        proc = subprocess.run([uv, "python", "find", "--", python], capture_output=True, env=env, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def _split(values: Iterable[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


Reporter = Callable[[str, CellRecord | None, dict[str, Any]], None]


def run_matrix(options: RunOptions, report: Reporter | None = None) -> RunSummary:
    """Run (or skip) every selected cell, then the common set; results.json and views rewritten."""
    report = report or (lambda event, record, info: None)
    started = time.monotonic()
    started_at = now()
    summary = RunSummary()
    sources, selected = _selection(options)
    store = ResultStore(options.out / "results.json", read_only=options.dry_run)
    core_hash = core_tree_hash(options.root)
    uv = find_uv()
    procs = Processes(options.pass_env)
    summary.warnings += [
        f"--pass-env {pattern} matches no variable of this environment"
        for pattern in unmatched_pass_env(options.pass_env)
    ]
    wheels = Wheels(options, uv, procs)
    todo, current = _plan_cells(options, store, sources, selected, core_hash, uv, summary)
    report(
        "start",
        None,
        {
            "todo": len(todo),
            "skipped": summary.skipped,
            "excluded": summary.excluded,
            "jobs": options.jobs,
            "dry_run": options.dry_run,
        },
    )
    if options.dry_run:
        for cell, _, _ in todo:
            report("would-run", None, {"id": cell.id, "requirements": cell.requirements()})
        summary.seconds = round(time.monotonic() - started, 2)
        return summary
    store.save()
    try:
        _prebuild(todo, options, wheels, core_hash, report)
    except BaseException:
        procs.kill_all()  # an interrupt during a wheel build ends the build too
        raise
    _run_cells(todo, options, store, uv, wheels, core_hash, procs, report, summary)
    if options.common:
        summary.common = run_common(options, store, sources, current, uv, wheels, core_hash, procs, report)
    summary.seconds = round(time.monotonic() - started, 2)
    _record_run(store, options, summary, started_at)
    render.write_views(store.data, options.out)
    return summary


def _selection(options: RunOptions) -> tuple[dict[str, PluginSource], dict[str, PluginSource]]:
    """Every plugin with compat axes, and the ones this run selects; bad selections refused."""
    options.plugins = _split(options.plugins)
    options.pythons = _split(options.pythons)
    options.pass_env = check_pass_env(_split(options.pass_env))
    for py in options.pythons:
        if not PYTHON_VERSION_RE.match(py):
            raise MatrixError(f"--python {py!r} is not a Python 3 version: write versions like 3.12")
    sources = discover(options.plugins_dir, include_builtins=options.builtins)
    unknown = [name for name in options.plugins if name not in sources]
    if unknown:
        raise MatrixError(
            f"no plugin named {', '.join(map(repr, unknown))} declares compat axes; "
            f"known: {', '.join(sources) or 'none'} (plugins are read from {options.plugins_dir})"
        )
    selected = {name: src for name, src in sources.items() if not options.plugins or name in options.plugins}
    _check_pythons_declared(options.pythons, selected)
    return sources, selected


def _check_pythons_declared(pythons: list[str], selected: dict[str, PluginSource]) -> None:
    """Refuse a ``--python`` that no selected plugin lists: it would select no cell, silently."""
    declared = {py for src in selected.values() if src.axes is not None for py in src.axes.python}
    unknown = [py for py in pythons if py not in declared]
    if unknown and declared:
        raise MatrixError(
            f"--python {', '.join(unknown)}: no selected plugin lists it in its compat axes, so no cell "
            f"would run; they list {', '.join(sorted(declared, key=version_key))}"
        )


def _plan_cells(
    options: RunOptions,
    store: ResultStore,
    sources: dict[str, PluginSource],
    selected: dict[str, PluginSource],
    core_hash: str,
    uv: str,
    summary: RunSummary,
) -> tuple[list[tuple[Cell, str, PluginSource]], dict[str, set[str]]]:
    """The cells to run (with their input hashes) and every plugin's current cell ids; records
    excluded cells, counts unchanged ones, and prunes rows of cells and plugins that are gone."""
    todo: list[tuple[Cell, str, PluginSource]] = []
    current: dict[str, set[str]] = {}
    if options.builtins and not options.plugins:
        # A plugin folder that is gone takes its rows with it (a filtered run cannot tell).
        for gone in sorted(set(store.data["plugins"]) - set(sources)):
            store.data["plugins"].pop(gone, None)
            store.prune(gone, set())
    for name, source in sources.items():
        store.data["plugins"][name] = _plugin_meta(source, options)
        if source.axes is None:
            if name in selected:
                summary.warnings.append(f"plugin {name} could not be loaded, so it has no cells: {source.error}")
            continue
        all_cells = cells_for(name, source.axes)
        current[name] = {c.id for c in all_cells}
        store.prune(name, current[name])
        if name not in selected:
            continue
        plugin_hash = source.tree_hash()
        for cell in select_cells(all_cells, options.pythons, options.quick):
            input_hash = cell_input_hash(cell, plugin_hash, core_hash)
            if _needs_run(cell, input_hash, store, options, uv, summary):
                todo.append((cell, input_hash, source))
    return todo, current


def _needs_run(
    cell: Cell, input_hash: str, store: ResultStore, options: RunOptions, uv: str, summary: RunSummary
) -> bool:
    """Whether ``cell`` must run; an excluded cell is recorded, an unchanged one counted."""
    old = store.get(cell.id)
    if cell.excluded is not None:
        summary.excluded += 1
        summary.outcomes["excluded"] += 1
        if old is None or old.input_hash != input_hash or old.outcome != "excluded" or options.force:
            store.put(_record(cell, input_hash, None, excluded=True))
        return False
    unchanged = old is not None and old.input_hash == input_hash and old.outcome != "excluded"
    if (
        unchanged
        and old.outcome == "interpreter-missing"
        and _interpreter_found(uv, cell.python, tuple(options.pass_env))
    ):
        unchanged = False  # the interpreter has appeared since: worth a real try
    if unchanged and not options.force:
        summary.skipped += 1
        summary.outcomes[old.outcome] += 1
        return False
    return True


def _run_cells(
    todo: list[tuple[Cell, str, PluginSource]],
    options: RunOptions,
    store: ResultStore,
    uv: str,
    wheels: Wheels,
    core_hash: str,
    procs: Processes,
    report: Reporter,
    summary: RunSummary,
) -> None:
    """Run the cells ``options.jobs`` at a time, each recorded as it ends; an interrupt kills the rest."""

    def work(item: tuple[Cell, str, PluginSource]) -> CellRecord:
        cell, input_hash, source = item
        job = Job(
            id=cell.id,
            python=cell.python,
            plugins=[source],
            requirements=cell.requirements(),
            reported=[
                *cell.pins,
                *_requirement_names(cell.extras),
                *REPORTED,
                *([source.distribution] if source.distribution else []),
            ],
        )
        report("cell-start", None, {"id": cell.id})
        result = run_job(job, options, uv, wheels, core_hash, procs)
        record = _record(cell, input_hash, result)
        store.put(record)
        return record

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, options.jobs))
    try:
        futures = [pool.submit(work, item) for item in todo]
        for future in concurrent.futures.as_completed(futures):
            try:
                record = future.result()
            except _Interrupted:
                continue
            summary.ran += 1
            summary.outcomes[record.outcome] += 1
            report("cell", record, {})
    except BaseException:
        procs.kill_all()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _record_run(store: ResultStore, options: RunOptions, summary: RunSummary, started_at: str) -> None:
    """The run's statistics as results.json's ``runs.last`` (and ``runs.cold`` for a full cold run)."""
    stats = {
        "started_at": started_at,
        "finished_at": now(),
        "seconds": summary.seconds,
        "ran": summary.ran,
        "skipped": summary.skipped,
        "excluded": summary.excluded,
        "jobs": options.jobs,
        "outcomes": dict(summary.outcomes),
        "cells_per_minute": round(summary.cells_per_minute, 2),
        "selection": {
            "plugins": options.plugins,
            "python": options.pythons,
            "quick": options.quick,
            "force": options.force,
        },
        "full": options.full,
    }
    runs = dict(store.data.get("runs") or {})
    runs["last"] = stats
    if options.full and summary.ran and summary.skipped == 0:
        runs["cold"] = stats
    store.update(runs=runs)


def _prebuild(
    todo: list[tuple[Cell, str, PluginSource]], options: RunOptions, wheels: Wheels, core_hash: str, report: Reporter
) -> None:
    """Build the wheels the cells need before any cell starts, so build time is not cell time.

    A failed build is not raised here: each cell that needs the wheel records it as its
    install failure.
    """
    if not todo:
        return
    needed: dict[str, PluginSource] = {src.name: src for _, _, src in todo if src.path is not None}
    report("building", None, {"wheels": ["puffer-core", *needed]})
    with contextlib.suppress(WheelError):
        wheels.get("puffer-core", options.root, core_hash, core=True)
    for source in needed.values():
        with contextlib.suppress(WheelError):
            wheels.get(source.name, source.path, source.tree_hash())


# -- the common set ----------------------------------------------------------------------


@dataclass
class _JointCells:
    """Runs the joint cell (every member plugin installed together) of one common-set plan."""

    options: RunOptions
    store: ResultStore
    sources: dict[str, PluginSource]  # the plugins with axes
    python: str
    uv: str
    wheels: Wheels
    core_hash: str
    procs: Processes
    report: Reporter

    def input_hash(self, members: list[common_mod.Choice]) -> str:
        data = {
            "runner": RUNNER_SCHEMA,
            "python": self.python,
            "core_src": self.core_hash,
            "members": [(m.plugin, m.cell, self.store.get(m.cell).input_hash, m.pins) for m in members],
        }
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def job(self, members: list[common_mod.Choice]) -> Job:
        reqs: dict[str, str] = {}
        for member in members:
            for name, version in member.pins.items():
                reqs.setdefault(canonicalize_name(name), f"{name}=={version}")
            for extra in member.extras:
                reqs.setdefault(extra, extra)
        reported = [n for m in members for n in m.pins] + list(REPORTED)
        reported += [self.sources[m.plugin].distribution for m in members if self.sources[m.plugin].distribution]
        reported += [n for m in members for n in _requirement_names(m.extras)]
        return Job(
            id=f"common-py{self.python}",
            python=self.python,
            plugins=[self.sources[m.plugin] for m in members],
            requirements=list(reqs.values()),
            reported=reported,
        )

    def run(self, members: list[common_mod.Choice]) -> dict[str, Any]:
        self.report("common-start", None, {"members": [m.plugin for m in members]})
        result = run_job(self.job(members), self.options, self.uv, self.wheels, self.core_hash, self.procs)
        joint = {
            "id": f"common-py{self.python}",
            "python": self.python,
            "members": [m.plugin for m in members],
            "outcome": result.outcome,
            "seconds": result.seconds,
            "resolved": result.resolved,
            "error": result.error,
            "log": result.log,
            "input_hash": self.input_hash(members),
            "finished_at": now(),
        }
        self.report("common", None, joint)
        return joint

    def largest_passing(
        self, members: list[common_mod.Choice], dropped: dict[str, str]
    ) -> tuple[list[common_mod.Choice], dict[str, Any] | None]:
        """The members whose joint cell passes, and that cell; those left out go to ``dropped``."""
        joint = self.run(members)
        if joint["outcome"] == "pass":
            return members, joint
        if len(members) == 1:
            dropped[members[0].plugin] = f"the joint cell fails ({joint['outcome']}): {joint['error']}"
            return [], joint
        # Find who breaks it: add the plugins one at a time, keep those that still pass.
        kept: list[common_mod.Choice] = []
        last_pass = None
        for member in members:
            trial = self.run([*kept, member])
            if trial["outcome"] == "pass":
                kept.append(member)
                last_pass = trial
            else:
                dropped[member.plugin] = f"the joint cell with it fails ({trial['outcome']}): {trial['error']}"
        return kept, last_pass or joint


def run_common(
    options: RunOptions,
    store: ResultStore,
    sources: dict[str, PluginSource],
    current: dict[str, set[str]],
    uv: str,
    wheels: Wheels,
    core_hash: str,
    procs: Processes,
    report: Reporter,
) -> dict[str, Any]:
    """Choose the common set from the records, prove it in a joint cell, write constraints-common.txt."""
    python = DEFAULT_PYTHON
    with_axes = {name: src for name, src in sources.items() if src.axes is not None}
    plan = common_mod.choose_common(
        store.records(),
        with_axes,
        builtins=[n for n, s in with_axes.items() if s.builtin],
        python=python,
        current=current,
    )
    previous = store.data.get("common") or {}
    dropped = dict(plan.dropped)
    cells = _JointCells(options, store, with_axes, python, uv, wheels, core_hash, procs, report)
    plan_hash = cells.input_hash(plan.members) if plan.members else "empty"
    if previous.get("plan_hash") == plan_hash and not options.force and "members" in previous:
        atomic_write_text(options.out / "constraints-common.txt", common_mod.constraints_text(previous))
        return previous  # same members, same cells, same core: the joint cell's verdict stands
    members, joint = cells.largest_passing(list(plan.members), dropped) if plan.members else ([], None)
    section = {
        "python": python,
        "plan_hash": plan_hash,
        "members": [
            {
                **m.to_json(),
                "distribution": with_axes[m.plugin].distribution,
                "package": with_axes[m.plugin].axes.package,
            }
            for m in members
        ],
        "dropped": dict(sorted(dropped.items())),
        "joint": joint,
    }
    store.update(common=section)
    atomic_write_text(options.out / "constraints-common.txt", common_mod.constraints_text(section))
    return section
