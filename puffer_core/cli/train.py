"""`puffer train` and `puffer eval`: the command-line side of :mod:`puffer_core.train`.

torch is imported only when a command runs, so `puffer --help` stays fast and works
without the ``train`` extra.
"""

from __future__ import annotations

import json
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.markup import escape

from puffer_core.cli.doctor import warn_if_known_bad
from puffer_core.cli.errors import err_console
from puffer_core.cli.options import (
    EPISODES,
    NUM_ENVS,
    NUM_WORKERS,
    SEED,
    STEPS,
    env_kwargs_option,
    pair_texts,
    parse_env_kwargs_option,
    parse_pairs,
    ray_options,
    record_option,
    saved_kwargs_mode,
    saved_kwargs_options,
)
from puffer_core.cli.output import steps_bar
from puffer_core.cli.runs import NOT_RESUMED, detach as detach_run, given_options, note_failure
from puffer_core.env.recording import plan_recording
from puffer_core.errors import PufferError
from puffer_core.train.curve import require_matplotlib
from puffer_core.train.logs import Wandb, require_logs
from puffer_core.train.progress import ProgressLines
from puffer_core.train.restore import names_an_env

__all__ = ["eval_cmd", "train_cmd"]


def _default_out(env_id: str) -> Path:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", env_id)
    return Path("runs") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


def _import_train(logs: bool = False) -> Any:
    """``puffer_core.train``, or a one-line MissingDependencyError naming the extra to install
    (torch first, then matplotlib, then, for a run that writes ``logs``, tensorboard)."""
    from puffer_core import train  # deferred: torch and matplotlib, optional extras

    train.ppo  # noqa: B018  (imports torch: the package defers it to first use)
    require_matplotlib()
    require_logs(logs, None)
    return train


TRAIN_HELP = """Train PPO on ENV_ID; write OUT/policy.pt, curve.csv, curve.png and OUT/tensorboard.

--wandb PROJECT sends the logs to Weights & Biases too (pip install 'puffer-core[wandb]';
WANDB_MODE=offline keeps the run here). --record PATH then plays --record-episodes
evaluation episodes of the trained policy (sampled, as `puffer eval` does) and records
them: MP4/GIF for pixel envs, an asciinema cast for text envs.

--backend ray --ray-address ADDR runs the envs on a Ray cluster (--placement spread puts
the workers on as many of its nodes as it can) and the learner here, where OUT is written.
A resumed run takes a new --ray-address (without one its envs run on this machine), and
`puffer eval` plays on this machine.

Ctrl-C or SIGTERM stops at the next step and leaves a loadable checkpoint; `puffer train
--resume OUT` continues (ENV_ID may then be left out). It prints every setting and env kwarg
it takes from the checkpoint; --set and --kwarg replace any of them. A saved env kwarg is
restored only where the env's plugin declares it restorable, within its bounds
(--trust-kwargs takes them as they are, --no-saved-kwargs leaves them out), and a saved
num_envs, num_workers or torch_threads beyond what this machine runs is refused unless
--set again. A crash, or a loss or weight that stops being finite,
saves nothing: the last good checkpoint stays. One run at a time holds OUT. `puffer eval
OUT` plays the policy. --set KEY=VALUE takes any PPO setting (learning_rate, ent_coef,
policy=lstm, ...): docs/settings.md lists each with its default and meaning. An env's plugin
may declare training defaults (settings and kwargs that make its envs learn); they are
printed, and --set / --kwarg override them.
Needs the train extra: pip install 'puffer-core[train]'.
"""


