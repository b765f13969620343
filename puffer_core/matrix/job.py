"""One job: a fresh uv venv, puffer-core and the plugins installed with the pins, then the smoke run.

A job is a matrix cell or the joint cell of the common set. Its outcome is never raised:
``interpreter-missing`` (uv never downloads an interpreter, ``UV_PYTHON_DOWNLOADS=never``),
``install-failed``, ``import-failed`` / ``smoke-failed`` (from the smoke run's report),
``timeout`` (past ``--timeout`` seconds, all stages together) or ``pass``. Everything the
job's commands print goes to ``<out>/logs/<job-id>.log``.

The smoke run is ``python -m puffer_core.testing.smoke`` (:data:`~puffer_core.matrix.trees.CELL_MODULE`)
inside the venv: named here, never imported, so the matrix needs none of what it runs.
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import re
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from puffer_core.matrix.logs import summarize_log
from puffer_core.matrix.options import RunOptions
from puffer_core.matrix.processes import CellTimeout, Processes
from puffer_core.matrix.sources import PluginSource
from puffer_core.matrix.store import now
from puffer_core.matrix.trees import CELL_MODULE
from puffer_core.matrix.wheels import WheelError, Wheels
from puffer_core.specs.declarations import PYTHON_VERSION_RE, requirement_problem

__all__ = [
    "REPORTED",
    "Job",
    "JobResult",
    "LoggedJob",
    "logged_job",
    "read_smoke_report",
    "rebuilt_requirement",
    "requirement_names",
    "run_job",
]

#: Packages whose installed versions every record keeps, when present.
REPORTED = ("puffer-core", "gymnasium", "numpy", "pettingzoo", "shimmy", "gym")

_NO_INTERPRETER = re.compile(
    r"(No interpreter found|Failed to inspect Python interpreter|No Python at|not found in|"
    r"Python interpreter not found|No download found|downloads are disabled)",
    re.IGNORECASE,
)
_IMPORT_ERROR = re.compile(r"^(ModuleNotFoundError|ImportError)\b")


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


def requirement_names(requirements: Iterable[str]) -> list[str]:
    """The package names of PEP 508 requirements (what a record reports the versions of)."""
    names = []
    for item in requirements:
        try:
            names.append(Requirement(item).name)
        except InvalidRequirement:
            continue
    return names


def rebuilt_requirement(text: str) -> str:
    """A requirement ``requirement_problem`` accepts, rebuilt from its parsed parts: canonical name,
    extras, specifier, marker. uv gets this, never the original text (nothing of it can read as a path)."""
    requirement = Requirement(text)
    extras = ",".join(sorted(canonicalize_name(extra) for extra in requirement.extras))
    rebuilt = canonicalize_name(requirement.name) + (f"[{extras}]" if extras else "") + str(requirement.specifier)
    return rebuilt + (f"; {requirement.marker}" if requirement.marker else "")


def _python_version(venv: pathlib.Path) -> str | None:
    try:
        for line in (venv / "pyvenv.cfg").read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() in {"version_info", "version"}:
                return value.strip()
    except OSError:
        return None
    return None


def read_smoke_report(returncode: int, stdout: str, stderr: str, result: JobResult) -> None:
    """The smoke run's outcome, error and envs into ``result``, from its JSON report (its last line).

    Without a report the run died before writing one: ``import-failed`` when what it printed
    ends in an ImportError (puffer_core or a dependency of it does not import), else
    ``smoke-failed``; the error names the exit code or signal.
    """
    report = None
    with contextlib.suppress(json.JSONDecodeError, IndexError):
        report = json.loads(stdout.strip().splitlines()[-1])
    if report is None:
        summary = summarize_log(stderr)
        result.outcome = "import-failed" if _IMPORT_ERROR.match(summary) else "smoke-failed"
        why = f"killed by signal {-returncode}" if returncode < 0 else f"exit code {returncode}"
        result.error = f"smoke run printed no report ({why}): {summary}"
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
        requirements = [rebuilt_requirement(req) for req in job.requirements]
        try:
            targets = [str(wheels.get("puffer-core", options.root, core_hash, core=True))]
            for plugin in job.plugins:
                if plugin.path is not None:
                    targets.append(str(wheels.get(plugin.name, plugin.path, plugin.tree_hash())))
        except WheelError as exc:
            self.log.write(f"\n{exc.summary}\n(see {exc.log})\n")
            self.result.error = exc.summary
            return False
        rc, out, _ = self.run([self.uv, "pip", "install", "--python", str(self.python), "--", *targets, *requirements])
        if rc != 0:
            self.result.error = summarize_log(out)
            return False
        self.result.resolved = self._resolved()
        return True

    def _resolved(self) -> dict[str, str]:
        """The installed versions of the packages the record keeps, and the venv's Python."""
        rc, out, _ = self.run(
            [self.uv, "pip", "list", "--format", "json", "--python", str(self.python)], capture_stdout=True
        )
        installed = {}
        if rc == 0:
            with contextlib.suppress(json.JSONDecodeError):
                installed = {canonicalize_name(p["name"]): p["version"] for p in json.loads(out)}
        wanted = dict.fromkeys(canonicalize_name(n) for n in self.job.reported)
        resolved = {name: installed[name] for name in wanted if name in installed}
        version = _python_version(self.venv)
        if version:
            resolved["python"] = version
        return resolved

    def smoke(self) -> None:
        """The smoke run, from inside the venv (cwd is the venv: never the source tree)."""
        cmd = [str(self.python), "-X", "faulthandler", "-m", CELL_MODULE, "--json"]
        cmd += [f"--plugin={plugin.name}" for plugin in self.job.plugins]
        cmd.append(f"--packages={','.join(dict.fromkeys(self.job.reported))}")
        rc, out, err = self.run(cmd, cwd=self.venv, stage="smoke", capture_stdout=True)
        read_smoke_report(rc, out, err, self.result)


