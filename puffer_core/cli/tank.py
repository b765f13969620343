"""``puffer tank``: render and build PufferTank's layers, run one's own container, read locks.

    puffer tank render [--plugins a,b | --without dmlab] [--constraints PATH | --no-constraints]
                       [--requirements PATH] [--output PATH] [--check]
    puffer tank compile [--constraints PATH] [--output PATH] [--upgrade] [--check]
    puffer tank build  [--stage base|envs|final|all] [--tag NAME] [--base-image IMAGE]
                       [--torch REQ | --no-torch] [--ca-cert PATH] [--network host] [--lock FILE] ...
    puffer tank shell  [--image TAG] [--mount DIR] [--user UID:GID] [--gpus auto|all|none] [--cap-add CAP] ...
    puffer tank run    [same options] -- CMD...
    puffer tank lock   IMAGE [--json]
    puffer tank build  --from-registry HOST[:PORT]/NAME --pins FILE ...
    puffer tank push   [IMAGE] --registry HOST[:PORT]/NAME [--pins FILE] [--json]   (puffer_core.cli.tank_registry)
    puffer tank pull   REPO@sha256:DIGEST | --pins FILE [--tag LOCAL] [--json]
    puffer tank pull   --registry HOST[:PORT]/NAME [--lock DIGEST] [--json]         (a tag, unverified)

Exit codes: 0 done, 1 a user error (bad selection, missing constraints, failed build), 2 no
Docker engine (or no docker SDK, or no docker client) to build or run with; ``run`` exits
with the command's own exit code. The terminal side only: what the commands do is
:mod:`puffer_core.tank`.
"""

from __future__ import annotations

import difflib
import os
import pathlib
import sys

import click
from rich.markup import escape
from rich.table import Table

from puffer_core.atomic import write_atomically
from puffer_core.cli.errors import MessageGroup
from puffer_core.cli.options import pair_texts
from puffer_core.cli.tables import output_console, print_table
from puffer_core.cli.tank_registry import REGISTRY_HELP, lock_cmd, pull_cmd, push_cmd
from puffer_core.errors import PufferError
from puffer_core.tank import container
from puffer_core.tank.box import login
from puffer_core.tank.engine import connect, engine_url
from puffer_core.tank.errors import BuildError, TankError
from puffer_core.tank.image.build import Printer, StageResult, build
from puffer_core.tank.image.hashlock import (
    COMPILE_COMMAND,
    DEFAULT_HASHLOCK,
    compile_hashlock,
    compile_roots,
    load_hashlock,
    parse_hashlock,
    roots_drift,
)
from puffer_core.tank.image.plan import BuildRequest, plan_build
from puffer_core.tank.image.render import (
    DEFAULT_CONSTRAINTS,
    DEFAULT_OUTPUT,
    Constraints,
    find_root,
    load_constraints,
)
from puffer_core.tank.image.selection import installed_layers, select, shown_path
from puffer_core.tank.registry.transfer import check_registry

__all__ = ["tank"]

console = output_console(stderr=True, highlight=False)


class TankGroup(MessageGroup):
    """Errors as messages with the error's exit code (2: no engine) and a build log's tail."""

    def report(self, exc: PufferError) -> None:
        super().report(exc)
        if isinstance(exc, BuildError) and exc.log_tail:
            console.print("last lines of the build log:", style="dim")
            for line in exc.log_tail[-15:]:
                console.print(f"  {line}", markup=False, style="dim")


def _print_warnings(warnings: list[str]) -> None:
    for warning in warnings:
        console.print(f"[yellow]warning:[/] {warning}", soft_wrap=True)


@click.group("tank", cls=TankGroup, context_settings={"help_option_names": ["-h", "--help"]})
def tank() -> None:
    """PufferTank, the 3-layer Docker image: render the environment layer, build the layers.

    Layer 1 tank/Dockerfile.base (OS, Python 3.11, PyTorch, tools), layer 2
    tank/Dockerfile.envs (GENERATED from every plugin's DockerLayer and
    compat_matrix/constraints-common.txt), layer 3 tank/Dockerfile (puffer-core, plugins,
    shell, editor, entrypoint). Run from the puffer-core checkout.
    """


