"""Running a sweep's trials: in this process, or in worker processes that share the study; Ctrl-C and
SIGTERM stop them so that the study keeps every finished trial and none is left running."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, replace
from typing import Any

from puffer_core.errors import APIUsageError, PufferError
from puffer_core.train.sweep_plan import SweepPlan
from puffer_core.train.sweep_trials import Stopped, TrialReport, work

__all__ = ["ctrl_c_interrupts", "run_trials"]


def run_trials(plan: SweepPlan, on_trial: Callable[[TrialReport], None] | None) -> int:
    """Run the trials still missing, here or in ``plan.jobs`` workers; the signal that stopped them (0: none)."""
    try:
        with ctrl_c_interrupts():
            if plan.jobs == 1:
                work(plan, on_trial, worker=0)
            else:
                work_in_processes(plan, plan.jobs, on_trial)
    except Stopped as exc:
        return exc.signal_number
    except KeyboardInterrupt:  # between trials (a trial's own Ctrl-C is a Stopped)
        return signal.SIGINT
    return 0


@contextlib.contextmanager
def ctrl_c_interrupts() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt between trials even where the process started with SIGINT
    ignored (a shell's background job), as a trial's own training stops on it; main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _worker(plan: SweepPlan, index: int, reports: Any) -> None:
    """A worker process: runs trials until the study has enough, sending each report back."""
    try:
        work(plan.resolved(), lambda report: reports.put(("trial", asdict(report))), worker=index)
    except Stopped as stopped:
        reports.put(("stopped", stopped.signal_number))
    except BaseException as exc:
        reports.put(("error", f"{type(exc).__name__}: {exc}" if not isinstance(exc, PufferError) else str(exc)))


def work_in_processes(plan: SweepPlan, jobs: int, on_trial: Callable[[TrialReport], None] | None) -> None:
    """``jobs`` worker processes (spawned: this process may run threads) share the study."""
    import multiprocessing
    import queue

    context = multiprocessing.get_context("spawn")
    reports = context.Queue()
    shipped = replace(plan, spec=None)  # each worker looks the env up once itself
    workers = [context.Process(target=_worker, args=(shipped, index, reports)) for index in range(1, jobs + 1)]
    stopped, error = 0, None
    try:
        for worker in workers:
            worker.start()
        while any(worker.is_alive() for worker in workers) or not reports.empty():
            try:
                kind, payload = reports.get(timeout=0.2)
            except queue.Empty:
                continue
            if kind == "trial" and on_trial is not None:
                on_trial(TrialReport(**payload))
            elif kind == "stopped":
                stopped = stopped or payload
            elif kind == "error":
                error = error or payload
    except KeyboardInterrupt:
        stopped = signal.SIGINT
    finally:
        _stop_workers(workers)
    if stopped:
        raise Stopped(stopped)
    if error is not None:
        raise APIUsageError(f"a sweep worker failed: {error}")


def _stop_workers(workers: list[Any]) -> None:
    """Ask running workers to stop (SIGTERM: their trial stops at its next step, is failed and
    queued again), then wait; a worker that will not stop is killed. None is left behind."""
    for worker in workers:
        if worker.is_alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.pid, signal.SIGTERM)
    for worker in workers:
        worker.join(timeout=60)
        if worker.is_alive():
            worker.kill()
            worker.join()
