"""PufferTank layer 3: print what puffer-core and the named plugins need installed.

    python puffertank-deps.py [--root DIR] NAME...

Reads ``pyproject.toml`` of the checkout (DIR, default the working folder) and of
``plugins/NAME/`` for each NAME, and prints their ``build-system.requires`` and
``project.dependencies`` (and the ``project.optional-dependencies`` of the extras its
``[tool.puffertank] extras`` names: Ray for puffer-core), one a line, leaving out the projects installed from the
checkout itself (puffer-core, the plugins). Layer 3 installs these first, in a step that
only changes when a pyproject.toml does; the sources are then installed with --no-deps
--no-build-isolation, so an edit to them reinstalls puffer-core and the plugins in seconds.
Standard library only: it runs before puffer-core is installed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def main(argv: list[str]) -> int:
    root = Path(".")
    if argv[:1] == ["--root"]:
        root, argv = Path(argv[1]), argv[2:]
    projects = [root]
    for name in argv:
        folder = root / "plugins" / name
        if not (folder / "pyproject.toml").is_file():
            print(f"plugin {name}: plugins/{name}/pyproject.toml is not in the build context", file=sys.stderr)
            return 1
        projects.append(folder)
    tables = [tomllib.loads((folder / "pyproject.toml").read_text()) for folder in projects]
    local = {canonical(table["project"]["name"]) for table in tables}
    seen = []
    for table in tables:
        needs = table.get("build-system", {}).get("requires", []) + table["project"].get("dependencies", [])
        optional = table["project"].get("optional-dependencies", {})
        for extra in table.get("tool", {}).get("puffertank", {}).get("extras", []):
            needs += optional.get(extra, [])  # a name that is not an extra: `puffer tank compile` refuses it
        for requirement in needs:
            name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
            if name and canonical(name.group(1)) in local:
                continue
            if requirement not in seen:
                seen.append(requirement)
    print("\n".join(seen))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
