"""Build PufferTank's three layers in order (base → envs → final) through the docker SDK, log streamed.

Every layer starts from exact bytes: layer 1 from ``--base-image`` resolved to a digest
(:mod:`~puffer_core.tank.image.base_image`), layers 2 and 3 from the image *id* of the layer
below, passed as ``BASE``. Each layer is sent only the files its Dockerfile copies
(:mod:`~puffer_core.tank.image.build_context`). What comes from this machine at build time
(pip's index settings, proxies: :mod:`~puffer_core.tank.image.build_args`; the CA bundle and a
lock served on the loopback: :mod:`~puffer_core.tank.image.file_server`) never enters committed
text. The final layer's lock is copied into its label (what ``puffer tank lock`` reads).
Each layer is labelled with what it was built from (:mod:`~puffer_core.tank.image.inputs`) and
the id of the layer below; ``--from-registry REG --pins FILE`` takes a pushed layer that
the pins file pins for the same inputs, pulled by its digest, instead of building it
(:mod:`~puffer_core.tank.registry.pull`).
"""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from puffer_core.specs.declarations import DockerLayer
from puffer_core.tank.errors import BuildError, TankError
from puffer_core.tank.image.base_image import resolve_base_image
from puffer_core.tank.image.build_context import DOCKERFILES, layer_context
from puffer_core.tank.image.file_server import serve_ca_bundle, serve_files
from puffer_core.tank.image.hashlock import HashLock
from puffer_core.tank.image.inputs import BELOW_LABEL, INPUTS_LABEL, engine_platform, layer_inputs
from puffer_core.tank.image.lock import (
    LOCK_IN_IMAGE,
    BuildLock,
    label_lock,
    lock_digest,
    lock_hashes,
    parse_lock,
    read_lock,
)
from puffer_core.tank.image.render import DEFAULT_COMMAND, Constraints, render_envs
from puffer_core.tank.registry.pins import Pins
from puffer_core.tank.registry.pull import reuse_layer
from puffer_core.tank.registry.refs import RegistryRef, image_reference

__all__ = ["STAGES", "BuildPlan", "Printer", "StageResult", "build", "image_tags"]

STAGES = ("base", "envs", "final")
PLUGINS_LABEL = "org.puffer.tank.plugins"
#: What to build first when a layer's base is not on the engine.
BUILD_FIRST = {
    "base": "build it first: puffer tank build --stage base",
    "envs": "build it first: puffer tank build --stage envs",
}

#: ``out(kind, line)``: kind is ``step``, ``meta``, ``log``, ``note``, ``stage`` or ``done``.
Printer = Callable[[str, str], None]


def image_tags(tag: str) -> dict[str, str]:
    """``puffertank`` → base/envs/latest tags; ``name:v1`` → name:v1-base, name:v1-envs, name:v1."""
    ref = image_reference(tag, "--tag")
    name, version = ref.name, ref.tag or ""
    if ref.digest is not None or len(version) > 123:  # room for -base and -envs
        raise TankError(f"--tag {tag!r} is not an image name to build (NAME[:TAG], e.g. puffertank or puffertank:dev)")
    if version:
        return {"base": f"{name}:{version}-base", "envs": f"{name}:{version}-envs", "final": f"{name}:{version}"}
    return {"base": f"{name}:base", "envs": f"{name}:envs", "final": f"{name}:latest"}


#: The build argument (layer 1 only) naming the lock's hash pins: its PyTorch step installs under them.
LOCK_HASHES_ARG = "PUFFER_LOCK_HASHES_URL"


@dataclass
class BuildPlan:
    """What one ``puffer tank build`` builds: which layers, tagged how, from what."""

    root: pathlib.Path
    stages: tuple[str, ...]
    tags: dict[str, str]
    layers: dict[str, DockerLayer]
    constraints: Constraints
    base_image: str | None = None
    torch: str | None = None
    ca_cert: pathlib.Path | None = None
    network: str | None = None
    no_cache: bool = False
    build_args: dict[str, str] = field(default_factory=dict)
    render_command: str = DEFAULT_COMMAND
    #: ``--lock FILE``: what every pip step obeys, and layer 1's hash pins (see lock.py).
    lock: BuildLock | None = None
    #: The hash-locked set layer 2 installs (None: rendered without constraints).
    hashlock: HashLock | None = None
    #: ``--from-registry``: take a layer pushed there with the same inputs instead of building it...
    from_registry: RegistryRef | None = None
    #: ...when ``--pins FILE`` (``from_pins``, its path as given) pins such a layer: by its digest.
    pins: Pins | None = None
    from_pins: str = ""
    #: The build stages' sources, ``{name: folder}`` (:mod:`~puffer_core.tank.image.sources`), sent with layer 2.
    sources: dict[str, pathlib.Path] = field(default_factory=dict)
    #: Where the full log of a layer that failed is written (``<tag>.log``).
    log_dir: pathlib.Path | None = None


