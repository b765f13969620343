"""Every `puffer` command, given bad arguments, fails with one line on stderr and a non-zero
exit, never a traceback. The commands come from the click group itself, so a new command
without cases here fails ``test_every_command_has_bad_argument_cases``.

Click's usage errors (unknown option, value out of range, missing argument) are one line
too: ``error: <click's message> (see `puffer CMD --help`)``, exit code 2. Bare ``puffer``
(or ``puffer tank``) is not an error but a request for help, and prints it.

The cases run as processes of their own, against a plugin site holding a plugin that raises at
import: each forked from one process that has imported the CLI (``tests/forked_cli.py``), and
``main()`` run as ``python -m puffer_core.cli.main`` runs it. Bare ``puffer`` and
``PUFFER_DEBUG`` run as real subprocesses of ``python -m puffer_core.cli.main``.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import click
import pytest
from plugin_site import BROKEN_IMPORT, GOOD, run_puffer_many, write_plugin

from puffer_core.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]


class Case(NamedTuple):
    args: tuple[str, ...]
    fragment: str  # what the message must say about the problem


HAS_TORCH = importlib.util.find_spec("torch") is not None


def case(line: str, fragment: str) -> Case:
    return Case(tuple(line.split()), fragment)


# {empty}: an empty folder; {file}: a regular file; {full}: a folder with a file in it;
# {missing}: a path that does not exist.
CASES = [
    # top level
    case("--bogus", "No such option '--bogus' (see `puffer --help`)"),
    case("rnu classic/cartpole", "No such command 'rnu'"),
    # plugins, envs
    case("plugins --bogus", "No such option '--bogus' (see `puffer plugins --help`)"),
    case("envs --plugin nope", "no plugin named 'nope'"),
    case("envs extra", "Got unexpected extra argument (extra)"),
    case("envs --gymnasium --plugin classic", "--gymnasium lists the ids no plugin covers: drop --plugin"),
    # constraints (the sets themselves: tests/matrix/test_matrix_shipped.py)
    case("constraints --python 2.7", "--python '2.7' is not a Python 3 version: write versions like 3.12"),
    case("constraints --python 3.9", "no constraint set for Python 3.9: the matrix verified one for"),
    case("constraints --plugins nope", "no plugin named 'nope' in the matrix"),
    case("constraints --bogus", "No such option '--bogus' (see `puffer constraints --help`)"),
    # doctor (its verdicts: tests/cli/test_doctor_cli.py)
    case("doctor --bogus", "No such option '--bogus' (see `puffer doctor --help`)"),
    case("doctor extra", "Got unexpected extra argument (extra)"),
    # run: env ids, kwargs, numbers, a plugin that raised at import
    case("run", "Missing argument 'ENV_ID' (see `puffer run --help`)"),
    case("run classic/cartpol", "unknown environment 'classic/cartpol'. Did you mean: classic/cartpole?"),
    case("run cartpole-v1", "unknown environment 'cartpole-v1'. Did you mean: classic/cartpole"),
    case("run ALE/Nothing-v5", "unknown environment 'ALE/Nothing-v5'."),
    case("run FrozenLake-v1 --kwarg slippery=1", "takes no kwarg 'slippery'; did you mean is_slippery?"),
    case("run broken/anything", "plugin 'broken' failed to import (puffer_plugin_broken): ModuleNotFoundError"),
    case(
        "run classic/cartpole --kwarg foo=1",
        'classic/cartpole does not take kwarg foo: its creator says "CartPoleEnv.__init__() got an unexpected '
        "keyword argument 'foo'",
    ),
    case("run good/cartpole --kwarg foo=1 --kwarg bar=2", "good/cartpole does not take kwarg foo"),
    case(
        "run classic/cartpole --kwarg render_mode=3",
        "env 0 raised AttributeError in construction (probe env in the main process): AttributeError: 'int' "
        "object has no attribute",
    ),
    case("run classic/cartpole --kwarg nonsense", "'nonsense' is not KEY=VALUE"),
    case("run classic/cartpole --seed -5", "-5 is out of range: give an integer from 0 to 2**62 - 1"),
    case("run classic/cartpole --seed 4611686018427387904", "from 0 to 2**62 - 1"),
    case("run classic/cartpole --steps 0", "'--steps': 0 is out of range: give an integer from 1 to 10**12"),
    case("run classic/cartpole --steps 1e3", "'1e3' is not a valid integer"),
    case("run classic/cartpole --num-envs 100000000", "give an integer from 1 to 65,536"),
    case("run classic/cartpole --num-workers 0", "'--num-workers': 0 is out of range"),
    case("run classic/cartpole --batch-size -1", "'--batch-size': -1 is out of range"),
    case("run classic/cartpole --num-envs 2 --num-workers 3 --backend multiprocessing", "num_workers 3 is more"),
    case("run classic/cartpole --backend threads", "'threads' is not one of 'serial', 'multiprocessing', 'ray'"),
    case("run classic/cartpole --placement spread", "--placement needs --backend ray"),
    case("run classic/cartpole --backend multiprocessing --ray-address auto", "--ray-address needs --backend ray"),
    case("run classic/cartpole --backend ray --placement scatter", "'scatter' is not one of 'spread', 'pack'"),
    case("run classic/cartpole --backend ray --ray-address nowhere", "vector_kwargs['address'] must be None, 'auto'"),
    # bench
    case("bench", "give an ENV_ID (e.g. classic/cartpole), --standard DIR or --training"),
    case("bench classic/cartpol --no-peers", "Did you mean: classic/cartpole?"),
    case("bench classic/cartpole --num-envs 0", "'--num-envs': 0 is out of range"),
    case("bench classic/cartpole --seconds 0", "'--seconds': 0.0 is not in the range 0.1<=x<=3600"),
    case("bench classic/cartpole --rounds 1001", "give an integer from 1 to 1,000"),
    case("bench --standard {file}", "is a file"),
    case("bench classic/cartpole --uneven", "--uneven measures its own test env: give it without ENV_ID or --standard"),
    case("bench --uneven --standard {empty}", "--uneven measures its own test env"),
    case("bench --training --keep {empty}", "--keep sets the learning section: give --learning DIR too"),
    case("bench --minutes 5 --seeds 2", "--minutes, --seeds set the learning section: give --learning DIR too"),
    case("bench --learning {empty} --minutes 31", "'--minutes': 31.0 is not in the range 0<x<=30"),
    case("bench --learning {empty} --seeds 0", "give an integer from 1 to 20"),
    case("bench --learning {empty} --standard {empty}", "--learning is a run of its own: give it without ENV_ID"),
    case("bench classic/cartpole --placement spread", "--placement needs --backend ray"),
    case("bench --backend ray", "give an ENV_ID with --backend ray, or --cluster DIR without one"),
    case("bench classic/cartpole --cluster {empty}", "give an ENV_ID with --backend ray, or --cluster DIR without one"),
    case("bench classic/cartpole --backend ray --placement pack", "--placement places the workers on your cluster"),
    case("bench classic/cartpole --backend serial", "'serial' is not 'ray'"),
    # autotune: fails before measuring anything (a kwarg the env refuses: at the first build)
    case("autotune", "Missing argument 'ENV_ID' (see `puffer autotune --help`)"),
    case("autotune classic/cartpol", "unknown environment 'classic/cartpol'. Did you mean: classic/cartpole?"),
    case("autotune broken/anything", "plugin 'broken' failed to import (puffer_plugin_broken): ModuleNotFoundError"),
    case("autotune classic/cartpole --num-envs 0", "'--num-envs': 0 is out of range: give an integer from 1 to 65,536"),
    case("autotune classic/cartpole --seconds 0", "'--seconds': 0.0 is not in the range 1<=x<=3600"),
    case("autotune classic/cartpole --seconds 1e9", "'--seconds': 1000000000.0 is not in the range 1<=x<=3600"),
    case("autotune classic/cartpole --seconds soon", "'soon' is not a valid float range"),
    case("autotune classic/cartpole --kwarg nonsense", "'nonsense' is not KEY=VALUE"),
    case("autotune classic/cartpole --seconds 1 --kwarg foo=1", "classic/cartpole does not take kwarg foo"),
    case("autotune classic/cartpole --ray-address auto", "--ray-address needs --backend ray"),
    case("autotune classic/cartpole --backend serial", "'serial' is not one of 'multiprocessing', 'ray'"),
    # check
    case("check classic/cartpol", "Did you mean: classic/cartpole?"),
    case("check nope", "no plugin or env named 'nope'"),
    case("check classic/cartpole --steps 0", "'--steps': 0 is out of range"),
    # new-plugin
    case("new-plugin Bad!Name {missing}", "plugin name 'Bad!Name' is not valid"),
    case("new-plugin fine {file}", "is a file"),
    case("new-plugin fine {full}", "--force"),
    # train: fails before torch is imported, except the kwargs the env itself refuses
    case("train", "give an ENV_ID (e.g. classic/cartpole), env = ID in --config, or --resume DIR"),
    case("train classic/cartpol", "Did you mean: classic/cartpole?"),
    case("train broken/anything", "plugin 'broken' did not load"),
    case("train classic/cartpole --steps 0", "'--steps': 0 is out of range"),
    case("train classic/cartpole --seed -1", "'--seed': -1 is out of range"),
    case("train classic/cartpole --no-auto-resume", "--no-auto-resume goes with --detach"),
    case("train classic/cartpole --num-envs 70000", "give an integer from 1 to 65,536"),
    case("train classic/cartpole --set nope=1", "unknown PPO setting 'nope'"),
    case("train classic/cartpole --set lr=0.1", "unknown PPO setting 'lr' (did you mean learning_rate?)"),
    case("train classic/cartpole --set n_steps=8", "unknown PPO setting 'n_steps' (did you mean rollout_steps?)"),
    case("train classic/cartpole --set entcoef=0", "unknown PPO setting 'entcoef' (did you mean ent_coef?)"),
    case("train classic/cartpole --set learning_rate=-1", "learning_rate must be a number in (0, 10], got -1"),
    case("train classic/cartpole --set ent_coef=nan", "ent_coef must be a number in [0, 100], got 'nan'"),
    case("train classic/cartpole --overwrite", "--overwrite replaces the --record file; give --record PATH"),
    case("train classic/cartpole --set nokey", "'nokey' is not KEY=VALUE"),
    case("train classic/cartpole --trust-kwargs", "--trust-kwargs and --no-saved-kwargs are about a checkpoint's"),
    case("train --resume {empty} --trust-kwargs --no-saved-kwargs", "--no-saved-kwargs drops them: give one"),
    case("train --resume {missing}", "does not exist"),
    case("train --resume {empty}", "policy.pt does not exist: give the --out directory of a `puffer train` run"),
    case("train classic/cartpole --out {file}", "is a file"),
    case(
        "train classic/cartpole --steps 64 --out {empty}/run --kwarg foo=1",
        # the env is built by the trainer, so where torch is missing that is what is said
        "classic/cartpole does not take kwarg foo" if HAS_TORCH else "puffer train needs torch",
    ),
    case("train classic/cartpole --wandb-group g", "--wandb-entity and --wandb-group go with --wandb PROJECT"),
    case("train classic/cartpole --placement spread", "placement is for the Ray backend: it needs backend='ray'"),
    case("train classic/cartpole --backend ray --ray-address nowhere", "ray_address must be 'auto', 'HOST:PORT'"),
    case("train classic/cartpole --backend ray --placement far", "'far' is not one of 'spread', 'pack'"),
    # sweep: every spec, setting and env id is checked before optuna or torch is imported
    case("sweep", "Missing argument 'ENV_ID' (see `puffer sweep --help`)"),
    case("sweep classic/cartpole --steps 64 --param ent_coef=0:1", "Missing option '--trials'"),
    case("sweep classic/cartpole --trials 0 --steps 64 --param ent_coef=0:1", "'--trials': 0 is out of range"),
    case("sweep classic/cartpol --trials 1 --steps 64 --param ent_coef=0:1", "Did you mean: classic/cartpole?"),
    case("sweep classic/cartpole --trials 1 --steps 64 --param nope=0:1", "PPO has no setting 'nope'"),
    case("sweep classic/cartpole --trials 1 --steps 64 --param ent_coef=1:0", "low 1.0 is not below high 0.0"),
    case("sweep classic/cartpole --trials 1 --steps 64 --param ent_coef=0:1 --out {file}", "is a file"),
    case("sweep classic/cartpole --trials 1 --steps 64 --param ent_coef=0:1 --set gamma=2", "gamma must be a number"),
    case("sweep classic/cartpole --trials 1 --steps 64 --param ent_coef=0:1 --set steps=9", "give them there"),
    # eval
    case("eval", "Missing argument 'DIR'"),
    case("eval {missing}", "does not exist: give the --out directory of a `puffer train` run"),
    case("eval {empty}", "policy.pt does not exist"),
    case("eval {empty} --episodes 0", "'--episodes': 0 is out of range"),
    case("eval {empty} --seed -3", "'--seed': -3 is out of range"),
    case("eval {empty} --kwarg nokey", "'nokey' is not KEY=VALUE"),
    case("eval {empty} --no-saved-kwargs --trust-kwargs", "--no-saved-kwargs drops them: give one"),
    # matrix (never against compat_matrix/: a matrix run may be writing there)
    case("matrix bogus", "No such command 'bogus' (see `puffer matrix --help`)"),
    case("matrix show --out {empty}", "no results in"),
    case("matrix show --out {file}", "is a file"),
    case("matrix render --out {empty}", "no results in"),
    case("matrix render --out {file}", "is a file"),
    case("matrix render extra", "Got unexpected extra argument (extra)"),
    case("matrix run --jobs 0 --out {empty}", "'--jobs' / '-j': 0 is out of range"),
    case("matrix run --timeout 0 --out {empty}", "'--timeout': 0.0 is not in the range"),
    case("matrix run --plugins-dir {missing} --out {empty}", "does not exist"),
    case("matrix run --plugin nope --dry-run --out {empty}", "no plugin named 'nope'"),
    case("matrix run --python abc --dry-run --out {empty}", "--python 'abc'"),
    case("matrix run --index file:///nowhere --dry-run --out {empty}", "--index only tells --discover"),
    case("matrix discover --timeout 0 --out {empty}", "'--timeout': 0.0 is not in the range"),
    case("matrix discover --index ftp://127.0.0.1/simple --dry-run --out {empty}", "is not an http(s):// or file://"),
    case("matrix discover --index file:///nowhere --dry-run --out {empty}", "/nowhere is not a folder"),
    # tank (each fails before writing a file or reaching a Docker engine)
    case("tank bogus", "No such command 'bogus' (see `puffer tank --help`)"),
    case("tank render --constraints {empty} --output -", "is a directory"),
    case("tank render --constraints {missing} --output -", "does not exist"),
    case("tank render --output {empty}", "is a directory"),
    case("tank render --plugins nope --output -", "no plugin named 'nope'"),
    case("tank build --ca-cert {missing}", "does not exist"),
    case("tank build --stage nope", "'nope' is not one of 'base', 'envs', 'final', 'all'"),
    case("tank build --build-arg nokey", "'nokey' is not KEY=VALUE"),
    case("tank build --torch torch==2.5 --no-torch", "give --torch REQUIREMENT or --no-torch, not both"),
    case("tank build --tag BAD", "--tag 'BAD' is not an image reference"),
    case("tank build --tag=--help", "--tag '--help' starts with '-'"),
    # tank shell/run/lock (arguments are checked before the docker client and the engine;
    # DOCKER_HOST names no engine, so the rest is the one-line no-engine error, exit 2)
    case("tank shell", "puffer tank shell needs a terminal (stdin is not a TTY)"),
    case("tank shell --gpus some", "'some' is not one of 'auto', 'all', 'none'"),
    case("tank run", "give the command to run after --, e.g. puffer tank run -- puffer envs"),
    case("tank run --user root -- true", "--user 'root' is not UID:GID: give numbers, e.g. --user 1000:1000"),
    case("tank run --mount {missing} -- true", "no such folder; give an existing folder"),
    case("tank run --mount {file} -- true", "is a file, not a folder"),
    case("tank run --shm-size lots -- true", "--shm-size 'lots' is not a size"),
    case("tank run --env NOVALUE -- true", "--env 'NOVALUE' is not KEY=VALUE"),
    case("tank run -- true", "no Docker engine answered at unix://"),
    case("tank lock", "Missing argument 'IMAGE' (see `puffer tank lock --help`)"),
    case("tank lock puffertank:latest", "no Docker engine answered at unix://"),
    case("tank build --lock {missing} --network host", "no such file; write one with puffer tank lock IMAGE > FILE"),
    case("tank build --lock {file}", "--lock needs --network host"),
    case("tank login --bogus", "No such option '--bogus' (see `puffer tank login --help`)"),
    case("tank login -c", "Option '-c' requires an argument"),
    case("tank push", "Missing option '--registry' (see `puffer tank push --help`)"),
    case("tank push --registry http://127.0.0.1:5000/pt", "--registry 'http://127.0.0.1:5000/pt': no scheme"),
    case("tank push --registry 127.0.0.1:5000/pt", "no Docker engine answered at unix://"),
    case("tank pull --registry 127.0.0.1:5000/pt:v1", "names a tag ('v1')"),
    case("tank pull --registry 127.0.0.1:5000/pt --lock abc", "--lock 'abc' is not a lock digest"),
    case("tank pull --registry 127.0.0.1:5000/pt --tag Bad", "a pull by tag is unverified and gets no local name"),
    case("tank pull 127.0.0.1:5000/pt@sha256:" + "a" * 64 + " --tag Bad", "--tag 'Bad' is not an image reference"),
    case("tank pull --pins {missing}", "does not exist"),
    case("tank pull --pins {file}", "is not a pins file: not JSON"),
    case("tank build --from-registry 127.0.0.1:5000/PT", "'PT' has upper case letters"),
    case("tank build --from-registry 127.0.0.1:5000/pt", "--from-registry REG and --pins FILE go together"),
    case("tank login --new ../x", "--new '../x' is not a container name"),
    # runs (a registry of this test's own, empty)
    case("runs stop {empty}", "is not one of your runs on this box"),
    case("runs stop {missing}", "does not exist"),
    case("runs resume", "give a run's DIR or --interrupted"),
    case("runs resume --auto", "give a run's DIR or --interrupted"),
    case("runs resume --interrupted --auto {empty}", "give a run's DIR or --interrupted"),
    case("runs --bogus", "No such option '--bogus'"),
    case("runs rm", "Missing argument 'DIR...'"),
    case("runs rm {empty}", "is not one of your runs on this box"),
    case("runs prune --bogus", "No such option '--bogus'"),
    # fleet (the inventory is checked before Ansible is asked)
    case("fleet bogus", "No such command 'bogus' (see `puffer fleet --help`)"),
    case("fleet status", "Missing option '-i' / '--inventory'"),
    case("fleet status -i {missing}", "does not exist"),
    case("fleet status -i {empty}", "is a directory"),
    case("fleet ray -i {missing} --user bob", "does not exist"),
    case("fleet ray", "Missing option '-i' / '--inventory'"),
    case("fleet facts --bogus", "No such option '--bogus'"),
    case("tank compile --constraints {missing}", "the common constraint set"),
    case("tank compile --output {empty}", "is a directory"),
]


def command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and subcommand of ``group``, as the words that name it."""
    paths = []
    for name, command in group.commands.items():
        paths.append((*prefix, name))
        if isinstance(command, click.Group):
            paths += command_paths(command, (*prefix, name))
    return paths


