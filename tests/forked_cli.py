"""Run many `puffer` command lines, each in a process forked from one that has imported the CLI.

Each command still gets a process of its own (fresh state, its own stdout, stderr and exit
code, the same ``main()`` that ``python -m puffer_core.cli.main`` runs), but not its own
interpreter start-up and imports: about 1 s per command, which is most of what a bad-argument
case costs.

``python forked_cli.py CASES.json RESULTS.json [MODULE ...]``: CASES is a list of argument
lists; RESULTS becomes a list of ``{"returncode", "stdout", "stderr"}`` in the same order. Each
MODULE is imported before the first fork (e.g. ``torch``, which `puffer train` imports and
which takes seconds). ``plugin_site.run_puffer_many`` runs it.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
import traceback

from puffer_core.cli.main import main

#: Commands run at once (some build an env or import torch; this machine has 2 cores).
PARALLEL = 2


def _child(args: list[str], out_path: str, err_path: str) -> None:
    """In the forked child: point fds 1 and 2 at files, run the CLI, exit with its code."""
    code = 1
    try:
        for fd, path in ((1, out_path), (2, err_path)):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        sys.argv = ["puffer", *args]
        try:
            main()
            code = 0
        except SystemExit as exc:  # what the interpreter would make of it
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def run_all(cases: list[list[str]]) -> list[dict]:
    results: list[dict | None] = [None] * len(cases)
    with tempfile.TemporaryDirectory() as tmp:
        running: dict[int, tuple[int, str, str]] = {}  # pid → (case index, stdout file, stderr file)

        def reap_one() -> None:
            pid, status = os.wait()
            i, out_path, err_path = running.pop(pid)
            with open(out_path) as out, open(err_path) as err:
                results[i] = {
                    "returncode": os.waitstatus_to_exitcode(status),
                    "stdout": out.read(),
                    "stderr": err.read(),
                }

        for i, args in enumerate(cases):
            while len(running) >= PARALLEL:
                reap_one()
            out_path, err_path = os.path.join(tmp, f"{i}.out"), os.path.join(tmp, f"{i}.err")
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(args, out_path, err_path)
            running[pid] = (i, out_path, err_path)
        while running:
            reap_one()
    return results  # type: ignore[return-value]


if __name__ == "__main__":
    for module in sys.argv[3:]:
        importlib.import_module(module)
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    results = run_all(cases)
    with open(sys.argv[2], "w") as f:
        json.dump(results, f)