@click.command("train", help=TRAIN_HELP)
@click.argument("env_id", required=False)
@click.option("--steps", type=STEPS, help="Environment steps in the whole run.  [default: 200000]")
@click.option("--num-envs", type=NUM_ENVS, help="Envs to step at once.  [default: 32]")
@click.option("--num-workers", type=NUM_WORKERS, help="Worker processes (multiprocessing, ray).")
@click.option(
    "--backend", type=click.Choice(["serial", "multiprocessing", "ray"]), help="Vector backend.  [default: serial]"
)
@ray_options
@click.option("--seed", type=SEED, help="Seed of the envs and the policy.  [default: 0]")
@click.option("--device", help="cpu, cuda or cuda:N.  [default: cuda when available, else cpu]")
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), help="Run directory.  [default: runs/ENV-TIME]"
)
@click.option(
    "--resume",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Continue the run in this directory.",
)
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="Any PPO setting (see below).")
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A TOML file of settings (the keys of --set, env = ID, an [env_kwargs] table; OUT/config.toml of a run "
    "repeats it); --set, the options above and --kwarg override it.",
)
@env_kwargs_option
@saved_kwargs_options
@record_option("After training, record evaluation episodes of the policy (.mp4, .gif or .cast).")
@click.option("--record-episodes", default=1, show_default=True, type=EPISODES, help="Episodes --record plays.")
@click.option("--wandb", "wandb_project", metavar="PROJECT", help="Send the logs to this W&B project too.")
@click.option("--wandb-entity", metavar="ENTITY", help="The W&B entity (user or team) of --wandb.")
@click.option("--wandb-group", metavar="GROUP", help="The W&B group of --wandb's run.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (no progress bar).")
@click.option(
    "--detach",
    is_flag=True,
    help="Run in the background (a session of its own: closing ssh does not end it; output to OUT/train.log), "
    "print OUT and the pid, and return at once. It resumes by itself after its box or container comes back.",
)
@click.option("--no-auto-resume", is_flag=True, help="With --detach: do not resume by itself after a crash.")
@click.pass_context
def train_cmd(
    ctx: click.Context,
    env_id: str | None,
    steps: int | None,
    num_envs: int | None,
    num_workers: int | None,
    backend: str | None,
    ray_address: str | None,
    placement: str | None,
    seed: int | None,
    device: str | None,
    out: Path | None,
    resume: Path | None,
    settings: tuple[str, ...],
    config_path: Path | None,
    kwargs: tuple[str, ...],
    trust_kwargs: bool,
    no_saved_kwargs: bool,
    record_path: str | None,
    overwrite: bool,
    record_episodes: int,
    wandb_project: str | None,
    wandb_entity: str | None,
    wandb_group: str | None,
    as_json: bool,
    detach: bool,
    no_auto_resume: bool,
) -> None:
    saved_kwargs = saved_kwargs_mode(trust_kwargs, no_saved_kwargs)
    _check_pairings(detach, no_auto_resume, overwrite, record_path, resume, saved_kwargs)
    options = {"steps": steps, "num_envs": num_envs, "num_workers": num_workers, "backend": backend}
    options.update(ray_address=ray_address, placement=placement, seed=seed, device=device)
    file = _config_file(config_path)
    if env_id is None and resume is None and file is not None:
        env_id = file.env
    chosen = {**(file.settings if file else {}), **{key: value for key, value in options.items() if value is not None}}
    chosen.update(parse_pairs(settings, "--set"))
    if resume is None and env_id is None:
        raise click.UsageError("give an ENV_ID (e.g. classic/cartpole), env = ID in --config, or --resume DIR")
    # A resumed run's env is the checkpoint's: its kwargs are parsed once that is read (_plan).
    given_kwargs = parse_env_kwargs_option(env_id, kwargs) if env_id else pair_texts(kwargs, "--kwarg")
    env_kwargs = {**(file.env_kwargs if file else {}), **given_kwargs} or None
    wandb = _wandb(wandb_project, wandb_entity, wandb_group)
    given = {"settings": chosen, "env_kwargs": env_kwargs, "saved_kwargs": saved_kwargs}
    try:
        plan = _plan(env_id, resume, out, given)
    except (PufferError, click.ClickException) as exc:
        note_failure(out or resume, exc)  # a run started in the background: its record says why
        raise
    for line in plan.describe():
        err_console.print(line, highlight=False, markup=False, soft_wrap=True)
    if isinstance(plan.env, str):
        warn_if_known_bad(plan.env)
    recording = None
    if record_path is not None:  # a bad path fails now, not after training
        recording = plan_recording(plan.env, record_path, plan.env_kwargs, record_episodes, overwrite=overwrite)
    if detach:  # everything above was checked here; the run itself plans again in its own process
        _detach(ctx, plan.out, env_id, resume, auto_resume=not no_auto_resume, as_json=as_json)
        return
    train = _import_train(logs=True)  # a resumed run's plan imported it already, to read the checkpoint
    from puffer_core.train.trainer import device_label, pick_device  # torch is here now

    device = f"device: {device_label(pick_device(plan.config.device))}"
    started = time.perf_counter()
    try:
        curve = _train(train, plan, wandb, env_id or str(resume), as_json, device)
    except train.TrainingInterrupted as stop:
        _report_stop(stop, plan.out)
    recorded = None
    if recording is not None:
        # The run's own checkpoint, written just now from the kwargs the run was checked with.
        played = train.evaluate(plan.out, record_episodes, record=recording, overwrite=overwrite, saved_kwargs="trust")
        # "record": the file written (NAME-2.SUFFIX where NAME appeared meanwhile; None: no frame came)
        recorded = {"record": None, **played.to_json()}
    _report_training(curve, plan.out, plan.env_name, time.perf_counter() - started, as_json, recorded)


