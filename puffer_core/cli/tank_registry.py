"""``puffer tank push`` and ``puffer tank pull``: PufferTank images to and from a registry.

    puffer tank push [IMAGE] --registry HOST[:PORT]/NAME [--json]
    puffer tank pull --registry HOST[:PORT]/NAME [--lock DIGEST] [--tag LOCAL] [--json]

Registered on the ``puffer tank`` group by :mod:`puffer_core.cli.tank` (which holds
``build --from-registry``); what the commands do is :mod:`puffer_core.tank.push` and
:mod:`puffer_core.tank.pull`.
"""

from __future__ import annotations

import json

import click

from puffer_core.cli.tables import output_console
from puffer_core.tank.container import DEFAULT_IMAGE
from puffer_core.tank.engine import connect
from puffer_core.tank.pull import pull_image
from puffer_core.tank.push import push_image
from puffer_core.tank.registry import parse_digest, parse_local_tag, parse_registry

__all__ = ["REGISTRY_HELP", "pull_cmd", "push_cmd", "transfer_printer"]

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


@click.command("push")
@click.argument("image", default=DEFAULT_IMAGE)
@click.option("--registry", "registry", required=True, metavar="HOST[:PORT]/NAME", help=REGISTRY_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print {registry, image, digest, tags, layers, seconds} as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="Print the tags pushed only, not each layer.")
def push_cmd(image: str, registry: str, as_json: bool, quiet: bool) -> None:
    """Push IMAGE (default puffertank:latest) and the two layers it was built on to a registry.

    The final layer is tagged lock-<sha256>, its lock digest (`puffer tank lock IMAGE`), so
    the tag says what is inside; the layers under it lock-<sha256>-envs and -base. Each
    layer is also tagged inputs-<sha256>, what it was built from (for `puffer tank build
    --from-registry`), and latest, latest-envs and latest-base move to them last. Uses the
    credentials `docker login HOST` stored. Another box: puffer tank pull --registry REG
    --lock <sha256>.
    """
    ref = parse_registry(registry)  # a typo is one line before the engine is asked
    result = push_image(connect(), image, ref, transfer_printer(quiet or as_json))
    if as_json:
        click.echo(json.dumps(result.record(), indent=2))
        return
    console.print(
        f"pushed {image} to {ref} as lock-{result.digest} (and -envs, -base, latest) in {result.seconds:.1f} s; "
        f"elsewhere: puffer tank pull --registry {ref} --lock {result.digest}",
        soft_wrap=True,
    )


@click.command("pull")
@click.option("--registry", "registry", required=True, metavar="HOST[:PORT]/NAME", help=REGISTRY_HELP)
@click.option(
    "--lock",
    "lock",
    metavar="DIGEST",
    help="The lock digest to pull (tag lock-DIGEST, as `puffer tank push` and `puffer tank lock` print it); "
    "default: the tag latest.",
)
@click.option(
    "--tag",
    "local",
    default=DEFAULT_IMAGE,
    show_default=True,
    help="Local name for the image (puffertank:latest is the box's current image: what shell, run and login start).",
)
@click.option("--json", "as_json", is_flag=True, help="Print {registry, pulled, image, id, digest, seconds} as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="Print the result only, not each layer.")
def pull_cmd(registry: str, lock: str | None, local: str, as_json: bool, quiet: bool) -> None:
    """Pull a PufferTank image from a registry, check what it holds, and tag it --tag.

    The image's lock digest is computed again from its own lock label and must be the one
    its tag names (lock-DIGEST): a mismatch is refused and the image removed from the
    engine. Without --lock the tag latest is pulled and the digest read is printed, to pin
    with --lock next time. After it, `puffer tank lock TAG` prints that digest on this box
    as on the box that pushed it.
    """
    ref = parse_registry(registry)
    expected = None if lock is None else parse_digest(lock)
    parse_local_tag(local)
    result = pull_image(connect(), ref, expected, local, transfer_printer(quiet or as_json))
    if as_json:
        click.echo(json.dumps(result.record(), indent=2))
        return
    pinned = "" if expected else f"; pin it: puffer tank pull --registry {ref} --lock {result.digest}"
    console.print(
        f"pulled {result.pulled} as {result.image} ({result.id[:19]}) in {result.seconds:.1f} s; "
        f"lock sha256 {result.digest} (checked){pinned}",
        soft_wrap=True,
    )
