"""``puffer tank push``, ``pull`` and ``lock``: PufferTank images to and from a registry, and what is in one.

    puffer tank push [IMAGE] --registry HOST[:PORT]/NAME [--pins FILE] [--json]
    puffer tank pull REPO@sha256:DIGEST | --pins FILE  [--tag LOCAL] [--json]   (verified: by digest)
    puffer tank pull --registry HOST[:PORT]/NAME [--lock DIGEST] [--json]      (unverified: a tag, to look)
    puffer tank lock IMAGE [--json]

Registered on the ``puffer tank`` group by :mod:`puffer_core.cli.tank` (which holds
``build --from-registry``); what the commands do is :mod:`puffer_core.tank.registry.push`,
:mod:`puffer_core.tank.registry.pull` and :mod:`puffer_core.tank.image.lock`.
"""

from __future__ import annotations

import json
import pathlib

import click

from puffer_core.cli.tables import output_console
from puffer_core.tank.box.login import box_image
from puffer_core.tank.box.protocol import DEFAULT_IMAGE
from puffer_core.tank.engine import connect
from puffer_core.tank.errors import TankError
from puffer_core.tank.image.lock import image_lock, lock_base_image, lock_digest, lock_hashes, parse_lock
from puffer_core.tank.registry.pins import write_pins
from puffer_core.tank.registry.plan import plan_pull, plan_push, run_pull
from puffer_core.tank.registry.push import push_image

__all__ = ["REGISTRY_HELP", "lock_cmd", "pull_cmd", "push_cmd", "transfer_printer"]

console = output_console(stderr=True, highlight=False)

REGISTRY_HELP = (
    "The repository: HOST[:PORT]/NAME[/NAME...], lower case, no scheme and no tag, e.g. 127.0.0.1:5000/puffertank "
    "or docker.io/USER/puffertank. Credentials: docker login HOST."
)
STYLES = {"stage": "bold magenta", "meta": "dim", "log": "", "note": "yellow", "done": "green"}


def transfer_printer(quiet: bool = False):
    """The transfer's lines on stderr, styled by kind; ``quiet`` keeps the stages and notes."""

    def out(kind: str, line: str) -> None:
        if quiet and kind in ("log", "meta"):
            return
        console.print(line, style=STYLES.get(kind, ""), markup=False, soft_wrap=True)

    return out


PINS_FILE = click.Path(dir_okay=False, path_type=pathlib.Path)


@click.command("push")
@click.argument("image", default=DEFAULT_IMAGE)
@click.option("--registry", "registry", required=True, metavar="HOST[:PORT]/NAME", help=REGISTRY_HELP)
@click.option(
    "--pins",
    "pins_path",
    type=PINS_FILE,
    help="Write each pushed layer's REPO@sha256:DIGEST (with its image id, inputs and the lock digest) to this "
    "JSON file: what puffer tank pull --pins and build --from-registry --pins trust.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print {registry, image, digest, pins, tags, layers, seconds} as JSON."
)
@click.option("--quiet", "-q", is_flag=True, help="Print each layer's digest only, not its progress.")
def push_cmd(image: str, registry: str, pins_path: pathlib.Path | None, as_json: bool, quiet: bool) -> None:
    """Push IMAGE (default puffertank:latest) and the two layers it was built on; print each as REPO@sha256:….

    The digests are what another box trusts: the engine checks every byte it pulls by
    digest. Give them on (puffer tank pull REPO@sha256:…) or write them with --pins FILE
    and hand that file on (puffer tank pull --pins FILE). The tags pushed beside them are
    for people browsing the registry: lock-<sha256> (the lock digest, `puffer tank lock
    IMAGE`), lock-<sha256>-envs and -base, and latest, latest-envs and latest-base last.
    Uses the credentials `docker login HOST` stored.
    """
    plan = plan_push(image, registry)
    result = push_image(connect(), plan.image, plan.registry, transfer_printer(quiet or as_json))
    ref = plan.registry
    assert result.pins is not None
    if pins_path is not None:
        write_pins(pins_path, result.pins)
    if as_json:
        click.echo(json.dumps(result.record(), indent=2))
        return
    final = result.pins.layers["final"].ref
    elsewhere = f"puffer tank pull --pins {pins_path}" if pins_path is not None else f"puffer tank pull {final}"
    written = f"; pins written to {pins_path}" if pins_path is not None else ""
    console.print(
        f"pushed {image} to {ref} in {result.seconds:.1f} s: {final} (lock sha256 {result.digest}){written}; "
        f"elsewhere: {elsewhere}",
        soft_wrap=True,
    )