def _check_pairings(detach: bool, no_auto_resume: bool, overwrite: bool, record_path: str | None,
                    resume: Path | None, saved_kwargs: str) -> None:  # fmt: skip
    """Options that only mean something beside another one: a usage error naming the one missing."""
    if no_auto_resume and not detach:
        raise click.UsageError("--no-auto-resume goes with --detach")
    if overwrite and record_path is None:
        raise click.UsageError("--overwrite replaces the --record file; give --record PATH")
    if resume is None and saved_kwargs != "check":
        raise click.UsageError(
            "--trust-kwargs and --no-saved-kwargs are about a checkpoint's kwargs: give --resume DIR"
        )


def _detach(ctx: click.Context, out: str | Path, env_id: str | None, resume: Path | None, *, auto_resume: bool,
            as_json: bool) -> None:  # fmt: skip
    """Start the checked run again in the background, with the options given here."""
    # --json is the launch's (its pid and log, printed here): the run's own log gets progress lines.
    given = given_options(ctx, {"detach", "no_auto_resume", "out", "resume", "as_json"})
    where = Path(out).resolve()
    train_args = [*([env_id] if env_id else []), *(["--resume", str(resume)] if resume else []), "--out",
                  str(where), *given]  # fmt: skip
    detach_run(where, train_args, given_options(ctx, NOT_RESUMED), auto_resume=auto_resume, as_json=as_json)


def _config_file(path: Path | None) -> Any:
    """``--config FILE`` read and checked (None without one); what is wrong with it is a usage error naming it."""
    if path is None:
        return None
    from puffer_core.train.config_file import read_config  # torch-free

    try:
        return read_config(path)
    except PufferError as exc:
        raise click.BadParameter(str(exc), param_hint="--config") from None


def _plan(env_id: str | None, resume: Path | None, out: Path | None, given: dict[str, Any]) -> Any:
    """The run's plan, with what can be wrong without torch failing first: a new run is
    planned before torch loads; a resumed one once its checkpoint is read (torch), after the
    settings given and the checkpoint's place are checked."""
    from puffer_core.train.plan import plan_run  # torch-free

    if resume is None:
        return plan_run(env_id, out=out or _default_out(env_id), **given)
    _check_resume_settings(given["settings"])
    source = _checkpoint_file(resume, "--resume")
    load = _import_train(logs=True).load
    if env_id is None and given["env_kwargs"]:
        load, given = _typed_by_checkpoint(load, source, given)
    return plan_run(env_id, resume=source, out=out, load=load, **given)