@dataclass
class StageResult:
    """One layer built (or reused): its tag, image id, size in bytes and the seconds it took."""

    stage: str
    tag: str
    seconds: float
    image_id: str
    size: int
    #: The registry it was taken from instead of being built (``--from-registry``).
    reused_from: str | None = None


def _plugins_of(client: Any, image: str) -> list[str]:
    labels = client.images.get(image).labels or {}
    return [name for name in labels.get(PLUGINS_LABEL, "").split(",") if name]


def _image_id(client: Any, image: str, hint: str) -> str:
    """The id of ``image`` on the engine: what the next layer is built FROM."""
    import docker

    try:
        return client.images.get(image).id
    except docker.errors.ImageNotFound:
        raise TankError(f"image {image} is not on this engine: {hint}") from None


def _stream(
    client: Any,
    stage: str,
    context: io.BytesIO,
    tag: str,
    buildargs: dict[str, str],
    labels: dict[str, str],
    plan: BuildPlan,
    out: Printer,
) -> str:
    """Run one build, printing its log as it arrives; the image id, or BuildError."""
    image_id = ""
    tail: list[str] = []
    full: list[str] = []
    pending = ""
    stream = client.api.build(
        fileobj=context,
        labels=labels,
        custom_context=True,
        dockerfile=DOCKERFILES[stage],
        tag=tag,
        buildargs=buildargs,
        network_mode=plan.network,
        nocache=plan.no_cache,
        rm=True,
        forcerm=True,
        pull=False,
        decode=True,
        timeout=None,
    )
    for chunk in stream:
        if "error" in chunk or "errorDetail" in chunk:
            message = (chunk.get("errorDetail") or {}).get("message") or chunk.get("error") or "unknown error"
            if pending:
                tail.append(_plain(pending))
                full.append(_plain(pending))
            log = _keep_log(plan, tag, full)
            said = [line[len(ERROR_MARK) :].strip() for line in tail if line.startswith(ERROR_MARK)]
            if said:  # the step said what went wrong in one line: that line, not the engine's
                raise BuildError(
                    f"building the {stage} layer failed: {said[-1]}" + (f" (full log: {log})" if log else ""),
                    stage=stage,
                    log_tail=tuple(line for line in tail[-30:] if not line.startswith(ERROR_MARK)),
                )
            hint = f" (full log: {log})" if log else ""
            if plan.network != "host":
                hint += (
                    " (if a step could not download: an engine without a bridge network, such as "
                    "`dockerd --bridge=none`, builds with network only under --network host)"
                )
            raise BuildError(
                f"building the {stage} layer ({DOCKERFILES[stage]}) failed: {_plain(message).strip()}{hint}",
                stage=stage,
                log_tail=tuple(tail[-30:]),
            )
        if "stream" in chunk:
            pending += chunk["stream"]
            *lines, pending = pending.split("\n")
            for line in lines:
                line = _plain(line).rstrip("\r")
                if not line.strip():
                    continue
                tail.append(line)
                full.append(line)
                del tail[:-200]
                out("step" if line.startswith("Step ") else ("meta" if line.startswith(" ---> ") else "log"), line)
        elif "status" in chunk:
            status = chunk["status"] + (f" {chunk['id']}" if chunk.get("id") else "")
            out("meta", status)
        aux = chunk.get("aux")
        if isinstance(aux, dict) and aux.get("ID"):
            image_id = aux["ID"]
    if pending.strip():
        out("log", pending.rstrip())
    return image_id


#: A step that fails may print one line starting with this (the one line that matters, e.g.
#: Bazel's first ERROR): the build's error then says it, instead of the engine's exit code.
ERROR_MARK = "puffertank-error:"


def _keep_log(plan: BuildPlan, tag: str, lines: list[str]) -> str:
    """Write a failed layer's full log to ``plan.log_dir`` (default: ~/.cache/puffertank/logs); its path, or ''."""
    folder = plan.log_dir
    if folder is None:
        cache = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache")
        folder = cache / "puffertank" / "logs"
    path = folder / (re.sub(r"[^A-Za-z0-9._-]", "_", tag) + ".log")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    except OSError:
        return ""
    return str(path)


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _plain(text: str) -> str:
    """The engine colours a step's stderr; the log here is plain text."""
    return _ANSI.sub("", text)


def _check_network(plan: BuildPlan) -> None:
    """Files served on the loopback reach only a build on the host's network."""
    for given, what in (
        (plan.ca_cert, "--ca-cert needs --network host: the bundle"),
        (plan.lock, "--lock needs --network host: the lock"),
    ):
        if given is not None and plan.network != "host":
            raise TankError(
                f"{what} is served on this machine's loopback (127.0.0.1) "
                "for the length of the build, which only a build on the host's network can reach"
            )


def _stage_args(plan: BuildPlan, stage: str, client: Any, built: dict[str, str], out: Printer) -> dict[str, str]:
    """The build arguments of one stage: layer 1's base image and torch, or the id of the layer below."""
    args: dict[str, str] = {}
    if stage == "base":
        if plan.base_image:
            args["BASE_IMAGE"] = resolve_base_image(client, plan.base_image, out)
        if plan.torch is not None:
            args["TORCH"] = plan.torch
        return args
    below = "base" if stage == "envs" else "envs"
    args["BASE"] = built.get(below) or _image_id(client, plan.tags[below], BUILD_FIRST[below])
    out("note", f"{stage}: FROM {plan.tags[below]} = {args['BASE']}")
    return args


