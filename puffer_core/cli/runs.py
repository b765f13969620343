"""``puffer runs`` and ``puffer train --detach``: runs that outlive their shell and their box.

    puffer train ENV --out DIR --detach [--no-auto-resume]   start in the background, return at once
    puffer runs [--json]                                     this user's runs on this box
    puffer runs stop DIR [--wait S]                          stop one cleanly (a loadable checkpoint)
    puffer runs resume DIR | --interrupted [--auto]          resume from the last checkpoint, detached
    puffer runs rm DIR... [--files]                          forget runs (and, with --files, delete their folders)
    puffer runs prune [--finished | --failed] [--files]      forget every ended run (or those finished, or failed)

A detached run is its own session (an ssh connection closing does not end it), writes to
``DIR/train.log``, and resumes by itself after its box or container comes back: the
PufferTank entrypoint of a login container runs ``puffer runs resume --interrupted --auto``
(boxes without the tank run it at boot). ``--auto`` resumes only the runs that asked for it,
at most once per boot each, and gives up on one interrupted again within a minute of its
resume :data:`~puffer_core.train.runs.MAX_QUICK_FAILURES` times in a row. Two processes never
train one folder: the run's lock refuses the second. The records: :mod:`puffer_core.train.runs`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich.table import Table

from puffer_core.atomic import open_own_log, private_directory
from puffer_core.cli.tables import output_console, print_table
from puffer_core.errors import APIUsageError, PufferError
from puffer_core.train import runs
from puffer_core.train.progress import clock

__all__ = ["detach", "given_options", "note_failure", "ray_head", "runs_cmd"]

console = output_console(stderr=True, highlight=False)
#: Options of `puffer train` a resumed run does not take again (the run's folder and what --detach is).
NOT_RESUMED = {"env_id", "out", "resume", "detach", "no_auto_resume", "as_json", "config_path"}
LOG = "train.log"


def given_options(ctx: click.Context, skip: set[str]) -> list[str]:
    """The options given on ``ctx``'s command line (not defaults), as words a new process takes again."""
    words: list[str] = []
    for param in ctx.command.params:
        if param.name in skip or not isinstance(param, click.Option):
            continue
        if ctx.get_parameter_source(param.name) not in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT):
            continue
        value = ctx.params.get(param.name)
        if param.is_flag:
            names = param.opts if value else param.secondary_opts
            words += names[:1]
        elif param.multiple:
            for item in value or ():
                words += [param.opts[0], str(item)]
        elif value is not None:
            words += [param.opts[0], str(value)]
    return words


def _spawn(argv: list[str], out: Path) -> subprocess.Popen:
    """``argv`` in a session of its own, output to ``out/train.log`` (appended), no terminal.

    The folder must be the caller's alone and the log a regular file of theirs: a run folder copied
    from someone else, whose ``train.log`` is a link to a file of the caller's (``~/.bashrc``), would
    otherwise have the run's output appended there."""
    private_directory(out, create=False)
    try:
        fd = open_own_log(out / LOG)
    except OSError as exc:
        raise APIUsageError(f"{out / LOG} is {exc.strerror}: the run's log must be a file of yours; move it "
                            "away (a new one is made) and try again") from None  # fmt: skip
    with os.fdopen(fd, "ab") as log:
        log.write(f"\n== {time.strftime('%Y-%m-%dT%H:%M:%S%z')} {' '.join(argv[3:])}\n".encode())
        log.flush()
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True)  # fmt: skip


def _launched(out: Path, process: subprocess.Popen, fields: dict[str, Any], resumed: dict | None = None) -> None:
    """The record of a run just started in the background: running, by ``process``, here."""

    def change(data: dict[str, Any]) -> None:
        data.update(fields)
        data.update(state="running", pid=process.pid, pid_start=runs.process_start(process.pid),
                    boot=runs.boot_key(), place=runs.place(), log=str(out / LOG), error=None, ended=None,
                    heartbeat=time.time(), stop_requested=False, not_resumed=None)  # fmt: skip
        data.setdefault("started", time.time())
        if resumed is not None:
            data["resumes"] = [*data.get("resumes", []), resumed][-runs.KEPT_RESUMES :]

    runs.update(out, change)


