"""One tag to or from a registry through the engine, its progress as a line per layer, every wait bounded.

The engine does the transfer (``docker push`` / ``docker pull`` through the docker SDK)
with Docker's own credentials: the SDK reads ``~/.docker/config.json`` (or
``$DOCKER_CONFIG``) and its credential helpers, what ``docker login HOST`` writes, and
sends them along. The engine's messages are read in a thread so that a transfer that
reports nothing for :data:`IDLE_SECONDS` ends with a one-line error instead of a hang (the
SDK itself waits on a pull for ever).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from puffer_core.tank.engine import engine_is_local
from puffer_core.tank.errors import TankError
from puffer_core.tank.registry.refs import RegistryRef, probe_registry

__all__ = ["IDLE_SECONDS", "MissingTag", "check_registry", "has_tag", "pull_tag", "push_tag", "untag"]

#: Longest silence from the engine during a transfer (its own progress comes every second).
IDLE_SECONDS = 120.0
#: Per-layer progress messages: shown at most every PROGRESS_EVERY seconds, for layers of PROGRESS_MB or more.
PROGRESS = {"Pushing", "Downloading", "Extracting"}
PROGRESS_EVERY = 10.0
PROGRESS_MB = 10.0
#: Per-layer steps not worth a line of their own (the layer's last state gets one).
#: (A layer the registry or the engine already has is no news either: the digest line follows.)
QUIET = {
    "Preparing",
    "Waiting",
    "Pulling fs layer",
    "Verifying Checksum",
    "Download complete",
    "Layer already exists",
    "Already exists",
}
_MISSING = ("manifest unknown", "not found", "name unknown")

Printer = Callable[[str, str], None]


class MissingTag(TankError):
    """The registry has no such tag (or no such repository)."""


class _EngineError(Exception):
    """What the engine reported as an error, in its words."""


def _follow(start: Callable[[], Iterator[dict]], idle: float, what: str) -> Iterator[dict]:
    """The engine's messages as ``start()`` yields them, each within ``idle`` seconds of the last."""
    messages: queue.Queue = queue.Queue()

    def pump() -> None:
        try:
            for message in start():
                messages.put(("message", message))
            messages.put(("end", None))
        except Exception as exc:  # handed to the caller's thread, which reports it
            messages.put(("error", exc))

    # A daemon: on a timeout it stays blocked on the engine's socket until the command exits.
    threading.Thread(target=pump, name=f"puffer-tank {what}", daemon=True).start()
    while True:
        try:
            kind, item = messages.get(timeout=idle)
        except queue.Empty:
            raise TankError(
                f"{what}: the engine reported nothing for {idle:.0f} s (the registry stopped answering?); try again"
            ) from None
        if kind == "end":
            return
        if kind == "error":
            raise _EngineError(_engine_message(item)) from None
        if "error" in item or "errorDetail" in item:
            raise _EngineError((item.get("errorDetail") or {}).get("message") or item.get("error") or "unknown error")
        yield item


def _engine_message(exc: BaseException) -> str:
    """The engine's own words in a docker SDK error (its ``explanation``), else the error's first line."""
    explanation = getattr(exc, "explanation", None)
    text = str(explanation or exc) or type(exc).__name__
    return text.splitlines()[0] if text.strip() else type(exc).__name__


class _Progress:
    """The engine's messages as lines: one per layer when it is done, a progress line every 10 s."""

    def __init__(self, out: Printer):
        self.out = out
        self.shown = time.monotonic()  # the first progress line after PROGRESS_EVERY: small layers need none
        self.aux: dict[str, Any] = {}

    def __call__(self, message: dict) -> None:
        if isinstance(message.get("aux"), dict):
            self.aux.update(message["aux"])
        status, layer = message.get("status", ""), message.get("id", "")
        if not status or status in QUIET or status.startswith("The push refers to repository"):
            return
        if status in PROGRESS:
            detail = message.get("progressDetail") or {}
            now = time.monotonic()
            if detail.get("total", 0) / 1e6 >= PROGRESS_MB and now - self.shown >= PROGRESS_EVERY:
                self.shown = now
                done, total = detail.get("current", 0) / 1e6, detail["total"] / 1e6
                self.out("meta", f"{layer}: {status.lower()} {done:,.0f} of {total:,.0f} MB")
            return
        self.out("log", f"{layer}: {status}" if layer else status)


def _refused_credentials(lower: str) -> bool:
    return any(word in lower for word in ("unauthorized", "authentication required", "denied", "no basic auth"))


def _explain(message: str, ref: RegistryRef) -> str:
    """The engine's message, and what to do about the usual ones."""
    lower = message.lower()
    hint = ""
    if _refused_credentials(lower):
        hint = f"; log in first: docker login {ref.address}"
    elif "http response to https client" in lower:
        hint = (
            f"; {ref.address} speaks plain HTTP: add it to the engine's insecure-registries "
            "(only 127.0.0.0/8 is by default) or serve it over TLS"
        )
    elif "connection refused" in lower or "no such host" in lower or "timeout" in lower:
        hint = f"; is the registry at {ref.address} running?"
    return f"{message[:240]}{hint}"


def _transfer(client: Any, verb: str, ref: RegistryRef, tag: str, out: Printer, idle: float) -> _Progress:
    """Run the engine's push or pull (``verb``) of ``ref:tag``, its messages shown as they come."""
    call = getattr(client.api, verb)
    progress = _Progress(out)
    for message in _follow(
        lambda: call(ref.repository, tag=tag, stream=True, decode=True), idle, f"{verb}ing {ref.tag(tag)}"
    ):
        progress(message)
    return progress


def push_tag(client: Any, ref: RegistryRef, tag: str, out: Printer, idle: float = IDLE_SECONDS) -> str:
    """Push the engine's ``ref:tag`` to the registry; the manifest digest the registry stored."""
    try:
        progress = _transfer(client, "push", ref, tag, out, idle)
    except _EngineError as exc:
        raise TankError(f"pushing {ref.tag(tag)} failed: {_explain(str(exc), ref)}") from None
    return str(progress.aux.get("Digest", ""))


def pull_tag(client: Any, ref: RegistryRef, tag: str, out: Printer, idle: float = IDLE_SECONDS) -> None:
    """Pull ``ref:tag`` onto the engine; :class:`MissingTag` when the registry has no such tag."""
    full = ref.tag(tag)
    try:
        _transfer(client, "pull", ref, tag, out, idle)
    except _EngineError as exc:
        message = str(exc)
        lower = message.lower()
        if any(word in lower for word in _MISSING) and not _refused_credentials(lower):
            raise MissingTag(f"the registry has no {full} ({message[:160]})") from None
        raise TankError(f"pulling {full} failed: {_explain(message, ref)}") from None


def check_registry(ref: RegistryRef) -> None:
    """TankError within seconds when the registry is not there (asked from here when the engine is here too)."""
    if engine_is_local():
        probe_registry(ref)


def untag(client: Any, name: str) -> None:
    """Remove the tag ``name`` (the image too when nothing else names it); no error when it is gone."""
    import docker

    try:
        client.images.remove(name)
    except docker.errors.ImageNotFound:
        pass


def has_tag(client: Any, name: str) -> bool:
    """Whether the engine has an image tagged ``name``."""
    import docker

    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True
