"""Standard bench runs as data: one dated JSON file per run, written and read back.

``write_run`` stores a run of ``puffer bench --standard DIR`` (what ``nox -s bench`` runs) as
``DIR/<UTC time>.json`` with the machine, the package versions and the commit it measured;
``load_runs`` reads them. ``puffer_core.bench.results`` renders the pages made from them.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from puffer_core.atomic import private_directory, write_atomically
from puffer_core.env.environments import installed_versions, unavailable_reason

__all__ = [
    "SCHEMA",
    "available_envs",
    "describe_machine",
    "fastest_pufferlib",
    "load_runs",
    "package_versions",
    "source_commit",
    "store_and_show",
    "write_run",
]

T = TypeVar("T")
#: Version of the file layout below; a reader refuses files of a newer one.
SCHEMA = 1
#: The distributions whose versions a run records (those missing here are left out).
RECORDED_PACKAGES = (
    "puffer-core",
    "puffer-plugin-atari",
    "puffer-plugin-nethack",
    "numpy",
    "gymnasium",
    "ale-py",
    "nle",
    "pufferlib-core",
    "torch",
    "stable-baselines3",
)


def fastest_pufferlib(rows: list[dict]) -> dict | None:
    """PufferLib's fastest setting (Serial or Multiprocessing) in one env's rows: what every "vs
    PufferLib" of a run is over (the bench's own ratios, every table and the README's)."""
    peers = [r for r in rows if r.get("backend", "").startswith("pufferlib") and r.get("sps")]
    return max(peers, key=lambda r: r["sps"], default=None)


# --------------------------------------------------------------------------- writing


def describe_machine() -> dict[str, Any]:
    """CPUs (all and usable), CPU model, Python and platform of this machine."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpus": os.cpu_count(),
        "usable_cpus": usable,
        "cpu_model": _cpu_model(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _cpu_model() -> str | None:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or None
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    return names[0] if names else platform.processor() or None


def package_versions(names: Iterable[str] = RECORDED_PACKAGES) -> dict[str, str]:
    """``{distribution: version}`` of those of ``names`` installed here."""
    return installed_versions(names)


def source_commit() -> str | None:
    """The git commit of the checkout puffer_core runs from (``+dirty`` with tracked changes), else None."""
    here = Path(__file__).resolve().parent

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=here, capture_output=True, text=True, timeout=10, check=True)
        return done.stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None  # not a checkout (an installed wheel), or no git
    return commit + ("+dirty" if dirty else "")


def write_run(out_dir: str | os.PathLike, sections: dict[str, Any]) -> dict[str, Any]:
    """Store one standard run in ``out_dir`` as ``<UTC time>.json`` and return the stored document.

    Args:
        out_dir: The folder of runs (created if missing, refused if others can write it:
            ``atomic.private_directory``); ``bench-results`` in the repository.
        sections: What the run measured: ``seconds``, ``rounds``, ``results`` (env id → rows),
            ``uneven``, ``training`` and ``skipped``.

    Returns:
        The document as written: ``sections`` plus ``schema``, ``run`` (the file's stem),
        ``created`` (UTC), ``machine``, ``versions`` and ``commit``.
    """
    out = private_directory(out_dir)
    now = datetime.datetime.now(datetime.timezone.utc)
    stem = now.strftime("%Y-%m-%dT%H%M%SZ")
    run, n = stem, 1
    while (out / f"{run}.json").exists():  # two runs within a second (a short run, a test)
        n += 1
        run = f"{stem}-{n}"
    document = {
        "schema": SCHEMA,
        "run": run,
        "created": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": describe_machine(),
        "versions": package_versions(),
        "commit": source_commit(),
        **sections,
    }
    write_atomically(out / f"{run}.json", (json.dumps(document, indent=2) + "\n").encode())
    return document


def store_and_show(out_dir: str | os.PathLike, name: str, section: dict, as_json: bool, render: Any) -> dict:
    """A one-section run (``{name: section}``) stored by :func:`write_run`, then printed: the stored document as
    JSON, or ``render(section)``'s Markdown and where it was stored. Returns the document."""
    document = write_run(out_dir, {name: section})
    if as_json:
        print(json.dumps(document, indent=2))
    else:
        print(render(section), end="")
        print(f"stored {Path(out_dir) / document['run']}.json")
    return document


def available_envs(envs: Mapping[str, T], skipped: list[str]) -> dict[str, T]:
    """The entries of ``envs`` whose env can be made here; why each other cannot is appended to ``skipped``."""
    found = {}
    for env_id, value in envs.items():
        reason = unavailable_reason(env_id)
        if reason:
            skipped.append(reason)
        else:
            found[env_id] = value
    return found


# --------------------------------------------------------------------------- reading


def load_runs(results_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """Every run stored in ``results_dir``, oldest first.

    Raises:
        ValueError: A file is not a run this code can read (named, with what is wrong).
    """
    runs = []
    for path in sorted(Path(results_dir).glob("*.json")):
        try:
            document = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} is not JSON ({exc}); delete it or restore it from git") from exc
        schema = document.get("schema") if isinstance(document, dict) else None
        if not isinstance(schema, int) or schema > SCHEMA:
            raise ValueError(f"{path} has schema {schema!r}; this code reads runs of schema ≤ {SCHEMA}")
        runs.append(document)
    return sorted(runs, key=lambda document: document["created"])
