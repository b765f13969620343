"""What a matrix run is asked to do (:class:`RunOptions`) and how it reports as it goes (:data:`Reporter`)."""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from puffer_core.matrix.shipped import shipped_folder
from puffer_core.matrix.store import CellRecord

__all__ = ["DEFAULT_TANK_IMAGE", "DEFAULT_TIMEOUT", "REPO_ROOT", "Reporter", "RunOptions"]

DEFAULT_TIMEOUT = 1800.0
#: The image tank-only cells run in: what ``puffer tank build`` tags by default.
DEFAULT_TANK_IMAGE = "puffertank:latest"
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

#: ``report(event, record, info)``: ``discovered`` (``info["report"]``: a DiscoveryReport), ``start``,
#: ``would-run``, ``building``, ``cell-start``, ``cell``
#: (with the record), ``common-start`` and ``common``; see :func:`puffer_core.matrix.runner.run_matrix`.
Reporter = Callable[[str, CellRecord | None, dict[str, Any]], None]


@dataclass
class RunOptions:
    root: pathlib.Path = REPO_ROOT  # the core's source tree
    out: pathlib.Path | None = None  # default <root>/compat_matrix
    plugins_dir: pathlib.Path | None = None  # default <root>/plugins
    work: pathlib.Path | None = None  # venvs and wheels; default <out>/.venvs
    plugins: list[str] = field(default_factory=list)
    pythons: list[str] = field(default_factory=list)
    quick: bool = False
    force: bool = False
    jobs: int = 1
    timeout: float = DEFAULT_TIMEOUT
    common: bool = True
    keep_venvs: bool = False
    builtins: bool = True
    dry_run: bool = False  # list what would run, change nothing
    #: Variables (names or ``*``/``?`` globs) cells get besides the allowlist (see environment.py).
    pass_env: list[str] = field(default_factory=list)
    #: Where the shipped verdicts go (:mod:`~puffer_core.matrix.shipped`); default: the package's
    #: own ``matrix/verified/`` when ``out`` is the checkout's compat_matrix/, else nowhere.
    shipped: pathlib.Path | None = None
    #: Ask the package index for new releases first (``--discover``), at ``index`` if given.
    discover: bool = False
    index: str | None = None
    #: The PufferTank image tank-only cells run in (:mod:`~puffer_core.matrix.tank_cells`).
    tank_image: str = DEFAULT_TANK_IMAGE

    def __post_init__(self) -> None:
        self.root = pathlib.Path(self.root).resolve()
        self.out = pathlib.Path(self.out).resolve() if self.out else self.root / "compat_matrix"
        self.plugins_dir = pathlib.Path(self.plugins_dir).resolve() if self.plugins_dir else self.root / "plugins"
        self.work = pathlib.Path(self.work).resolve() if self.work else self.out / ".venvs"
        if self.shipped is not None:
            self.shipped = pathlib.Path(self.shipped).resolve()
        else:
            self.shipped = shipped_folder(self.root, self.out)

    @property
    def full(self) -> bool:
        """A run over every cell of every plugin (what a cold-run rate is quoted for)."""
        return not (self.plugins or self.pythons or self.quick)

    def shown(self, path: pathlib.Path) -> str:
        """``path`` as results.json records it: relative to the source tree when inside it."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)
