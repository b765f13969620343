"""``puffer matrix discover``: ask the package index for the releases the plugins follow, keep them.

For every package some plugin follows (:mod:`~puffer_core.matrix.follow`), every index
(:mod:`~puffer_core.matrix.index_config`) is asked for its files
(:mod:`~puffer_core.matrix.simple_index`); their final, not yanked releases
(:mod:`~puffer_core.matrix.releases`) that some plugin wants go to discovered.json
(:mod:`~puffer_core.matrix.discovered`), from which the plan adds cells. Any index that
cannot be read stops discovery before anything is written. Files the index client left out
(a ``Requires-Python`` that is not a PEP 440 specifier) are counted per package
(``PackageNews.refused``) and told, never kept or shown.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from packaging.utils import canonicalize_name

from puffer_core.matrix.discovered import discovered_path, load_discovered, write_document
from puffer_core.matrix.follow import Follow, followed, plugin_cells
from puffer_core.matrix.index_config import index_urls, shown_url
from puffer_core.matrix.model import version_key
from puffer_core.matrix.releases import Release, linux_platform, releases_from_files
from puffer_core.matrix.simple_index import DEFAULT_TIMEOUT, IndexFile, project_files
from puffer_core.matrix.sources import PluginSource
from puffer_core.matrix.store import now

__all__ = ["DiscoveryReport", "PackageNews", "discover_releases", "follows_by_package"]

Fetch = Callable[[str, str, float], list[IndexFile]]


@dataclass
class PackageNews:
    """What discovery found of one package: the releases kept, which are new, the cells they add."""

    name: str
    followed_by: list[str]
    releases: list[str] = field(default_factory=list)  # newest first
    new: list[str] = field(default_factory=list)  # not in the previous discovered.json
    cells: dict[str, list[str]] = field(default_factory=dict)  # plugin → ids of the cells it adds
    refused: int = 0  # files the index client left out (IndexFile.refused)

    def to_json(self) -> dict[str, Any]:
        return {
            "followed_by": self.followed_by,
            "releases": self.releases,
            "new": self.new,
            "cells": self.cells,
            "refused_files": self.refused,
        }


@dataclass
class DiscoveryReport:
    """One discovery: where it asked, what it found, where it was kept."""

    indexes: list[str]
    path: pathlib.Path
    written: bool  # False for a dry run, or when nothing but the date would change
    dry_run: bool = False
    packages: dict[str, PackageNews] = field(default_factory=dict)
    #: what discovered.json now holds (or would, for a dry run): the plan's input
    releases: dict[str, dict[str, Release]] = field(default_factory=dict)

    @property
    def added(self) -> dict[str, set[str]]:
        """Plugin → ids of every cell this discovery adds."""
        found: dict[str, set[str]] = {}
        for news in self.packages.values():
            for plugin, ids in news.cells.items():
                found.setdefault(plugin, set()).update(ids)
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "indexes": self.indexes,
            "file": str(self.path),
            "written": self.written,
            "dry_run": self.dry_run,
            "packages": {name: news.to_json() for name, news in self.packages.items()},
            "added_cells": {plugin: sorted(ids) for plugin, ids in sorted(self.added.items())},
        }


def follows_by_package(sources: Mapping[str, PluginSource]) -> dict[str, dict[str, Follow]]:
    """Package (canonical name) → plugin → how that plugin follows it."""
    found: dict[str, dict[str, Follow]] = {}
    for plugin, source in sources.items():
        if source.axes is None or source.axes.tank_only:  # on no index: nothing to follow
            continue
        for key, follow in followed(source.axes).items():
            found.setdefault(key, {})[plugin] = follow
    return dict(sorted(found.items()))


def _releases(urls: list[str], name: str, timeout: float, fetch: Fetch) -> tuple[dict[str, Release], int]:
    """The releases of ``name`` on all the indexes together, and how many files the client refused."""
    files: list[IndexFile] = []
    for url in urls:
        files += fetch(url, name, timeout)
    return releases_from_files(files), sum(1 for file in files if file.refused)


def _added_cells(
    sources: Mapping[str, PluginSource],
    old: Mapping[str, Mapping[str, Release]],
    new: Mapping[str, Mapping[str, Release]],
) -> dict[str, dict[str, list[str]]]:
    """Package → plugin → ids of the cells ``new`` has and ``old`` had not (by the package's release they pin)."""
    found: dict[str, dict[str, list[str]]] = {}
    for plugin, source in sources.items():
        if source.axes is None:
            continue
        before = {cell.id for cell in plugin_cells(plugin, source.axes, old)}
        for cell in plugin_cells(plugin, source.axes, new):
            if cell.id in before:
                continue
            for name, version in cell.pins.items():
                key = canonicalize_name(name)
                if version in new.get(key, {}):
                    found.setdefault(key, {}).setdefault(plugin, []).append(cell.id)
    return found


def discover_releases(
    sources: Mapping[str, PluginSource],
    out: pathlib.Path,
    index: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    dry_run: bool = False,
    fetch: Fetch = project_files,
) -> DiscoveryReport:
    """Ask the indexes about every followed package; write discovered.json unless ``dry_run``.

    Raises :class:`~puffer_core.matrix.simple_index.IndexUnreachable` (nothing written) when
    an index cannot be read.
    """
    urls = index_urls(index)
    path = discovered_path(out)
    old = load_discovered(path)
    kept: dict[str, dict[str, Release]] = {}
    refused: dict[str, int] = {}
    follows = follows_by_package(sources)
    for key, by_plugin in follows.items():
        releases, refused[key] = _releases(urls, key, timeout, fetch)
        chosen = {v for follow in by_plugin.values() for v in follow.new_versions(releases)}
        wanted = {v: r for v, r in releases.items() if v in chosen}
        if wanted:
            kept[key] = wanted
    report = DiscoveryReport([shown_url(url) for url in urls], path, written=False, dry_run=dry_run, releases=kept)
    added = _added_cells(sources, old, kept)
    for key, by_plugin in follows.items():
        releases = sorted(kept.get(key, {}), key=version_key, reverse=True)
        report.packages[key] = PackageNews(
            name=key,
            followed_by=sorted(by_plugin),
            releases=releases,
            new=[v for v in releases if v not in old.get(key, {})],
            cells={plugin: sorted(ids) for plugin, ids in sorted(added.get(key, {}).items())},
            refused=refused[key],
        )
    if not dry_run:
        followers = {key: list(by_plugin) for key, by_plugin in follows.items()}
        report.written = write_document(path, kept, followers, len(urls), linux_platform(), now())
    return report
