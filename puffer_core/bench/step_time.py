"""Where a step's time goes: the layers of one env's step, and the cores' time under a vector env.

The layers (``layer_times``)
    One env in a Serial vector env, as the backends build it (the emulator over
    ``EpisodeStats`` over the env as its plugin makes it), is stepped at each of its levels
    in turn: the vector env's ``send`` and ``recv``, Serial's loop over its envs
    (``EnvGroup.step``), the emulator's ``step_in_place`` (what every backend calls), and the
    ``step`` of each layer beneath, down to the base env. Every level steps the same instance,
    and in each round every level replays the same stretch: the env is reset with the round's
    seed before it (untimed) and takes the same actions, so the levels play the same game
    steps (a NetHack or Atari step costs what the game's state makes it cost, and that would
    swamp a layer's microseconds). Timing is on this thread's CPU clock, resets untimed, the
    levels' order alternating from round to round; an episode that ends at any level is reset
    from the top, so every layer starts each episode afresh. A layer's own time is the median
    over rounds of its level's time less the time of the level beneath in the same round. The
    emulator steps the env beneath ``EpisodeStats`` and counts the step itself
    (``_compile_step``), so its line is the emulation (action decoding, the flat buffer, the
    flags) less the frame of ``EpisodeStats.step`` it skips.

The cores (``core_budget``)
    A vector env driven through ``recv``/``send``, with the CPU time of the main process and
    of each worker read from the OS: per step, the cores' time splits into the envs' own work
    (what one Serial process spends per step on the same envs), what the vector env adds
    (hand-offs, waits spun, the main process's bookkeeping and the caller's loop), and the
    time no process of the run used (idle, or other processes). Serial and each setting take
    turns in rounds (each keeps its vector env between them), and every figure is the median
    over the rounds.

Vector envs are made as the bench's rows make them: ``send`` checks the actions, the default.
"""

from __future__ import annotations

import contextlib
import gc
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from puffer_core import vector
from puffer_core.env.random_actions import random_action_batches
from puffer_core.vector.autoreset import ResetPlan
from puffer_core.vector.checks import available_cpus
from puffer_core.vector.env_group import EnvGroup
from puffer_core.vector.timing import Progress, loop_seconds, run_rounds

__all__ = ["core_budget", "layer_times", "process_cpu_seconds", "run_step_time"]

#: Vector env settings to budget: (the name a table shows, ``vector.make``'s kwargs) each.
Settings = list[tuple[str, dict[str, Any]]]

#: What each level is, in a reader's words (a wrapper's own level is ``NAME.step``).
LAYER_NAMES = {
    "send/recv": "the vector env's send and recv (Serial)",
    "EnvGroup": "the loop over a worker's envs (autoreset, infos)",
    "GymnasiumEmulator": "emulation (action decoding, flat buffer, flags)",
    "EpisodeStats": "EpisodeStats (return, length, the info at an episode's end)",
}


def _levels(vec: Any) -> list[tuple[str, Callable[[Any], tuple], Callable[[Any], Any]]]:
    """(name, step, action converter) of every level of the Serial vector env ``vec``'s one env, top first."""
    group = vec.group
    emulator = group.envs[0]
    actions_row = group.actions
    send, recv = vec.send, vec.recv
    done = group.done

    def vector_step(batch: Any) -> tuple:
        send(batch)
        out = recv()
        return None, None, out[2][0], out[3][0], None

    def group_step(action: Any) -> tuple:
        actions_row[0] = action
        group.step()
        return None, None, done[0], False, None

    as_batch = (lambda a: np.asarray([a], dtype=actions_row.dtype)) if actions_row.ndim == 1 else (lambda a: a[None])
    levels = [("send/recv", vector_step, as_batch), ("EnvGroup", group_step, lambda a: a)]
    levels.append(("GymnasiumEmulator", emulator.step_in_place, lambda a: a))
    to_env = emulator._to_env_action
    layer = emulator.env
    for _ in range(32):  # the wrappers down to the base env
        if layer is None or not callable(getattr(layer, "step", None)):
            break
        levels.append((type(layer).__name__, layer.step, to_env))
        if getattr(layer, "unwrapped", layer) is layer:  # the base env
            break
        layer = getattr(layer, "env", None)
    return levels