def command_of(args: tuple[str, ...]) -> tuple[str, ...]:
    """The command path ``args`` invoke (the words that are command names, from the top)."""
    path: list[str] = []
    command: click.Command = cli
    for word in args:
        if not isinstance(command, click.Group) or word not in command.commands:
            break
        command = command.commands[word]
        path.append(word)
    return tuple(path)


def test_every_command_has_bad_argument_cases():
    covered = {command_of(c.args) for c in CASES}
    missing = [" ".join(path) for path in command_paths(cli) if path not in covered]
    assert not missing, f"add bad-argument cases for: {', '.join(missing)}"
    assert () in covered  # and the top level


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    base = tmp_path_factory.mktemp("places")
    (base / "empty").mkdir()
    (base / "file").write_text("not a folder\n")
    (base / "full").mkdir()
    (base / "full" / "something.txt").write_text("x\n")
    return {"empty": base / "empty", "file": base / "file", "full": base / "full", "missing": base / "missing"}


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory):
    """The environment of every run: a site with a good plugin and one that raises at import."""
    site = tmp_path_factory.mktemp("site")
    write_plugin(site, "good", GOOD)
    write_plugin(site, "broken", BROKEN_IMPORT)
    env = {key: value for key, value in os.environ.items() if key != "PUFFER_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    env["DOCKER_HOST"] = f"unix://{site}/no-engine.sock"  # nothing may reach a real engine
    env["COLUMNS"] = "80"  # one line must not depend on the terminal's width
    return env


def run_puffer(args: tuple[str, ...], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "puffer_core.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=180,
    )


@pytest.fixture(scope="module")
def results(places, plugin_env):
    """Every case's finished process: each forked from one process that has imported the CLI
    (``forked_cli.py``), which saves every case its second of interpreter start-up."""
    argv = [tuple(word.format(**places) for word in c.args) for c in CASES]
    return dict(zip(CASES, run_puffer_many(argv, plugin_env)))


@pytest.mark.parametrize("bad", CASES, ids=[" ".join(c.args) for c in CASES])
def test_bad_arguments_fail_on_one_line(bad, results):
    proc = results[bad]
    lines = proc.stderr.splitlines()
    assert proc.returncode != 0, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: "), proc.stderr
    assert bad.fragment in lines[0], lines[0]


def test_usage_errors_exit_2_and_other_errors_1(results):
    by_line = {" ".join(c.args): proc for c, proc in results.items()}
    assert by_line["run classic/cartpole --steps 0"].returncode == 2  # click's usage error
    assert by_line["run classic/cartpol"].returncode == 1  # an error of Puffer Core


def test_puffer_debug_shows_the_traceback(plugin_env):
    proc = run_puffer(("run", "classic/cartpole", "--kwarg", "foo=1"), {**plugin_env, "PUFFER_DEBUG": "1"})
    assert proc.returncode != 0
    assert "Traceback (most recent call last)" in proc.stderr
    assert "APIUsageError: classic/cartpole does not take kwarg foo" in proc.stderr


def test_bare_puffer_prints_its_help(plugin_env):
    proc = run_puffer((), plugin_env)
    assert "Usage: puffer [OPTIONS] COMMAND [ARGS]..." in proc.stdout + proc.stderr
    assert "Commands:" in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