def detach(out: Path, train_args: list[str], resume_args: list[str], auto_resume: bool, as_json: bool) -> None:
    """``puffer train`` in the background: its folder and pid printed, the record written, at once."""
    out = private_directory(out).resolve()
    argv = [sys.executable, "-m", "puffer_core.cli.main", "train", *train_args]
    process = _spawn(argv, out)
    fields = {"detached": True, "auto_resume": auto_resume, "resume_args": resume_args}
    _launched(out, process, fields)
    _print_started(out, process.pid, as_json, "started")


def note_failure(out: Path | None, exc: BaseException) -> None:
    """Write ``exc`` into run ``out``'s record when this process is the one the record names (a run
    started in the background, failing before it trains): ``puffer runs`` then says why."""
    if out is None:
        return
    with contextlib.suppress(OSError, PufferError):
        data = runs.read(out)
        if data is not None and data.get("pid") == os.getpid():
            error = " ".join(str(getattr(exc, "message", None) or exc).split())[:500]
            runs.update(out, lambda d: d.update(state="failed", error=error, ended=time.time()))


def _print_started(out: Path, pid: int, as_json: bool, verb: str) -> None:
    if as_json:
        click.echo(json.dumps({"out": str(out), "pid": pid, "log": str(out / LOG)}))
        return
    console.print(f"{verb} {out} in the background: pid {pid}, log {out / LOG}; `puffer runs` lists it, "
                  f"`puffer runs stop {out}` stops it", soft_wrap=True)  # fmt: skip


# -- puffer runs ---------------------------------------------------------------------------------


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _row(record: runs.RunRecord, now: float) -> dict[str, Any]:
    data = record.data
    checkpoint = data.get("checkpoint_time")
    state = record.state if record.alive is not None or record.state != "running" else "running elsewhere"
    return {
        "out": record.out,
        "env": data.get("env"),
        "state": state,
        "place": data.get("place"),
        "pid": data.get("pid") if record.state == "running" else None,
        "step": data.get("step"),
        "steps": data.get("steps_total"),
        "steps_per_second": data.get("sps"),
        "eta_seconds": _eta(data) if state == "running" else None,
        "checkpoint_age_seconds": None if checkpoint is None else round(now - float(checkpoint), 1),
        "detached": bool(data.get("detached")),
        "auto_resume": bool(data.get("auto_resume")),
        "error": data.get("error"),
        "not_resumed": data.get("not_resumed") if state == "interrupted" else None,
        "resume": None if state in ("running", "running elsewhere", "finished") else f"puffer runs resume {record.out}",
    }


def _eta(data: dict[str, Any]) -> float | None:
    """Seconds left at the record's steps/s (None: not known yet)."""
    step, total, sps = data.get("step") or 0, data.get("steps_total"), data.get("sps")
    if not total or not sps or sps <= 0:
        return None
    return round(max(0, total - step) / sps, 1)


