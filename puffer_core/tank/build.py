"""Build PufferTank's three layers through the docker SDK, with the build log streamed.

The engine is whatever ``DOCKER_HOST`` names (default ``unix:///var/run/docker.sock``);
when none answers, :class:`NoEngineError` (exit code 2) says so and how to fix it.

Every layer starts from exact bytes, never from whatever a tag names at build time:
``--base-image`` is resolved on the engine before layer 1 is built — a reference already
pinned by digest stays as given, a tag becomes ``NAME@sha256:DIGEST`` (its registry
digest), and a local image with no registry digest (``docker import``, as tank/ci-setup.sh
makes) becomes its image id ``sha256:ID`` — and passed as ``BASE_IMAGE``; layer 1 records
it (``/opt/puffertank/base-image.txt``, label ``org.puffer.tank.base-image``) and the lock
repeats it. Layers 2 and 3 get the image *id* of the layer below as ``BASE``.

Each layer is sent a build context made here, not the whole checkout: only the files its
Dockerfile copies, in a tar with fixed owners and times, so the engine's layer cache hits
whenever the files did not change.

Three things come from this machine at build time, never from committed text:

- ``--ca-cert PATH``: for builds behind a TLS-intercepting proxy. The bundle is served on
  the host's loopback for the length of the build (a tiny HTTP server in this process)
  and each download step fetches it into the build container's ``/dev/shm`` through
  ``tank/puffertank-ca.sh``, checks its SHA-256 and deletes it when the step ends: it never
  enters a layer, the image history holds only the URL (which names the bundle's digest,
  so the layer cache stays valid). Because the server listens on 127.0.0.1, --ca-cert
  needs ``--network host``.
- pip's index settings (``PIP_INDEX_URL``, ``PIP_EXTRA_INDEX_URL``, ``PIP_TRUSTED_HOST``,
  ``PIP_DEFAULT_TIMEOUT``), read from the environment and ``pip config list`` and passed
  as build arguments; ``file:`` indexes (not reachable from a build) and URLs carrying
  credentials (they would be recorded in the image history) are left out, with a note.
- the proxy variables (``HTTP_PROXY`` …), Docker's predefined build arguments, which the
  engine keeps out of the image history.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from puffer_core.specs import DockerLayer
from puffer_core.tank.errors import BuildError, NoEngineError, TankError
from puffer_core.tank.hashlock import HashLock
from puffer_core.tank.lock import LOCK_IN_IMAGE, label_lock, lock_digest, lock_hashes, parse_lock, read_lock
from puffer_core.tank.render import CA_HELPER_SOURCE, DEFAULT_COMMAND, Constraints, render_envs

__all__ = [
    "STAGES",
    "BuildPlan",
    "StageResult",
    "build",
    "build_context",
    "connect",
    "engine_url",
    "image_tags",
    "machine_build_args",
    "pinned_reference",
    "resolve_base_image",
]

STAGES = ("base", "envs", "final")
DOCKERFILES = {"base": "tank/Dockerfile.base", "envs": "tank/Dockerfile.envs", "final": "tank/Dockerfile"}
DEFAULT_SOCKET = "unix:///var/run/docker.sock"
PLUGINS_LABEL = "org.puffer.tank.plugins"
BASE_IMAGE_LABEL = "org.puffer.tank.base-image"
#: A reference that names bytes: ``name[:tag]@sha256:DIGEST``, or an image id.
DIGEST_REFERENCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:-]*@sha256:[0-9a-f]{64}$")
IMAGE_ID = re.compile(r"^sha256:[0-9a-f]{64}$")
#: Docker's predefined build arguments: passed through, kept out of the image history.
PROXY_ARGS = ("HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY", "ALL_PROXY")
PIP_ARGS = {
    "PIP_INDEX_URL": ("index-url",),
    "PIP_EXTRA_INDEX_URL": ("extra-index-url",),
    "PIP_TRUSTED_HOST": ("trusted-host",),
    "PIP_DEFAULT_TIMEOUT": ("timeout", "default-timeout"),
}
#: Files and folders never sent to the engine.
EXCLUDED_NAMES = {
    "__pycache__",
    ".git",
    ".nox",
    ".venv",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    ".mypy_cache",
    "build",
    "dist",
    "node_modules",
}
EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".egg-info")

Printer = Callable[[str, str], None]


# -- engine --------------------------------------------------------------------------------


def engine_url(environ: Mapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    return environ.get("DOCKER_HOST") or DEFAULT_SOCKET


def connect(timeout: float = 10.0) -> Any:
    """A ``docker.DockerClient`` that answered a ping; :class:`NoEngineError` otherwise."""
    url = engine_url()
    try:
        import docker
    except ImportError:
        raise NoEngineError(
            "the docker Python SDK is not installed, so no Docker engine can be reached: pip install docker"
        ) from None
    try:
        client = docker.from_env(timeout=timeout)
        client.ping()
    except Exception as exc:  # DockerException, requests' ConnectionError, OSError: all mean "no engine"
        cause = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        cause = cause.removeprefix("Error while fetching server API version: ")
        raise NoEngineError(
            f"no Docker engine answered at {url}: start one (dockerd) or set DOCKER_HOST (cause: {cause[:160]})"
        ) from None
    return client


# -- build arguments from this machine -----------------------------------------------------


def _pip_config(python: str = sys.executable) -> dict[str, str]:
    """``pip config list`` as {key: value} (``global.index-url``, ``:env:.timeout``, …)."""
    try:
        out = subprocess.run(
            [python, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    found = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            found[key.strip()] = value.strip().strip("'\"")
    return found


def _usable_urls(value: str, notes: list[str], what: str) -> str:
    kept = []
    for url in value.split():
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            notes.append(f"{what} {url} is not passed to the build: a build cannot reach {parts.scheme} URLs")
        elif parts.username or parts.password:
            notes.append(f"{what} for {parts.hostname} is not passed: the image history would keep its credentials")
        else:
            kept.append(url)
    return " ".join(kept)


def machine_build_args(
    environ: Mapping[str, str] | None = None, pip_config: Mapping[str, str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """Build arguments taken from this machine (pip's index settings, proxies), and notes."""
    environ = os.environ if environ is None else environ
    config = _pip_config() if pip_config is None else pip_config
    args: dict[str, str] = {}
    notes: list[str] = []
    for arg, keys in PIP_ARGS.items():
        value = environ.get(arg)
        if value is None:
            for scope in (":env:", "global", "install"):
                for key in keys:
                    if f"{scope}.{key}" in config:
                        value = config[f"{scope}.{key}"]
                        break
                if value is not None:
                    break
        if not value:
            continue
        if arg.endswith("_URL"):
            value = _usable_urls(value, notes, arg)
        if value:
            args[arg] = value
    for name in PROXY_ARGS:
        for variant in (name, name.lower()):
            if environ.get(variant):
                args[variant] = environ[variant]
    return args, notes


# -- the CA bundle server ------------------------------------------------------------------


@contextmanager
def serve_ca_bundle(path: pathlib.Path) -> Iterator[str]:
    """Serve the bundle at ``http://127.0.0.1:PORT/<sha256>.pem`` while the block runs."""
    data = path.read_bytes()
    if b"-----BEGIN CERTIFICATE-----" not in data:
        raise TankError(f"--ca-cert {path}: no PEM certificate in it (give a CA bundle such as ca-certificates.crt)")
    with serve_files({".pem": data}) as urls:
        yield urls[".pem"]


@contextmanager
def serve_files(files: Mapping[str, bytes]) -> Iterator[dict[str, str]]:
    """Serve each file at ``http://127.0.0.1:PORT/<sha256><ext>`` while the block runs.

    ``files`` maps an extension (``.pem``, ``.txt``) to the bytes; the result maps it to the
    URL. The port is derived from the digests, so the same files get the same URLs (and
    the layer cache hits) build after build; a busy port moves on to the next one.
    """
    routes = {f"/{hashlib.sha256(data).hexdigest()}{ext}": data for ext, data in files.items()}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = routes.get(self.path)
            if data is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    first = 40000 + int(next(iter(routes))[1:9], 16) % 20000  # from the first file's digest
    server = None
    for port in range(first, first + 50):
        try:
            server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
            break
        except OSError:
            continue
    if server is None:
        raise TankError(f"no free port on 127.0.0.1 between {first} and {first + 49} to serve the build's files")
    thread = threading.Thread(target=server.serve_forever, name="puffertank-files", daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield {ext: base + route for route, ext in zip(routes, files, strict=True)}
    finally:
        server.shutdown()
        server.server_close()


# -- build contexts ------------------------------------------------------------------------


def _wanted(path: pathlib.Path) -> bool:
    parts = path.parts
    if parts[:1] == ("plugins",) and len(parts) > 2 and parts[2] == "tests":
        return False  # a plugin's tests do not run in the tank; leaving them out spares rebuilds
    return not any(part in EXCLUDED_NAMES or part.endswith(EXCLUDED_SUFFIXES) for part in parts)


def _tree(root: pathlib.Path, relative: str) -> list[str]:
    top = root / relative
    if top.is_file():
        return [relative]
    if not top.is_dir():
        raise TankError(f"{relative} is missing from {root}; the build context needs it")
    files = []
    for path in sorted(top.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and not path.is_symlink() and _wanted(rel):
            files.append(rel.as_posix())
    return files


def build_context(root: pathlib.Path, paths: Iterable[str], extra: Mapping[str, bytes] | None = None) -> io.BytesIO:
    """A reproducible tar of ``paths`` (files or folders under ``root``) plus ``extra`` files.

    Owners, times and order are fixed, so the same files give the same bytes.
    """
    members: dict[str, bytes | pathlib.Path] = {}
    for relative in paths:
        for name in _tree(root, relative):
            members[name] = root / name
    for name, data in (extra or {}).items():
        members[name] = data
    dirs = sorted({parent.as_posix() for name in members for parent in pathlib.PurePosixPath(name).parents} - {"."})
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in dirs:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for name in sorted(members):
            source = members[name]
            if isinstance(source, pathlib.Path):
                data = source.read_bytes()
                mode = 0o755 if os.access(source, os.X_OK) else 0o644
            else:
                data, mode = source, 0o644
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


# -- base images ---------------------------------------------------------------------------


def _repository(reference: str) -> str:
    """``docker.io/library/debian:12`` → ``debian``: the repository, tag and digest left off."""
    name = reference.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    for prefix in ("docker.io/", "index.docker.io/"):
        name = name.removeprefix(prefix)
    return name.removeprefix("library/")


def pinned_reference(reference: str, attrs: Mapping[str, Any]) -> tuple[str, str]:
    """The immutable form of ``reference``, given the engine's ``attrs`` of that image, and what it is.

    Already pinned (``NAME@sha256:…`` or an image id): as given. A tag: ``NAME@sha256:…``
    when the image came from a registry (its RepoDigests name that repository); otherwise
    (imported or built here) its image id, the only name for those bytes there is.
    """
    if DIGEST_REFERENCE.match(reference) or IMAGE_ID.match(reference):
        return reference, "pinned as given"
    repository = _repository(reference)
    for repo_digest in attrs.get("RepoDigests") or []:
        name, _, digest = repo_digest.partition("@")
        if _repository(name) == repository and digest.startswith("sha256:"):
            return f"{reference.split('@', 1)[0]}@{digest}", "its registry digest"
    image_id = attrs.get("Id", "")
    if not IMAGE_ID.match(image_id):
        raise TankError(f"the engine reports no image id for {reference}; give --base-image NAME@sha256:DIGEST")
    return image_id, "its image id: a local image has no registry digest"


def resolve_base_image(client: Any, reference: str, out: Printer) -> str:
    """``reference`` as layer 1's immutable FROM (see :func:`pinned_reference`), pulled if need be."""
    import docker

    if DIGEST_REFERENCE.match(reference):
        return reference  # the builder fetches exactly these bytes, or fails
    try:
        image = client.images.get(reference)
    except docker.errors.ImageNotFound:
        if IMAGE_ID.match(reference):
            raise TankError(
                f"base image {reference} is not on this engine: an image id names a local image, known only "
                "where it was made; give --base-image NAME@sha256:DIGEST or an image that is here"
            ) from None
        out("note", f"base: pulling {reference} to learn its digest")
        try:
            image = client.images.pull(reference)
        except docker.errors.APIError as exc:
            raise TankError(
                f"base image {reference} is not on this engine and could not be pulled "
                f"({str(exc).splitlines()[0][:160]}); pull or import it first, or give NAME@sha256:DIGEST"
            ) from None
    pinned, what = pinned_reference(reference, image.attrs)
    out("note", f"base: {reference} → {pinned} ({what})")
    return pinned


# -- plan and build ------------------------------------------------------------------------


def image_tags(tag: str) -> dict[str, str]:
    """``puffertank`` → base/envs/latest tags; ``name:v1`` → name:v1-base, name:v1-envs, name:v1."""
    name, colon, version = tag.rpartition(":")
    if not colon or "/" in version:
        name, version = tag, ""
    if not re.match(r"^[a-z0-9][a-z0-9._/:-]*$", name) or (version and not re.match(r"^[\w][\w.-]*$", version)):
        raise TankError(f"--tag {tag!r} is not an image name (lower case, e.g. puffertank or puffertank:dev)")
    if version:
        return {"base": f"{name}:{version}-base", "envs": f"{name}:{version}-envs", "final": f"{name}:{version}"}
    return {"base": f"{name}:base", "envs": f"{name}:envs", "final": f"{name}:latest"}


@dataclass
class BuildPlan:
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
    #: pip constraints every pip step of the build obeys (``--lock FILE``, see lock.py).
    lock_constraints: bytes | None = None
    #: The hash-locked set layer 2 installs (None: rendered without constraints).
    hashlock: HashLock | None = None


@dataclass
class StageResult:
    stage: str
    tag: str
    seconds: float
    image_id: str
    size: int


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


def _stage_context(plan: BuildPlan, stage: str, plugin_names: list[str]) -> io.BytesIO:
    root = plan.root
    helpers = [CA_HELPER_SOURCE]
    if stage == "base":
        return build_context(root, [DOCKERFILES["base"], *helpers])
    if stage == "envs":
        text = render_envs(plan.layers, plan.constraints, hashlock=plan.hashlock, command=plan.render_command)
        if plan.hashlock is not None:
            helpers.append(plan.hashlock.path)
        return build_context(root, helpers, {DOCKERFILES["envs"]: text.encode()})
    missing = [name for name in plugin_names if not (root / "plugins" / name / "pyproject.toml").is_file()]
    if missing:
        raise TankError(
            f"plugin(s) {', '.join(missing)} have no plugins/<name>/pyproject.toml in {root}; "
            "layer 3 installs plugins from this checkout"
        )
    paths = [
        DOCKERFILES["final"],
        "tank/puffertank-bashrc.sh",
        "tank/puffertank-entrypoint.sh",
        "tank/puffertank-deps.py",
        *helpers,
        "pyproject.toml",
        "puffer_core",
        *[f"plugins/{name}" for name in plugin_names],
    ]
    extra = {}
    if (root / "README.md").is_file():
        paths.append("README.md")
    else:
        extra["README.md"] = b"# puffer-core\n"
    return build_context(root, paths, extra)


def _stream(
    client: Any, stage: str, context: io.BytesIO, tag: str, buildargs: dict[str, str], plan: BuildPlan, out: Printer
) -> str:
    """Run one build, printing its log as it arrives; the image id, or BuildError."""
    image_id = ""
    tail: list[str] = []
    pending = ""
    stream = client.api.build(
        fileobj=context,
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
            hint = ""
            if plan.network != "host":
                hint = (
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


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _plain(text: str) -> str:
    """The engine colours a step's stderr; the log here is plain text."""
    return _ANSI.sub("", text)


def build(plan: BuildPlan, client: Any, out: Printer) -> list[StageResult]:
    """Build ``plan.stages`` in order (base → envs → final), each on the previous tag."""
    for given, what in (
        (plan.ca_cert, "--ca-cert needs --network host: the bundle"),
        (plan.lock_constraints, "--lock needs --network host: the lock"),
    ):
        if given is not None and plan.network != "host":
            raise TankError(
                f"{what} is served on this machine's loopback (127.0.0.1) "
                "for the length of the build, which only a build on the host's network can reach"
            )
    common = dict(plan.build_args)
    plugin_names = sorted(plan.layers)
    results = []
    built: dict[str, str] = {}  # stage -> image id of what this build made
    hints = {
        "base": "build it first: puffer tank build --stage base",
        "envs": "build it first: puffer tank build --stage envs",
    }
    with _serve(plan) as urls:
        common.update(urls)
        for stage in STAGES:
            if stage not in plan.stages:
                continue
            args = dict(common)
            if stage == "base":
                if plan.base_image:
                    args["BASE_IMAGE"] = resolve_base_image(client, plan.base_image, out)
                if plan.torch is not None:
                    args["TORCH"] = plan.torch
            else:
                below = "base" if stage == "envs" else "envs"
                args["BASE"] = built.get(below) or _image_id(client, plan.tags[below], hints[below])
                out("note", f"{stage}: FROM {plan.tags[below]} = {args['BASE']}")
            if stage == "final":
                built_for = _plugins_of(client, args["BASE"])
                if built_for and built_for != plugin_names:
                    out("note", f"layer 3 installs the plugins of {plan.tags['envs']}: {', '.join(built_for)}")
                plugin_names = built_for or plugin_names
            out("stage", f"{stage}: {DOCKERFILES[stage]} → {plan.tags[stage]}")
            context = _stage_context(plan, stage, plugin_names)
            started = time.monotonic()
            image_id = _stream(client, stage, context, plan.tags[stage], args, plan, out)
            if stage == "final":
                image_id = _add_lock_label(client, image_id or plan.tags[stage], plan.tags[stage], out)
            seconds = time.monotonic() - started
            image = client.images.get(plan.tags[stage])
            size = image.attrs.get("Size", 0)
            built[stage] = image.id
            results.append(StageResult(stage, plan.tags[stage], seconds, image_id or image.id, size))
            out("done", f"{stage}: {plan.tags[stage]} built in {seconds:.1f} s")
    return results


@contextmanager
def _serve(plan: BuildPlan) -> Iterator[dict[str, str]]:
    """The build arguments naming the files served for the build (CA bundle, lock), if any."""
    if plan.ca_cert is None and plan.lock_constraints is None:
        yield {}
        return
    if plan.ca_cert is None:
        with serve_files({".txt": plan.lock_constraints}) as urls:
            yield {"PUFFER_LOCK_URL": urls[".txt"]}
        return
    with serve_ca_bundle(plan.ca_cert) as ca_url:  # checks the bundle; its URL as without --lock
        if plan.lock_constraints is None:
            yield {"PUFFER_CA_URL": ca_url}
            return
        with serve_files({".txt": plan.lock_constraints}) as urls:
            yield {"PUFFER_CA_URL": ca_url, "PUFFER_LOCK_URL": urls[".txt"]}


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