PLUGINS_HELP = "Only these plugins (comma list; default: every installed plugin)."
WITHOUT_HELP = "Leave these plugins out (comma list), e.g. --without dmlab."
CONSTRAINTS_HELP = f"Constraint set to pin pip installs with (default: {DEFAULT_CONSTRAINTS})."
NO_CONSTRAINTS_HELP = "Render without a constraint set (pip installs unpinned, not hash-checked)."
REQUIREMENTS_HELP = f"Hash-locked set layer 2 installs with --require-hashes (default: {DEFAULT_HASHLOCK})."
OUTPUT_HELP = f"Where to write (default: {DEFAULT_OUTPUT}; - for stdout)."
#: A missing file gets load_constraints' own message (how to produce it); a folder or an
#: unreadable file is refused by click.
CONSTRAINTS_FILE = click.Path(dir_okay=False, readable=True, path_type=pathlib.Path)


@tank.command("render")
@click.option("--plugins", help=PLUGINS_HELP)
@click.option("--without", help=WITHOUT_HELP)
@click.option("--constraints", "constraints_path", type=CONSTRAINTS_FILE, help=CONSTRAINTS_HELP)
@click.option("--no-constraints", is_flag=True, help=NO_CONSTRAINTS_HELP)
@click.option("--requirements", "requirements_path", type=CONSTRAINTS_FILE, help=REQUIREMENTS_HELP)
@click.option("--output", "-o", "output", type=click.Path(dir_okay=False, path_type=pathlib.Path), help=OUTPUT_HELP)
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when the output file is not what would be rendered.")
def render_cmd(
    plugins: str | None,
    without: str | None,
    constraints_path: pathlib.Path | None,
    no_constraints: bool,
    requirements_path: pathlib.Path | None,
    output: pathlib.Path | None,
    check: bool,
) -> None:
    """Render tank/Dockerfile.envs from the plugins' DockerLayers and the common constraint set.

    Reads the hash-locked set (tank/requirements-envs.txt) and names its sha256; asks no
    engine and no index, so the same inputs render the same bytes.
    """
    root = find_root()
    target = root / DEFAULT_OUTPUT if output is None else output
    shown_output = "-" if str(output) == "-" else shown_path(target, root)
    selection = select(
        root, plugins, without, constraints_path, no_constraints, output=shown_output,
        requirements_path=requirements_path,
    )  # fmt: skip
    _print_warnings(selection.warnings)  # once the selection stands: an error above is the one line printed
    text = selection.render()
    if shown_output == "-":
        click.echo(text, nl=False)
        return
    if check:
        current = target.read_text(encoding="utf-8") if target.is_file() else ""
        if current == text:
            console.print(f"{shown_output} is up to date ({', '.join(selection.layers)})")
            return
        diff = difflib.unified_diff(
            current.splitlines(keepends=True), text.splitlines(keepends=True), shown_output, "rendered"
        )
        sys.stderr.writelines(list(diff)[:80])
        console.print(f"[bold red]{shown_output} is out of date[/]: regenerate with {selection.command}")
        sys.exit(1)
    target.parent.mkdir(parents=True, exist_ok=True)
    unchanged = target.is_file() and target.read_text(encoding="utf-8") == text
    if not unchanged:
        write_atomically(target, text.encode("utf-8"))
    hashlock, constraints = selection.hashlock, selection.constraints
    hashed = f"; hash-locked by {hashlock.path} ({len(hashlock.entries)} packages)" if hashlock else "; NOT hash-locked"
    console.print(
        f"{'unchanged' if unchanged else 'wrote'} {shown_output}: plugins {', '.join(selection.layers)}; "
        f"constraints {constraints.source or 'none'} ({len(constraints.lines)} pins){hashed}"
    )