@click.group("runs", invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--json", "as_json", is_flag=True, help="Print the runs as JSON.")
@click.pass_context
def runs_cmd(ctx: click.Context, as_json: bool) -> None:
    """Your runs on this box: folder, env, state, steps, steps/s, the last checkpoint's age, how to resume.

    States: running, finished, stopped (by you), interrupted (its process vanished without
    finishing, or was stopped by a signal nobody asked for), failed (with its error), gave-up
    (interrupted again within a minute of its automatic resume too many times in a row).
    Records live in $XDG_STATE_HOME/puffer/runs (~/.local/state/puffer/runs).
    """
    if ctx.invoked_subcommand is not None:
        return
    now = time.time()
    rows = [_row(record, now) for record in runs.read_all()]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        console.print("no runs yet: `puffer train ENV --out DIR --detach` starts one in the background")
        return
    table = Table(title="your runs on this box")
    for column in ("folder", "env", "state", "steps", "steps/s", "eta", "checkpoint", "resume"):
        table.add_column(column, overflow="fold")
    for row in rows:
        steps = f"{row['step'] or 0:,} of {row['steps']:,}" if row["steps"] else f"{row['step'] or 0:,}"
        sps = "–" if row["steps_per_second"] is None else f"{row['steps_per_second']:,.0f}"
        state = row["state"] + (f": {row['error']}" if row["error"] and row["state"] in ("failed", "gave-up") else "")
        state += f" (not resumed by itself: {row['not_resumed']})" if row["not_resumed"] else ""
        age = "–" if row["checkpoint_age_seconds"] is None else f"{_age(row['checkpoint_age_seconds'])} ago"
        eta = clock(row["eta_seconds"])
        table.add_row(row["out"], row["env"] or "?", state, steps, sps, eta, age, row["resume"] or "")
    print_table(output_console(), table)


def _record_of(run: Path, moved_here: bool = False) -> runs.RunRecord:
    """Run ``run``'s record; with ``moved_here``, a run folder this box has no record of (copied
    from another box) gets a blank one."""
    for record in runs.read_all():
        if Path(record.out) == run.resolve():
            return record
    if moved_here and (run / "policy.pt").is_file():
        out = str(run.resolve())
        return runs.RunRecord(runs.record_path(out), {"out": out, "auto_resume": True}, "interrupted", False)
    raise APIUsageError(f"{run} is not one of your runs on this box (puffer runs lists them)")


@runs_cmd.command("stop")
@click.argument("run", metavar="DIR", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--wait", "wait", default=120.0, show_default=True, type=click.FloatRange(0, 3600),
              help="Seconds to wait for the run to save its checkpoint and end (0: do not wait).")  # fmt: skip
def stop_cmd(run: Path, wait: float) -> None:
    """Stop run DIR as Ctrl-C would: it saves a loadable checkpoint, then ends as stopped (not resumed by itself)."""
    record = _record_of(run)
    if record.state != "running" or record.alive is None:
        where = f" (it runs in {record.data.get('place')}; stop it there)" if record.alive is None else ""
        raise APIUsageError(f"{record.out} is {record.state}, not running here{where}")
    runs.update(record.out, lambda data: data.update(stop_requested=True))
    os.kill(int(record.data["pid"]), signal.SIGTERM)
    deadline = time.monotonic() + wait
    while wait and time.monotonic() < deadline:
        data = runs.read(record.out) or {}
        if data.get("state") != "running" or runs.process_alive(data) is False:
            console.print(f"stopped {record.out} at step {data.get('step') or 0:,}; resume it with "
                          f"puffer runs resume {record.out}", soft_wrap=True)  # fmt: skip
            return
        time.sleep(0.2)
    console.print(f"asked {record.out} (pid {record.data['pid']}) to stop; it saves its checkpoint first")


def _quick(data: dict[str, Any]) -> bool:
    """Whether the run ended within a minute of its last resume (no sign of life after that)."""
    resumes = data.get("resumes") or []
    if not resumes:
        return False
    return float(data.get("heartbeat") or 0) < float(resumes[-1].get("time", 0)) + runs.AUTO_RESUME_QUICK_SECONDS


def ray_head(args: list[str]) -> str | None:
    """The Ray head a run's options connect to (``--ray-address ADDR``, ``--set ray_address=ADDR``), or None."""
    for option, value in zip(args, [*args[1:], ""]):
        if option == "--ray-address":
            return value
        if option.startswith("--ray-address="):
            return option.partition("=")[2]
        if option == "--set" and value.replace(" ", "").startswith("ray_address="):
            return value.partition("=")[2].strip()
    return None


def _auto_decision(record: runs.RunRecord, boot: str) -> str | None:
    """Why ``--auto`` leaves ``record`` alone (None: resume it); gives up on a crash loop, saying so."""
    data = record.data
    if not (data.get("detached") and data.get("auto_resume")):
        return "it did not ask to resume by itself (--detach without --no-auto-resume does)"
    head = ray_head(list(data.get("resume_args") or []))
    if head is not None:
        # After a crash every tank restarts at once on the shared host network: whatever listens on the head's
        # port first (another user's tank) would get the run's connection, and answer it with pickles.
        why = (f"it connects to the Ray head {head}, which after a crash any tank of this box could be the first "
               f"to listen as; start your head, then resume it by hand: puffer runs resume {record.out}")  # fmt: skip
        runs.update(record.out, lambda d: d.update(not_resumed=why))
        return why
    if any(resumed.get("boot") == boot for resumed in data.get("resumes") or []):
        return "it was resumed once in this boot already"
    failures = int(data.get("quick_failures") or 0) + 1 if _quick(data) else 0
    if failures >= runs.MAX_QUICK_FAILURES:
        why = (f"interrupted again within a minute of its resume {failures} times in a row"
               f"{': ' + str(data['error']) if data.get('error') else ''}; resume it by hand once fixed")  # fmt: skip
        runs.update(record.out, lambda d: d.update(state="gave-up", error=why, quick_failures=failures))
        return f"gave up: {why}"
    runs.update(record.out, lambda d: d.update(quick_failures=failures))
    return None


def _resumable(record: runs.RunRecord, auto: bool) -> bool:
    if record.alive is None:
        return False  # elsewhere: that place resumes its own
    if record.state == "interrupted":
        return True
    # A resume that failed at once (a bad checkpoint, a GPU not back yet) counts toward the crash loop.
    return auto and record.state == "failed" and _quick(record.data)


def _resume(record: runs.RunRecord, auto: bool) -> None:
    out = Path(record.out)
    args = list(record.data.get("resume_args") or [])
    argv = [sys.executable, "-m", "puffer_core.cli.main", "train", "--resume", str(out), *args]
    process = _spawn(argv, out)
    resumed = {"boot": runs.boot_key(), "time": time.time(), "auto": auto}
    fields = {"detached": True, "auto_resume": bool(record.data.get("auto_resume"))}
    if not auto:
        fields["quick_failures"] = 0
    _launched(out, process, fields, resumed)
    _print_started(out, process.pid, False, "resumed")


@runs_cmd.command("resume")
@click.argument("run", metavar="[DIR]", required=False, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--interrupted", is_flag=True, help="Every interrupted run of yours here.")
@click.option("--auto", is_flag=True, help="With --interrupted: only those that asked to resume by themselves, at "
              "most once per boot each, giving up on a crash loop (what the PufferTank entrypoint runs).")  # fmt: skip
def resume_cmd(run: Path | None, interrupted: bool, auto: bool) -> None:
    """Resume run DIR (or --interrupted: each interrupted one) from its last checkpoint, in the background."""
    if (run is None) == (not interrupted):
        raise click.UsageError("give a run's DIR or --interrupted")
    if auto and not interrupted:
        raise click.UsageError("--auto goes with --interrupted")
    if run is not None:
        record = _record_of(run, moved_here=True)
        if record.state in ("running", "finished"):
            where = " elsewhere" if record.alive is None and record.state == "running" else ""
            raise APIUsageError(f"{record.out} is {record.state}{where}: nothing to resume")
        _resume(record, auto=False)
        return
    boot, resumed = runs.boot_key(), 0
    for record in runs.read_all():
        if not _resumable(record, auto):
            continue
        why = _auto_decision(record, boot) if auto else None
        if why is not None:
            console.print(f"{record.out}: not resumed: {why}", soft_wrap=True)
            continue
        _resume(record, auto)
        resumed += 1
    if not resumed:
        console.print("no interrupted run to resume here")


# -- forgetting runs ------------------------------------------------------------------------------

#: What a run's folder holds (one of them): a folder holding none is not deleted as a run's.
RUN_FILES = ("policy.pt", "curve.csv", LOG, ".puffer-train.lock")
ENDED = ("finished", "stopped", "failed", "gave-up")


def _forget(record: runs.RunRecord, files: bool) -> str:
    """Forget ``record`` (refused while it runs); with ``files``, delete its folder too. The line said."""
    if record.state == "running":
        where = f" in {record.data.get('place')}" if record.alive is None else f" (pid {record.data.get('pid')})"
        raise APIUsageError(f"{record.out} is running{where}: puffer runs stop {record.out} first")
    folder = Path(record.out)
    if files and folder.is_dir():
        private_directory(folder, create=False)  # the caller's alone: another's is never deleted
        if not any((folder / name).exists() for name in RUN_FILES):
            raise APIUsageError(f"{folder} holds no run's files ({', '.join(RUN_FILES)}): not deleted")
        shutil.rmtree(folder)
    runs.forget(record.out)
    return f"forgot {record.out} ({record.state}){' and deleted its folder' if files and not folder.exists() else ''}"


@runs_cmd.command("rm")
@click.argument("dirs", metavar="DIR...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--files", is_flag=True, help="Delete each run's folder too (its checkpoints, curves and logs).")
def rm_cmd(dirs: tuple[Path, ...], files: bool) -> None:
    """Forget runs DIR... (puffer runs no longer lists them); their folders stay unless --files. A running run is
    refused: stop it first."""
    found = {record.out: record for record in runs.read_all(problems=[])}
    chosen = []
    for run in dirs:
        record = found.get(str(run.resolve()))
        if record is None:
            if runs.forget(run.resolve()):  # a record whose folder is gone: puffer runs lists no such run
                console.print(f"forgot {run.resolve()} (its folder is gone)", highlight=False, soft_wrap=True)
                continue
            raise APIUsageError(f"{run} is not one of your runs on this box (puffer runs lists them)")
        chosen.append(record)
    for record in chosen:
        console.print(_forget(record, files), highlight=False, markup=False, soft_wrap=True)


@runs_cmd.command("prune")
@click.option("--finished", "which", flag_value="finished", help="Only the finished runs.")
@click.option("--failed", "which", flag_value="failed", help="Only the failed runs (gave-up included).")
@click.option("--files", is_flag=True, help="Delete each run's folder too (its checkpoints, curves and logs).")
def prune_cmd(which: str | None, files: bool) -> None:
    """Forget every ended run (finished, stopped, failed, gave up), or with --finished or --failed only those; the
    records of folders that are gone too. Running and interrupted runs stay; folders stay unless --files."""
    states = {"finished": ("finished",), "failed": ("failed", "gave-up")}.get(which or "", ENDED)
    forgotten = 0
    for record in runs.read_all(problems=[]):
        if record.state in states:
            console.print(_forget(record, files), highlight=False, markup=False, soft_wrap=True)
            forgotten += 1
    forgotten += _forget_folderless()
    if not forgotten:
        console.print("nothing to forget" + (f" ({' or '.join(states)})" if which else ""))


def _forget_folderless() -> int:
    """Records whose run folder is gone (puffer runs never shows them): forgotten, counted."""
    forgotten = 0
    directory = runs.registry_dir()
    if not directory.is_dir():
        return 0
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        records = runs.scan(directory, fd)
    finally:
        os.close(fd)
    for _, data in records:
        if not Path(data["out"]).is_dir() and runs.forget(data["out"]):
            console.print(f"forgot {data['out']} (its folder is gone)", highlight=False, soft_wrap=True)
            forgotten += 1
    return forgotten