def layer_times(env_id: str, steps: int = 20_000, rounds: int = 20, seed: int = 0) -> list[dict]:
    """Each layer of ``env_id``'s step (top first): its level's µs per step (``level_us``) and
    its own (``own_us``: the level less the one beneath, median over rounds); see the module
    docstring. Single-agent envs only (a multi-agent env's levels differ): [] for others."""
    vec = vector.make(env_id, num_envs=1, backend="serial", seed=seed)
    try:
        if vec.agents_per_env != 1 or not isinstance(vec.group, EnvGroup):  # several agents, native batches
            return []
        vec.async_reset(seed)
        vec.recv()
        levels = _levels(vec)
        flat = [a[0] for a in random_action_batches(vec.single_action_space, 1, min(steps, 4096), seed)]
        if vec.group.actions.ndim == 1:
            flat = [a.item() for a in flat]  # as the backends hand them: Python ints
        loops = []
        group = vec.group

        def reset(*_: Any, **__: Any) -> None:
            group.reset()  # from the top: every layer's episode starts afresh

        for _, step, convert in levels:
            loops.append((step, reset, [convert(a) for a in flat]))
        per_round = max(1, steps // rounds)

        def measure(turn: Any) -> float:
            # Every level of a round replays the same stretch: the same seed, the same actions.
            group.reset(ResetPlan(np.array([seed + turn.round], np.int64), None, None))
            return loop_seconds(*loops[turn.index], turn.round * per_round, per_round) / per_round

        enabled = gc.isenabled()
        gc.disable()  # a collection landing in one level only would bias the difference
        try:
            for loop in loops:
                loop_seconds(*loop, 0, min(per_round, 200))
            measured = run_rounds([name for name, _, _ in levels], measure, rounds, alternate=True, fatal=True)
        finally:
            if enabled:
                gc.enable()
    finally:
        vec.close()
    out = []
    for i, (name, _, _) in enumerate(levels):
        figures = measured[i].figures
        beneath = measured[i + 1].figures if i + 1 < len(levels) else [0.0] * len(figures)
        own = [(a - b) * 1e6 for a, b in zip(figures, beneath)]
        out.append({
            "layer": name,
            "what": LAYER_NAMES.get(name, f"{name}.step" if i + 1 < len(levels) else f"the env itself ({name})"),
            "level_us": statistics.median(figures) * 1e6,
            "own_us": statistics.median(own),
            "spread_us": _half_iqr(own),
        })  # fmt: skip
    return out


def _half_iqr(values: list[float]) -> float:
    """Half the interquartile range: how far a median of such rounds is to be trusted."""
    if len(values) < 2:
        return 0.0
    low, _, high = statistics.quantiles(values, n=4)
    return (high - low) / 2


def process_cpu_seconds(pid: int) -> float:
    """User and system CPU seconds process ``pid`` has used so far (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _driven(vec: Any, seconds: float, batches: list) -> tuple[int, float, float, float]:
    """Drive ``vec`` (reset, a batch held) through recv/send for ``seconds``: (steps, wall, main CPU, workers' CPU)."""
    pids = list(getattr(vec, "pids", []) or [])
    for n in range(32):  # warm-up: every env stepped, the workers spinning as they will
        vec.send(batches[n % 64])
        vec.recv()
    workers0 = sum(process_cpu_seconds(pid) for pid in pids)
    main0, wall0 = time.process_time(), time.perf_counter()
    steps, n, end = 0, 0, wall0 + seconds
    recv, send, rows = vec.recv, vec.send, vec.batch_size
    while time.perf_counter() < end:
        for _ in range(8):
            send(batches[n % 64])
            recv()
            n += 1
        steps += 8 * rows
    wall, main = time.perf_counter() - wall0, time.process_time() - main0
    workers = sum(process_cpu_seconds(pid) for pid in pids) - workers0
    return steps, wall, main, workers


def core_budget(
    env_id: str,
    num_envs: int,
    settings: Settings,
    seconds: float = 3.0,
    seed: int = 0,
    progress: Progress | None = None,
    rounds: int = 3,
) -> dict:
    """The cores' time per step (µs) of each of ``settings`` (name, ``vector.make`` kwargs) on
    ``num_envs`` envs, against one Serial process on the same envs (``work_us``: its CPU per
    step, the envs' own work), in ``rounds`` interleaved rounds of ``seconds`` for each; see
    the module docstring."""
    cpus = available_cpus()
    named = [("Serial", {"backend": "serial"}), *settings]
    envs: list[Any] = []
    try:
        for _, kwargs in named:
            vec = vector.make(env_id, num_envs=num_envs, seed=seed, **kwargs)
            envs.append(vec)
            vec.async_reset(seed)
            vec.recv()
        batches = [random_action_batches(vec.single_action_space, vec.batch_size, 64, seed) for vec in envs]

        def measure(turn: Any) -> tuple[int, float, float, float]:
            return _driven(envs[turn.index], seconds / rounds, batches[turn.index])

        measured = run_rounds([name for name, _ in named], measure, rounds, alternate=True, progress=progress,
                              fatal=True)  # fmt: skip
    finally:
        for vec in envs:
            with contextlib.suppress(Exception):
                vec.close()

    def per_step(figures: list, pick: Callable[[tuple], float]) -> float:
        return statistics.median(pick(figure) / figure[0] * 1e6 for figure in figures)

    work_us = per_step(measured[0].figures, lambda f: f[2] + f[3])
    rows = []
    for (name, _), result in zip(named[1:], measured[1:]):
        figures = result.figures
        cores_us = per_step(figures, lambda f: cpus * f[1])
        main_us, workers_us = per_step(figures, lambda f: f[2]), per_step(figures, lambda f: f[3])
        used = main_us + workers_us
        rows.append({
            "name": name,
            "steps_per_second": statistics.median(f[0] / f[1] for f in figures),
            "cores_us": cores_us,
            "main_us": main_us,
            "workers_us": workers_us,
            "work_us": work_us,
            "added_us": used - work_us,
            "idle_us": max(0.0, cores_us - used),
        })  # fmt: skip
    return {"cpus": cpus, "num_envs": num_envs, "serial_work_us": work_us, "settings": rows}


def fastest_setting(rows: list[dict]) -> Settings:
    """The fastest Multiprocessing setting among ``run_bench``'s ``rows``, as ``core_budget`` takes it, and the
    same without spinning (``spin_us=0``: every wait sleeps at once, as on a semaphore); [] if none."""
    fastest = max(
        (row for row in rows if row.get("kind") == "puffer" and row.get("sps") and row["backend"] == "multiprocessing"),
        key=lambda row: row["sps"],
        default=None,
    )
    if fastest is None:
        return []
    vector_kwargs = fastest.get("vector_kwargs") or {}
    kwargs = {"backend": "multiprocessing", "num_workers": fastest["num_workers"], "batch_size": fastest["batch_size"]}
    return [
        (fastest["name"], {**kwargs, "vector_kwargs": vector_kwargs or None}),
        (f"{fastest['name']} spin_us=0", {**kwargs, "vector_kwargs": {**vector_kwargs, "spin_us": 0}}),
    ]


def default_settings(num_envs: int) -> Settings:
    """What ``puffer bench ENV --step-time`` budgets: Multiprocessing at its defaults, full and half batches."""
    settings = [("Multiprocessing (defaults)", {"backend": "multiprocessing"})]
    if num_envs >= 2:
        half = num_envs // 2
        settings.append((f"Multiprocessing b={half}", {"backend": "multiprocessing", "batch_size": half}))
    return settings


def run_step_time(
    env_id: str,
    num_envs: int,
    settings: Settings,
    seconds: float = 3.0,
    seed: int = 0,
    progress: Progress | None = None,
) -> dict:
    """A standard run's section for ``env_id``: its layers, and the cores' budget of ``settings``
    beside one Serial process (``seconds`` for each)."""
    if progress is not None:
        progress(f"{env_id}: the layers of a step", 0, 1)
    steps = max(2000, int(seconds * 5000))
    layers = layer_times(env_id, steps=steps, seed=seed)
    cores = core_budget(env_id, num_envs, settings, seconds, seed, progress) if settings else None
    return {"env": env_id, "layers": layers, "cores": cores}


def render_markdown(section: dict) -> str:
    """The two tables of a ``run_step_time`` section, as the docs and ``puffer bench --step-time`` show them."""
    env_id, layers, cores = section["env"], section["layers"], section.get("cores")
    lines = []
    if layers:
        top = layers[0]["level_us"]
        lines += [
            f"One `{env_id}` env in a Serial vector env, stepped at each layer in turn on one game "
            "(CPU time of one thread; median of interleaved rounds; a batch of one env, so the vector "
            "env's send and recv fall on every step):",
            "",
            "| layer | own µs per step | ± (half the rounds' IQR) | share of the step |",
            "| --- | ---: | ---: | ---: |",
        ]
        for layer in layers:
            share = layer["own_us"] / top if top else 0.0
            spread = "–" if layer.get("spread_us") is None else f"{layer['spread_us']:.2f}"
            lines.append(f"| {layer['what']} | {layer['own_us']:.2f} | {spread} | {share:.0%} |")
        lines.append(f"| **the whole step** | **{top:.2f}** | | |")
        lines += [
            "",
            "A figure within its ± of zero (or below it) is a layer too light to tell from the rounds' noise.",
        ]
    if cores and cores["settings"]:
        if lines:
            lines.append("")
        lines += [
            f"The {cores['cpus']} cores' time per step on {cores['num_envs']} envs (µs of CPU; one Serial "
            f"process spends {cores['serial_work_us']:.2f} µs per step on the same envs, the envs' own work; "
            "the vector env's own is negative where the envs step faster spread over processes, each with its "
            "own caches, than all in one):",
            "",
            "| setting | steps/s | cores × wall | envs' work | the vector env's own | idle or others "
            "| main process | workers |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for row in cores["settings"]:
            lines.append(
                f"| {row['name']} | {row['steps_per_second']:,.0f} | {row['cores_us']:.2f} | {row['work_us']:.2f} "
                f"| {row['added_us']:.2f} | {row['idle_us']:.2f} | {row['main_us']:.2f} | {row['workers_us']:.2f} |"
            )
    return "\n".join(lines)