@tank.command("compile")
@click.option("--constraints", "constraints_path", type=CONSTRAINTS_FILE, help=CONSTRAINTS_HELP)
@click.option(
    "--output",
    "-o",
    "output",
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    help=f"Where to write (default: {DEFAULT_HASHLOCK}).",
)
@click.option("--upgrade", is_flag=True, help="Move every unpinned package to its newest version (default: keep).")
@click.option("--check", is_flag=True, help="Offline: exit 1 when the file's roots no longer answer the checkout.")
def compile_cmd(constraints_path: pathlib.Path | None, output: pathlib.Path | None, upgrade: bool, check: bool) -> None:
    """Compile the hash-locked set layer 2 installs: every package with the sha256 of its files.

    Roots: the common constraint set's pins, the dependencies and build backends of
    puffer-core and of every plugin in plugins/, and the plugins' DockerLayer.pip;
    resolved by `uv pip compile --generate-hashes` for CPython 3.11 on x86_64 Linux under
    the constraint set. Needs the package index (--check does not). Versions already in
    the file stay unless --upgrade. Then `puffer tank render` (nox -s tank does both).
    """
    root = find_root()
    constraints_path = root / DEFAULT_CONSTRAINTS if constraints_path is None else constraints_path
    shown = shown_path(constraints_path, root)
    constraints = load_constraints(constraints_path, shown)
    target = root / DEFAULT_HASHLOCK if output is None else output
    shown_target = shown_path(target, root)
    layers, warnings = installed_layers()
    _print_warnings(warnings)
    roots, local = compile_roots(root, constraints.lines, layers)
    previous = target.read_text(encoding="utf-8") if target.is_file() else None
    if check:
        _check_hashlock(target, shown_target, roots, constraints, layers, local)
        return
    text = compile_hashlock(
        roots, constraints_path.read_text(encoding="utf-8"), shown, previous=previous, upgrade=upgrade
    )
    hashlock = parse_hashlock(text, shown_target)
    hashlock.check_covers(constraints.lines, layers, local, shown)
    if text == previous:
        console.print(f"unchanged {shown_target}: {len(hashlock.entries)} packages, hash-locked", soft_wrap=True)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(target, text.encode("utf-8"))
    console.print(
        f"wrote {shown_target}: {len(hashlock.entries)} packages from {len(roots)} roots, hash-locked; "
        "now render: puffer tank render",
        soft_wrap=True,
    )


def _check_hashlock(
    target: pathlib.Path, shown: str, roots: list[str], constraints: Constraints, layers: dict, local: set[str]
) -> None:
    """`compile --check`: the file exists, lists the checkout's roots, and pins the constraint set."""
    hashlock = load_hashlock(target, shown)
    drift = roots_drift(hashlock, roots)
    if drift is not None:
        console.print(
            f"[bold red]{shown} is out of date[/] ({drift}): recompile with {COMPILE_COMMAND}", soft_wrap=True
        )
        sys.exit(1)
    hashlock.check_covers(constraints.lines, layers, local, constraints.source or "")
    console.print(f"{shown} is up to date ({len(hashlock.entries)} packages from {len(roots)} roots)", soft_wrap=True)