def _stage_context(plan: BuildPlan, stage: str, plugin_names: list[str]) -> io.BytesIO:
    envs = ""
    if stage == "envs":
        envs = render_envs(plan.layers, plan.constraints, hashlock=plan.hashlock, command=plan.render_command)
    hashlock_path = plan.hashlock.path if plan.hashlock is not None else None
    return layer_context(plan.root, stage, plugin_names, envs, hashlock_path, plan.sources)


def build(plan: BuildPlan, client: Any, out: Printer) -> list[StageResult]:
    """Build ``plan.stages`` in order (base → envs → final), each on the previous layer's id."""
    _check_network(plan)
    plugin_names = sorted(plan.layers)
    platform = engine_platform(client)
    results = []
    built: dict[str, str] = {}  # stage -> image id of what this build made
    with _serve(plan) as urls:
        for stage in (stage for stage in STAGES if stage in plan.stages):
            served = {key: url for key, url in urls.items() if stage == "base" or key != LOCK_HASHES_ARG}
            args = {**plan.build_args, **served, **_stage_args(plan, stage, client, built, out)}
            if stage == "final":
                built_for = _plugins_of(client, args["BASE"])
                if built_for and built_for != plugin_names:
                    out("note", f"layer 3 installs the plugins of {plan.tags['envs']}: {', '.join(built_for)}")
                plugin_names = built_for or plugin_names
            out("stage", f"{stage}: {DOCKERFILES[stage]} → {plan.tags[stage]}")
            result = _make_layer(plan, client, stage, args, _stage_context(plan, stage, plugin_names), platform, out)
            built[stage] = result.image_id
            results.append(result)
    return results


def _make_layer(
    plan: BuildPlan, client: Any, stage: str, args: dict[str, str], context: io.BytesIO, platform: str, out: Printer
) -> StageResult:
    """One layer: taken from ``--from-registry`` when a layer built from the same inputs is there, else built."""
    tag = plan.tags[stage]
    inputs = layer_inputs(stage, context.getvalue(), args, _served_files(plan, stage), platform)
    started = time.monotonic()
    registry = plan.from_registry
    reused = (
        registry is not None
        and plan.pins is not None
        and reuse_layer(client, registry, stage, inputs, tag, out, plan.pins, plan.from_pins)
    )
    if not reused:
        labels = {INPUTS_LABEL: inputs, **({BELOW_LABEL: args["BASE"]} if "BASE" in args else {})}
        image_id = _stream(client, stage, context, tag, args, labels, plan, out)
        if stage == "final":
            _add_lock_label(client, image_id or tag, tag, out)
    seconds = time.monotonic() - started
    image = client.images.get(tag)
    out("done", f"{stage}: {tag} {f'reused from {registry}' if reused else 'built'} in {seconds:.1f} s")
    return StageResult(stage, tag, seconds, image.id, image.attrs.get("Size", 0), str(registry) if reused else None)


def _served_files(plan: BuildPlan, stage: str) -> dict[str, bytes]:
    """The files served to ``stage`` whose content makes the layer (the lock's), by their URL argument."""
    if plan.lock is None:
        return {}
    files = {"PUFFER_LOCK_URL": plan.lock.constraints}
    if stage == "base":
        files[LOCK_HASHES_ARG] = plan.lock.hashes
    return files


@contextmanager
def _serve(plan: BuildPlan) -> Iterator[dict[str, str]]:
    """The build arguments naming the files served for the build (CA bundle, lock), if any."""
    with contextlib.ExitStack() as served:
        urls: dict[str, str] = {}
        if plan.ca_cert is not None:  # checks the bundle first
            urls["PUFFER_CA_URL"] = served.enter_context(serve_ca_bundle(plan.ca_cert))
        if plan.lock is not None:
            files = served.enter_context(serve_files({".txt": plan.lock.constraints, ".hashes": plan.lock.hashes}))
            urls["PUFFER_LOCK_URL"] = files[".txt"]
            urls[LOCK_HASHES_ARG] = files[".hashes"]
        yield urls


def _add_lock_label(client: Any, image_id: str, tag: str, out: Printer) -> str:
    """Copy the final image's lock file into its label (what `puffer tank lock` reads)."""
    text = read_lock(client, image_id)
    source = f"{LOCK_IN_IMAGE} of {tag}"
    packages, hashes = parse_lock(text, source), lock_hashes(text, source)
    labelled = label_lock(client, image_id, tag, text)
    out(
        "note",
        f"final: lock of {len(packages)} packages ({len(hashes)} with their file's sha256), "
        f"sha256 {lock_digest(packages, hashes)[:16]} (puffer tank lock {tag})",
    )
    return labelled
