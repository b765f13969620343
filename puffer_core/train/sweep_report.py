"""What a sweep leaves for people: ``best.json`` (the best settings and the ``puffer train``
command that uses them) and ``sweep.png`` (the score of every trial, and against every
searched setting), both written atomically."""

from __future__ import annotations

import io
import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from puffer_core.atomic import write_atomically
from puffer_core.train.config_file import render_config
from puffer_core.train.sweep_params import Param

__all__ = ["best_settings", "train_command", "write_best", "write_plot"]


def _arg(value: Any) -> str:
    """A value as ``--set``/``--kwarg`` reads it back (JSON, or plain text for a string)."""
    return value if isinstance(value, str) else json.dumps(value)


def train_command(env: str, steps: int, settings: dict[str, Any], env_kwargs: dict[str, Any]) -> str:
    """The ``puffer train`` command line that trains with ``settings``."""
    args = ["puffer", "train", env, "--steps", str(steps)]
    for key, value in settings.items():
        args += ["--set", f"{key}={_arg(value)}"]
    for key, value in env_kwargs.items():
        args += ["--kwarg", f"{key}={_arg(value)}"]
    return shlex.join(args)


def _scored(trial: Any) -> bool:
    return trial.state.name == "COMPLETE" and trial.value is not None


def best_settings(study: Any, definition: dict[str, Any]) -> dict[str, Any] | None:
    """The best finished trial of ``study`` as ``best.json`` holds it; None before the first."""
    finished = [trial for trial in study.get_trials(deepcopy=False) if _scored(trial)]
    if not finished:
        return None
    sign = 1 if definition["direction"] == "maximize" else -1
    best = max(finished, key=lambda trial: (sign * trial.value, -trial.number))
    settings = {**definition["settings"], **best.params}
    return {
        "env": definition["env"],
        "steps": definition["steps"],
        "metric": definition["metric"],
        "direction": definition["direction"],
        "value": best.value,
        "trial": best.number,
        "params": dict(best.params),
        "settings": settings,
        "env_kwargs": definition["env_kwargs"],
        "command": train_command(definition["env"], definition["steps"], settings, definition["env_kwargs"]),
    }


def write_best(directory: Path, best: dict[str, Any]) -> Path:
    """``best.json``, and ``best.toml``: the best trial's settings as a config file (``puffer train --config``)."""
    path = directory / "best.json"
    write_atomically(path, (json.dumps(best, indent=2) + "\n").encode())
    header = (f"The settings of a puffer sweep's best trial ({best['trial']}: {best['metric']} {best['value']:.6g}).\n"
              "Train with them: puffer train --config best.toml --out NEW_FOLDER")  # fmt: skip
    settings = {"steps": best["steps"], **best["settings"]}
    text = render_config(best["env"], settings, best["env_kwargs"], header)
    write_atomically(directory / "best.toml", text.encode("utf-8"))
    return path


def _points(trial: Any) -> tuple[float | None, bool]:
    """(the value to plot, whether it was pruned): a pruned trial at its last reported value."""
    if _scored(trial):
        return trial.value, False
    if trial.state.name == "PRUNED" and trial.intermediate_values:
        return trial.intermediate_values[max(trial.intermediate_values)], True
    return None, False


def write_plot(directory: Path, study: Any, params: Sequence[Param], definition: dict[str, Any]) -> Path:
    """``sweep.png``: the score per trial (best so far as a line), then the score against
    each searched setting; pruned trials in grey at their last reported score."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed, and never a window
    from matplotlib.figure import Figure

    trials = [trial for trial in study.get_trials(deepcopy=False) if _points(trial)[0] is not None]
    panels = 1 + len(params)
    columns = min(panels, 3)
    rows = -(-panels // columns)
    figure = Figure(figsize=(4.2 * columns, 3.4 * rows), dpi=100, layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    label = f"mean {definition['metric']} (last 20 episodes)"
    _trials_panel(axes[0], trials, definition["direction"], label)
    for ax, param in zip(axes[1:], params):
        _param_panel(ax, trials, param, label)
    for ax in axes[panels:]:
        ax.set_visible(False)
    figure.suptitle(f"{definition['env']}: sweep of {', '.join(p.name for p in params)}")
    out = io.BytesIO()
    figure.savefig(out, format="png")
    path = directory / "sweep.png"
    write_atomically(path, out.getvalue())
    return path


def _scatter(ax: Any, xs: list, trials: list, **kwargs: Any) -> None:
    kept = [(x, *_points(trial)) for x, trial in zip(xs, trials)]
    for pruned, style in ((False, {"color": "tab:blue", "marker": "o"}), (True, {"color": "0.6", "marker": "x"})):
        chosen = [(x, y) for x, y, was in kept if was == pruned]
        if chosen:
            ax.scatter(*zip(*chosen), s=24, label="pruned" if pruned else "finished", **style, **kwargs)


def _trials_panel(ax: Any, trials: list, direction: str, label: str) -> None:
    _scatter(ax, [trial.number for trial in trials], trials)
    finished = sorted((trial.number, trial.value) for trial in trials if _scored(trial))
    if finished:
        pick = max if direction == "maximize" else min
        best, line = None, []
        for number, value in finished:
            best = value if best is None else pick(best, value)
            line.append((number, best))
        ax.step(*zip(*line), where="post", color="tab:orange", label="best so far")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("trial")
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)
    if trials:
        ax.legend(loc="best", fontsize="small")


def _param_panel(ax: Any, trials: list, param: Param, label: str) -> None:
    present = [trial for trial in trials if param.name in trial.params]
    if param.kind == "choice":
        names = [json.dumps(choice) if not isinstance(choice, str) else choice for choice in param.choices]
        positions = {name: index for index, name in enumerate(names)}
        xs = [positions.get(_arg(trial.params[param.name]), -1) for trial in present]
        ax.set_xticks(range(len(names)), names)
    else:
        xs = [trial.params[param.name] for trial in present]
        if param.log:
            ax.set_xscale("log")
        else:
            ax.xaxis.get_major_locator().set_params(nbins=4, integer=param.kind == "int")
        ax.set_xlim(param.low, param.high)  # the whole searched range: where the trials fell in it
    _scatter(ax, xs, present)
    ax.set_xlabel(param.name)
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)