@tank.command("build", context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option(
    "--stage",
    type=click.Choice(["base", "envs", "final", "all"]),
    default="all",
    show_default=True,
    help="Which layer to build; all = base, then envs, then final.",
)
@click.option(
    "--tag",
    default="puffertank",
    show_default=True,
    help="Image name: NAME gives NAME:base, NAME:envs, NAME:latest; NAME:T gives NAME:T-base, NAME:T-envs, NAME:T.",
)
@click.option(
    "--base-image",
    help="Layer 1's FROM (default in tank/Dockerfile.base: NVIDIA's CUDA runtime image, by digest). A tag is "
    "resolved on the engine to its registry digest, or to its image id for a local image, before the build.",
)
@click.option("--torch", help="PyTorch requirement(s) for layer 1, e.g. 'torch==2.5.1'; '' skips PyTorch.")
@click.option("--no-torch", is_flag=True, help="Skip PyTorch in layer 1 (same as --torch '').")
@click.option(
    "--ca-cert",
    type=click.Path(exists=True, dir_okay=False, readable=True, path_type=pathlib.Path),
    help="CA bundle for apt and pip during the build (TLS-intercepting proxy); never stored in the image. "
    "Needs --network host.",
)
@click.option("--network", help="Network of the build containers, e.g. host (needed where the engine has no bridge).")
@click.option("--plugins", help=PLUGINS_HELP)
@click.option("--without", help=WITHOUT_HELP)
@click.option("--constraints", "constraints_path", type=CONSTRAINTS_FILE, help=CONSTRAINTS_HELP)
@click.option("--no-constraints", is_flag=True, help=NO_CONSTRAINTS_HELP)
@click.option("--requirements", "requirements_path", type=CONSTRAINTS_FILE, help=REQUIREMENTS_HELP)
@click.option("--no-cache", is_flag=True, help="Do not use the engine's layer cache.")
@click.option("--build-arg", "build_args", multiple=True, metavar="KEY=VALUE", help="Extra build argument.")
@click.option(
    "--lock",
    "lock_path",
    type=click.Path(dir_okay=False, path_type=pathlib.Path),
    help="Rebuild under a lock (the output of `puffer tank lock IMAGE`): every pip install of the three layers "
    "resolves to its versions, layer 1's PyTorch step checks every file against the lock's sha256 "
    "(--require-hashes), and layer 1 starts from the base image it records (unless --base-image). "
    "Needs --network host.",
)
@click.option(
    "--from-registry",
    "from_registry",
    metavar="HOST[:PORT]/NAME",
    help="Take each layer that --pins FILE pins for the same inputs (its Dockerfile and files, build arguments, "
    "the layer below) from there, pulled by its digest, instead of building it; any other layer is built. "
    + REGISTRY_HELP,
)
@click.option(
    "--pins",
    "pins_path",
    type=click.Path(exists=True, dir_okay=False, path_type=pathlib.Path),
    help="With --from-registry: the pins file puffer tank push --pins wrote; only the digests it gives are taken.",
)
@click.option("--quiet", "-q", is_flag=True, help="Print the steps only, not their output.")
@click.pass_context
def build_cmd(ctx: click.Context, quiet: bool, build_args: tuple[str, ...], **options: object) -> None:
    """Build PufferTank's layers on the Docker engine at DOCKER_HOST, streaming the build log.

    Each layer starts from an exact image: layer 1 from --base-image resolved to a digest
    (or a local image's id), layers 2 and 3 from the id of the layer below. The final layer
    records every Python package's version and the sha256 of the file it came from
    (/opt/puffertank/lock.txt and the label org.puffer.tank.lock); `puffer tank lock IMAGE`
    prints it.

    A plugin's build stage may take a folder from this machine: --NAME-source DIR (or the
    variable PUFFER_NAME_SOURCE), e.g. --dmlab-source DIR, DeepMind Lab's source at the
    commit the plugin pins. A failed layer's full log is kept in ~/.cache/puffertank/logs.
    """
    request = BuildRequest(**options, build_args=pair_texts(build_args, "--build-arg"), extra_args=tuple(ctx.args))
    plan, selection = plan_build(request, _note)
    client = connect()
    if plan.from_registry is not None:
        check_registry(plan.from_registry)  # before the build: a registry that is not there is the one line printed
    console.print(f"engine: {engine_url()}; stages: {', '.join(plan.stages)}; plugins: {', '.join(selection.layers)}")
    _print_results(build(plan, client, _build_printer(quiet)))


def _note(kind: str, text: str) -> None:
    style = {"dim": "[dim]note: {}[/]", "note": "[yellow]note:[/] {}", "warning": "[yellow]warning:[/] {}"}[kind]
    console.print(style.format(escape(text)), soft_wrap=True)


BUILD_STYLES = {
    "step": "bold cyan",
    "meta": "dim",
    "log": "",
    "note": "yellow",
    "stage": "bold magenta",
    "done": "green",
}


def _build_printer(quiet: bool) -> Printer:
    """The build's lines, styled by kind; ``--quiet`` keeps the steps and notes, not the log."""

    def out(kind: str, line: str) -> None:
        if quiet and kind in ("log", "meta"):
            return
        console.print(line, style=BUILD_STYLES.get(kind, ""), markup=False, soft_wrap=True)

    return out


def _print_results(results: list[StageResult]) -> None:
    table = Table(title="PufferTank")
    for column in ("layer", "image", "seconds", "size"):
        table.add_column(column)
    for result in results:
        seconds = f"{result.seconds:.1f}" + (" (reused)" if result.reused_from else "")
        table.add_row(result.stage, result.tag, seconds, f"{result.size / 1e6:,.0f} MB")
    print_table(console, table)


# -- one's own container --------------------------------------------------------------------


def container_options(command: click.Command) -> click.Command:
    """The options `shell` and `run` share."""
    options = [
        click.option("--image", default=container.DEFAULT_IMAGE, show_default=True, help="The final layer to start."),
        click.option(
            "--mount",
            metavar="DIR",
            help=f"Folder to mount at {container.WORKSPACE} (default: the checkout holding the working folder).",
        ),
        click.option(
            "--user",
            metavar="UID:GID",
            help="Run as this uid:gid (default: yours, so files written in the mount are yours; 0:0 for root).",
        ),
        click.option(
            "--gpus",
            type=click.Choice(container.GPU_MODES),
            default="auto",
            show_default=True,
            help="Pass the GPUs: auto = when the engine has the NVIDIA runtime.",
        ),
        click.option("--network", help="Container network (e.g. host, none; default: the engine's)."),
        click.option(
            "--shm-size",
            default=container.DEFAULT_SHM,
            show_default=True,
            help="Size of /dev/shm, where Ray's object store keeps what it moves (Multiprocessing uses none).",
        ),
        click.option("--env", "-e", "env", multiple=True, metavar="KEY=VALUE", help="Environment variable inside."),
        click.option(
            "--cap-add",
            "cap_add",
            multiple=True,
            metavar="CAP",
            help="Give back one Linux capability (all are dropped; none is needed as your uid), e.g. CHOWN.",
        ),
        click.option("--quiet", "-q", is_flag=True, help="No version banner (PUFFERTANK_QUIET=1), no GPU line."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _start(options: dict, command: tuple[str, ...], tty: bool, kind: str) -> None:
    """Check everything into a request, say whether the GPUs pass, then become ``docker run``."""
    request, client_path, gpus = container.prepare_run(
        container.ContainerOptions(**options), command, tty, kind, find_root
    )
    if not options["quiet"]:
        console.print(gpus.line(), markup=False, highlight=False, soft_wrap=True)
    argv = container.docker_argv(request)
    if os.environ.get("PUFFER_TANK_ECHO"):  # what is about to run, for scripts and bug reports
        console.print(" ".join(argv), markup=False, soft_wrap=True)
    container.exec_docker(client_path, argv)


@tank.command("shell")
@container_options
def shell_cmd(**options) -> None:
    """An interactive shell in the final layer, with the checkout (or --mount DIR) at /workspace.

    Runs as your uid:gid, so files made inside belong to you on the host, with every Linux
    capability dropped and no-new-privileges (--cap-add gives one back); GPUs pass through
    when the engine has the NVIDIA runtime, and a line says whether they did and why. Exit
    the shell (Ctrl-D) to remove the container.
    """
    if not sys.stdin.isatty():
        raise TankError(
            "puffer tank shell needs a terminal (stdin is not a TTY); "
            "to run a command without one: puffer tank run -- CMD"
        )
    _start(options, (), tty=True, kind="shell")


@tank.command("run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@container_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def run_cmd(command: tuple[str, ...], **options) -> None:
    """Run one command in the final layer, as `shell` would start it: puffer tank run -- CMD...

    Output streams as it comes and the command's exit code is this command's. A terminal
    (--tty) is given only when stdin and stdout both are one, so pipes stay clean.
    """
    if not command:
        raise TankError("give the command to run after --, e.g. puffer tank run -- puffer envs")
    if command[0].startswith("-"):
        raise TankError(f"{command[0]!r} is not an option of puffer tank run; put the command after --")
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    _start(options, command, tty=tty, kind="run")


@tank.command("login")
@click.option("--fresh", is_flag=True, help="Replace the container with a new one from the box's image (home kept).")
@click.option(
    "--new", "new", metavar="NAME", help="A second container of yours, puffertank-USER.NAME: made if missing."
)
@click.option(
    "--image", metavar="REF", help=f"Image of a new container: the box's ({login.IMAGE_FILE}) or one the admin allows."
)
@click.option("--list", "list_", is_flag=True, help="List your containers (default is puffertank-USER).")
@click.option("--json", "as_json", is_flag=True, help="With --list: print them as JSON.")
@click.option("--stop", metavar="NAME", help="Stop one of your containers (the next login into it starts it).")
@click.option("--rm", "remove", metavar="NAME", help="Remove one of your containers (your home is kept).")
@click.option("-c", "command", metavar="COMMAND", help="Run COMMAND inside instead of a login shell.")
def login_cmd(
    fresh: bool,
    new: str | None,
    image: str | None,
    list_: bool,
    as_json: bool,
    stop: str | None,
    remove: str | None,
    command: str | None,
) -> None:
    """Land in your own long-lived PufferTank container (puffertank-USER), made on first use.

    A shared box's login shell: `tank/setup-host.sh --user NAME` sets each user's shell to
    puffertank-login (this command). Your home is mounted at the same path, you run as your
    uid:gid with every capability dropped, and every later session (ssh, su -, scp, sftp,
    rsync, an editor's remote server) joins the same container; SSH_ORIGINAL_COMMAND is run
    when no -c is given. You never hold the Docker engine: this calls the box's root-owned
    broker through its one sudo rule (group puffertank). --fresh (also `ssh BOX puffer tank
    login --fresh`) resets everything outside your home.
    """
    words = [*(["--fresh"] if fresh else []), *(["--list"] if list_ else []), *(["--json"] if as_json else [])]
    for option, value in (("--new", new), ("--image", image), ("--stop", stop), ("--rm", remove)):
        words += [option, value] if value is not None else []
    words += ["-c", command] if command is not None else []
    login.login(login.parse_args(words))


tank.add_command(lock_cmd)
tank.add_command(push_cmd)
tank.add_command(pull_cmd)