@dataclass
class LoggedJob:
    """One job's open log, its result, when it started and where it is (for a timeout's message)."""

    log: IO[str]
    result: JobResult
    start: float
    where: str = ""


@contextlib.contextmanager
def logged_job(job: Job, options: RunOptions, outcome: str, header: Iterable[str]) -> Iterator[LoggedJob]:
    """``<out>/logs/<job-id>.log`` opened with ``header``, and the result (``outcome`` until the job says
    otherwise); a timeout inside becomes the outcome, and the outcome and seconds end the log."""
    start = time.monotonic()
    log_path = options.out / "logs" / f"{job.id}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    result = JobResult(outcome, 0.0, log=options.shown(log_path))
    with open(log_path, "w", encoding="utf-8") as log:
        log.writelines(f"# {line}\n" for line in header)
        log.write(f"# started {now()}\n")
        logged = LoggedJob(log, result, start)
        try:
            yield logged
        except CellTimeout:
            result.outcome = "timeout"
            result.error = f"timed out after {options.timeout:g} s {logged.where}".rstrip()
            log.write(f"\n{result.error}\n")
        finally:
            result.seconds = round(time.monotonic() - start, 2)
            log.write(f"\n# outcome: {result.outcome} in {result.seconds} s\n")
            if result.error:
                log.write(f"# error: {result.error}\n")


def run_job(job: Job, options: RunOptions, uv: str, wheels: Wheels, core_hash: str, procs: Processes) -> JobResult:
    """Fresh venv, install, smoke run; the outcome, never raised (a timeout is an outcome too)."""
    header = [
        f"cell {job.id}: Python {job.python}, plugins {', '.join(p.name for p in job.plugins)}",
        f"requirements: {' '.join(job.requirements) or '(none)'}",
    ]
    with logged_job(job, options, "install-failed", header) as logged:
        run = _JobRun(job, options, uv, procs, logged.log, logged.start + options.timeout, logged.result)
        try:
            logged.where = "during install"
            if run.create_venv() and run.install(wheels, core_hash):
                logged.where = "during smoke"
                run.smoke()
        finally:
            if not options.keep_venvs:
                shutil.rmtree(run.venv, ignore_errors=True)
    return logged.result
