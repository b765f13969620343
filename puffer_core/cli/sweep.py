"""`puffer sweep`: the command-line side of :mod:`puffer_core.train.sweeps`.

The specs, settings and env id are checked before optuna or torch is imported, so a typo
fails in a second; a progress line per trial goes to stderr, the summary to stdout.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click

from puffer_core.cli.errors import err_console
from puffer_core.cli.options import SEED, STEPS, Bounded, env_kwargs_option, parse_env_kwargs_option, parse_pairs
from puffer_core.env.postprocess import EPISODE_RETURN
from puffer_core.errors import APIUsageError

__all__ = ["sweep_cmd"]


def _default_out(env_id: str) -> Path:
    """``sweeps/ENV``: no time in it, so running the same command again resumes the sweep."""
    return Path("sweeps") / re.sub(r"[^A-Za-z0-9_.-]+", "-", env_id)


def _shown(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _trial_line(report: Any) -> str:
    params = ", ".join(f"{key}={_shown(value)}" for key, value in report.params.items())
    if report.outcome == "complete":
        result = f"→ {report.value:.4g}"
    elif report.outcome == "pruned":
        last = "" if report.value is None else f" (at {report.value:.4g})"
        result = f"→ pruned at step {report.step:,}{last}"
    elif report.outcome == "diverged":
        result = "→ diverged (a loss or weight stopped being finite)"
    else:
        result = "→ no episode finished (give more --steps)"
    best = "" if report.best_value is None else f"; best {report.best_value:.4g} (trial #{report.best_number})"
    return f"trial {report.done}/{report.total} (#{report.number}): {params} {result}{best}"


@click.command("sweep")
@click.argument("env_id")
@click.option("--trials", required=True, type=Bounded(1, 100_000), help="Trials wanted in the study in total.")
@click.option("--steps", required=True, type=STEPS, help="Environment steps each trial trains.")
@click.option(
    "--param", "params", multiple=True, required=True, metavar="K=LO:HI[:log]|K=A,B", help="A setting to search."
)
@click.option("--jobs", default=1, show_default=True, type=Bounded(1, 256), help="Trials at once (worker processes).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Sweep directory.  [default: sweeps/ENV]")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="A PPO setting every trial shares.")
@env_kwargs_option
@click.option(
    "--metric", default=EPISODE_RETURN, show_default=True, help="Episode-info key a trial is scored by (mean of 20)."
)
@click.option("--minimize", is_flag=True, help="Lower scores are better (default: higher).")
@click.option("--seed", default=0, show_default=True, type=SEED, help="Seed of the sampler (trials: --set seed=N).")
@click.option(
    "--startup-trials", default=5, show_default=True, type=Bounded(0, 100_000), help="Random, unpruned trials first."
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def sweep_cmd(
    env_id: str,
    trials: int,
    steps: int,
    params: tuple[str, ...],
    jobs: int,
    out: Path | None,
    settings: tuple[str, ...],
    kwargs: tuple[str, ...],
    metric: str,
    minimize: bool,
    seed: int,
    startup_trials: int,
    as_json: bool,
) -> None:
    """Search PPO settings for ENV_ID with Optuna; resume by running the same command again.

    Each --param is K=LO:HI (uniform), K=LO:HI:log (log-uniform, LO > 0) or K=A,B,…
    (values); integer settings (num_envs, rollout_steps…) get whole numbers. A trial trains
    --steps steps into OUT/trials/NNNN (TensorBoard logs included) and is scored by the mean
    --metric of its last 20 episodes; TPE samples, a median pruner stops trials whose
    curve falls behind. OUT/study.db (SQLite) keeps the study: after Ctrl-C the same
    command does only the trials still missing (an interrupted trial runs again).
    OUT/best.json holds the best settings and the `puffer train` command that uses them;
    OUT/sweep.png plots the search. Needs the sweep extra: pip install 'puffer-core[sweep]'.
    """
    from puffer_core.train.sweep_params import check_params
    from puffer_core.train.sweeps import plan_sweep, require_optuna, run_sweep  # torch-free, optuna-free

    fixed = parse_pairs(settings, "--set")
    try:
        searched = check_params(params, fixed)
    except APIUsageError as exc:
        raise click.BadParameter(str(exc).removeprefix("--param "), param_hint="--param") from None
    if "steps" in fixed:
        raise click.BadParameter("every trial trains --steps steps; give them there", param_hint="--set steps")
    out = out or _default_out(env_id)
    env_kwargs = parse_env_kwargs_option(env_id, kwargs)
    direction = "minimize" if minimize else "maximize"
    plan = plan_sweep(env_id, trials=trials, steps=steps, params=searched, out=out, jobs=jobs, settings=fixed,
                      env_kwargs=env_kwargs, metric=metric, direction=direction, seed=seed,
                      startup_trials=startup_trials)  # fmt: skip
    require_optuna()
    err_console.print(f"sweep of {env_id} into {out}", highlight=False, markup=False, soft_wrap=True)

    def show(report: Any) -> None:
        err_console.print(_trial_line(report), highlight=False, markup=False, soft_wrap=True)

    result = run_sweep(plan, on_trial=show)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
        return
    best = result.best
    if best is None:
        click.echo(f"{result.trials} trials, none finished with a score; see {out}/sweep.png")
        return
    click.echo(f"{result.trials} trials; best: trial #{best['trial']}, {best['metric']} {best['value']:.4g}")
    click.echo(best["command"])
    click.echo(f"wrote {out}/best.json, {out}/sweep.png")