@click.command("pull")
@click.argument("image", required=False, metavar="[REPO@sha256:DIGEST]")
@click.option(
    "--pins",
    "pins_path",
    type=click.Path(exists=True, dir_okay=False, path_type=pathlib.Path),
    help="Pull the final layer a pins file names (puffer tank push --pins), by its digest; its image id and "
    "lock digest are checked too.",
)
@click.option(
    "--registry",
    "registry",
    metavar="HOST[:PORT]/NAME",
    help="Pull a tag to look at it, UNVERIFIED: latest, or lock-DIGEST with --lock. It keeps the registry's name "
    "only and never becomes the box's image. " + REGISTRY_HELP,
)
@click.option(
    "--lock",
    "lock",
    metavar="DIGEST",
    help="With --registry: the tag lock-DIGEST instead of latest (its lock label must say that digest).",
)
@click.option(
    "--tag",
    "local",
    help=f"Local name for an image pulled by digest (default {DEFAULT_IMAGE}, the box's current image: what "
    "shell, run and login start).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print {registry, pulled, image, id, digest, verified, served, seconds}."
)
@click.option("--quiet", "-q", is_flag=True, help="Print the result only, not each layer.")
def pull_cmd(
    image: str | None,
    pins_path: pathlib.Path | None,
    registry: str | None,
    lock: str | None,
    local: str | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Pull a PufferTank image by its digest and make it --tag (default: the box's image).

    REPO@sha256:DIGEST, as `puffer tank push` prints it, or --pins FILE: the engine checks
    every byte it pulls against the digest, so what arrives is what was pushed. A pull by
    tag (--registry REG [--lock DIGEST]) only lets you look: a tag names whatever was
    pushed to it last and a label is text anyone who can push writes, so it says
    UNVERIFIED, keeps the registry's name, and never becomes the box's image.
    """
    plan = plan_pull(image, pins_path, registry, lock, local)
    result = run_pull(plan, connect(), transfer_printer(quiet or as_json), box_image=_box_image())
    if as_json:
        click.echo(json.dumps(result.record(), indent=2))
        return
    if result.verified:
        console.print(
            f"pulled {result.pulled} as {result.image} ({result.id[:19]}) in {result.seconds:.1f} s: verified, "
            f"every byte checked against its digest; lock sha256 {result.digest}",
            soft_wrap=True,
        )
        return
    console.print(
        f"pulled {result.pulled} ({result.id[:19]}) in {result.seconds:.1f} s, [bold yellow]unverified[/]: a tag "
        f"names whatever was pushed to it last, and its label's lock sha256 {result.digest} is text anyone who can "
        f"push writes. It keeps the name {result.pulled} and is not this box's image. The registry served "
        f"{result.served or 'no digest'}: if that is the digest puffer tank push printed, pull it by digest "
        "(puffer tank pull REPO@sha256:DIGEST).",
        soft_wrap=True,
        highlight=False,
    )


def _box_image() -> str | None:
    """The box's image as /etc/puffertank/image names it (None when it cannot be read)."""
    try:
        return box_image()
    except TankError:
        return None


@click.command("lock")
@click.argument("image")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print {image, id, python, base_image, sha256, packages, hashes} as JSON.",
)
def lock_cmd(image: str, as_json: bool) -> None:
    """Print IMAGE's lock: every Python package in it, its version and the sha256 of its file.

    Read from the image's label (org.puffer.tank.lock), written by `puffer tank build`. A
    package pip installed from a file carries --hash=sha256:... (the file's digest, from
    pip's install report); one installed from the checkout says so. Equal sha256 digests of
    two locks mean equal environments, bytes included. Rebuild: puffer tank build --lock FILE.
    """
    text, found = image_lock(connect(), image)
    packages = parse_lock(text, f"the lock of {image}")
    hashes = lock_hashes(text)
    digest = lock_digest(packages, hashes)
    if as_json:
        python = next((line.split()[-1] for line in text.splitlines() if line.startswith("# python ")), None)
        record = {
            "image": image,
            "id": found.id,
            "python": python,
            "base_image": lock_base_image(text),
            "sha256": digest,
            "packages": packages,
            "hashes": hashes,
        }
        click.echo(json.dumps(record, indent=2))
        return
    click.echo(text, nl=not text.endswith("\n"))
    console.print(
        f"{image} ({found.short_id}): {len(packages)} packages, {len(hashes)} with the sha256 of their file; "
        f"lock sha256 {digest}",
        highlight=False,
        soft_wrap=True,
    )
