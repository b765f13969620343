"""``python -m puffer_core.tank.image.verify NAME...``: fail unless each named plugin loads.

Layer 3 runs it right after installing the plugins, so an image whose plugin cannot even
be imported is never tagged. Exit code 1 names each plugin that did not load and why.
"""

from __future__ import annotations

import sys

from puffer_core.plugins import LOADED, get_plugins


def main(argv: list[str] | None = None) -> int:
    names = sys.argv[1:] if argv is None else argv
    plugins = get_plugins()
    bad = 0
    for name in names:
        info = plugins.plugins.get(name)
        if info is None:
            print(f"puffertank: plugin {name!r} is not installed (no 'puffer' entry point named so)", file=sys.stderr)
            bad += 1
        elif info.status != LOADED:
            print(f"puffertank: plugin {name!r} did not load ({info.status}): {info.error}", file=sys.stderr)
            bad += 1
        else:
            print(f"puffertank: plugin {name} {info.version or ''}: {len(info.envs)} envs")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