def _typed_by_checkpoint(load: Any, source: Path, given: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """``--kwarg`` texts parsed by the types of the checkpoint's env, and a loader handing back
    the checkpoint read for it (read once)."""
    saved = load(source)
    pairs = tuple(f"{key}={text}" for key, text in given["env_kwargs"].items())
    typed = names_an_env(saved.env)  # a creator's name (not an id) declares no types
    env_kwargs = parse_env_kwargs_option(saved.env, pairs) if typed else parse_pairs(pairs, "--kwarg")
    return (lambda _path: saved), {**given, "env_kwargs": env_kwargs}


def _train(train: Any, plan: Any, wandb: Any, label: str, as_json: bool, device: str) -> Any:
    """Train the plan: a progress bar in a terminal, progress lines in a log or a pipe, nothing with JSON; the curve.

    ``device`` (the line naming it) is said with the first update: a run whose envs cannot be
    made fails on its one error line."""
    if as_json:
        return train.train_plan(plan, wandb=wandb)
    config = plan.config

    def write(line: str) -> None:
        err_console.print(line, highlight=False, markup=False, soft_wrap=True)

    if not err_console.is_terminal:
        lines = ProgressLines(config.steps, config.log_seconds, write, max_seconds=config.max_seconds)
        return train.train_plan(plan, on_update=_first_saying(device, write, lines), wandb=wandb)
    with steps_bar("{task.fields[sps]} steps/s · mean return {task.fields[mean_return]}") as bar:
        task = bar.add_task(escape(label), total=plan.config.steps, sps="–", mean_return="–")

        def show(row: dict[str, Any]) -> None:
            mean = "–" if row["mean_return"] is None else f"{row['mean_return']:.2f}"
            bar.update(task, completed=row["step"], sps=f"{row['steps_per_second']:,.0f}", mean_return=mean)

        return train.train_plan(plan, on_update=_first_saying(device, write, show), wandb=wandb)


def _first_saying(line: str, write: Any, on_update: Any) -> Any:
    """``on_update`` that writes ``line`` before the first update it is given."""
    said = False

    def report(row: dict[str, Any]) -> None:
        nonlocal said
        if not said:
            said = True
            write(line)
        on_update(row)

    return report


def _wandb(project: str | None, entity: str | None, group: str | None) -> Any:
    """The W&B destination --wandb names (None without it); a missing wandb fails now, before
    torch is imported."""
    if project is None and (entity is not None or group is not None):
        raise click.UsageError("--wandb-entity and --wandb-group go with --wandb PROJECT")
    wandb = None if project is None else Wandb(project, entity=entity, group=group)
    require_logs(False, wandb)  # tensorboard's turn comes after torch's (_import_train)
    return wandb


def _check_resume_settings(settings: dict[str, Any]) -> None:
    """The settings given to a resumed run, checked before torch loads (a typo fails in a
    second); the run checks them again on top of the checkpoint's."""
    from puffer_core.train.config import RAY_ONLY, PPOConfig  # torch-free

    if "backend" not in settings and RAY_ONLY & settings.keys():
        # The resumed run's backend is known once its checkpoint is read (the plan checks then).
        settings = {**settings, "backend": "ray"}
    PPOConfig().replace(**settings).validate()


def _checkpoint_file(run: Path, option: str) -> Path:
    """The policy.pt of a run directory (or the file given), or a usage error saying what to give."""
    path = run / "policy.pt" if run.is_dir() else run
    if not path.is_file():
        raise click.BadParameter(
            f"{path} does not exist: give the --out directory of a `puffer train` run", param_hint=option
        )
    return path


def _report_stop(stop: Any, out: Path | None) -> NoReturn:
    """A stop asked for (Ctrl-C, ``puffer runs stop``, SIGTERM) said as a stop, not an error; its exit code kept."""
    rows = stop.curve.rows
    step = rows[-1]["step"] if rows else 0
    name = signal.Signals(stop.signal_number).name
    saved = f"; policy.pt saved in {out}: puffer train --resume {out} continues it" if out is not None else ""
    err_console.print(f"stopped at step {step:,} by {name}{saved}", highlight=False, markup=False, soft_wrap=True)
    sys.exit(stop.exit_code)


def _report_training(
    curve: Any, out: Path, env_id: str | None, seconds: float, as_json: bool, recorded: dict | None = None
) -> None:
    last = curve.rows[-1] if curve.rows else {}
    summary = {
        "env": env_id,
        "steps": last.get("step", 0),
        "seconds": round(seconds, 2),
        "episodes": curve.episode_count,
        "mean_return": curve.mean_return(),
        "out": str(out),
        "files": [str(Path(out) / name) for name in ("policy.pt", "curve.csv", "curve.png", "tensorboard")],
    }
    if recorded is not None:
        summary["recorded"] = recorded
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    if summary["mean_return"] is None:  # e.g. Pendulum's episodes outlast a short run: say that, not "0 episodes"
        episodes = "no episode finished within the steps run (more --steps finish some)"
    else:
        episodes = f"{summary['episodes']:,} episodes, mean return {summary['mean_return']:.2f} (last 20)"
    click.echo(
        f"{summary['steps']:,} steps in {seconds:.1f} s, {episodes}; wrote {out}/policy.pt, curve.csv, "
        "curve.png, tensorboard/"
    )
    if recorded is not None:
        click.echo(
            f"recorded {recorded['episodes']} evaluation episode(s) to {recorded['record']}: "
            f"mean return {recorded['mean_return']:.2f}"
        )


@click.command("eval")
@click.argument("run", metavar="DIR", type=click.Path(path_type=Path))
@click.option("--episodes", default=10, show_default=True, type=EPISODES, help="Episodes to play.")
@click.option("--seed", default=12345, show_default=True, type=SEED, help="Seed of the env.")
@click.option(
    "--greedy", is_flag=True, help="Take the most likely action (default: sample one, as the policy was trained)."
)
@env_kwargs_option
@saved_kwargs_options
@record_option("Record the episodes played: .mp4 or .gif (pixel envs), .cast (text envs).")
@click.option("--json", "as_json", is_flag=True, help="Print the returns as JSON.")
def eval_cmd(
    run: Path,
    episodes: int,
    seed: int,
    greedy: bool,
    kwargs: tuple[str, ...],
    trust_kwargs: bool,
    no_saved_kwargs: bool,
    record_path: str | None,
    overwrite: bool,
    as_json: bool,
) -> None:
    """Play the policy that `puffer train` saved in DIR; report its episode returns.

    Actions are sampled from the policy, as in training: a greedy policy can repeat one
    move for good (the NetHack recipe's plays every episode to its step cap). --greedy
    takes the most likely action.

    DIR/policy.pt is read as data (tensors and plain values only, sizes bounded): a file
    that would run code on load is refused. The env and kwargs it names are printed before
    anything is built; --kwarg K=V replaces any of them. A saved env kwarg is restored only
    where the env's plugin declares it restorable, within its bounds: --trust-kwargs takes
    them as they are, --no-saved-kwargs leaves them out.
    """
    if overwrite and record_path is None:
        raise click.UsageError("--overwrite replaces the --record file; give --record PATH")
    pair_texts(kwargs, "--kwarg")  # a pair that is not KEY=VALUE fails before the checkpoint is read
    saved_kwargs = saved_kwargs_mode(trust_kwargs, no_saved_kwargs)
    path = _checkpoint_file(run, "DIR")
    train = _import_train()
    from puffer_core.train.plan import plan_eval  # torch-free, but the checkpoint needs torch

    saved = train.load(path)
    # The checkpoint's env declares the kwargs' types; a creator's name (not an id) declares none.
    typed = names_an_env(saved.env)
    env_kwargs = parse_env_kwargs_option(saved.env, kwargs) if typed else parse_pairs(kwargs, "--kwarg")
    plan = plan_eval(path, env_kwargs=env_kwargs, saved_kwargs=saved_kwargs, load=lambda _path: saved)
    for line in plan.describe():
        err_console.print(line, highlight=False, markup=False, soft_wrap=True)
    if isinstance(plan.env, str):
        warn_if_known_bad(plan.env)
    options = {"record": record_path, "overwrite": overwrite}
    result = train.evaluate_plan(plan, episodes, seed=seed, greedy=greedy, **options)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
        return
    data = result.to_json()
    click.echo(
        f"{result.env}: {data['episodes']} episodes, mean return {data['mean_return']:.2f} "
        f"(min {data['min_return']:.2f}, max {data['max_return']:.2f}), mean length {data['mean_length']:.1f}"
    )
    if record_path is not None:
        click.echo(f"recorded them to {result.record}" if result.record else f"nothing recorded to {record_path}")
