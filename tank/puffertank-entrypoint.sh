#!/bin/bash
# PufferTank entrypoint: give any uid a writable HOME, print what is installed, warn when no
# GPU is visible, resume a login container's interrupted runs, run the command.
# PUFFERTANK_QUIET=1 skips the banner. The banner goes to stderr, so a command's stdout
# (`puffer envs --json`) stays clean.
set -euo pipefail

# `puffer tank shell/run` run as the caller's uid:gid (so files written to the mounted
# checkout belong to the caller), which has no passwd entry here: Docker then sets HOME=/,
# where nothing can be written (pip caches, matplotlib and shell history live in HOME).
if [ "${HOME:-/}" = / ] || [ ! -w "${HOME}" ]; then
    HOME="/tmp/puffertank-home-$(id -u)"
    export HOME
    mkdir -p "$HOME"
fi

if [ -z "${PUFFERTANK_QUIET:-}" ]; then
    python - <<'PY' >&2 || true
import importlib.metadata as md
import platform

def version(dist):
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None

parts = [f"python {platform.python_version()}", f"puffer-core {version('puffer-core') or 'missing'}"]
plugins = sorted(
    {f"{ep.dist.metadata['Name']} {ep.dist.version}" for ep in md.entry_points(group="puffer") if ep.dist is not None}
)
parts += plugins or ["no plugins"]
if version("torch"):
    parts.append(f"torch {version('torch')}")
print("puffertank: " + ", ".join(parts))
PY
    if ! command -v nvidia-smi >/dev/null 2>&1; then
        echo "puffertank: warning: no GPU visible (nvidia-smi not found); running on the CPU." \
            "For a GPU, run with --gpus all on a host with the NVIDIA Container Toolkit." >&2
    elif ! nvidia-smi -L >/dev/null 2>&1; then
        echo "puffertank: warning: no GPU visible (nvidia-smi failed); running on the CPU." \
            "For a GPU, run with --gpus all on a host with the NVIDIA Container Toolkit." >&2
    fi
fi

# A login container (the broker sets PUFFERTANK_RESUME_RUNS) resumes the user's runs that a
# crash, a power loss or an engine restart interrupted and that asked for it (`puffer train
# --detach`): in the background, at most once per boot each (`puffer runs resume --help`).
if [ -n "${PUFFERTANK_RESUME_RUNS:-}" ] && command -v puffer >/dev/null 2>&1; then
    log="${XDG_STATE_HOME:-$HOME/.local/state}/puffer/resume.log"
    if mkdir -p "$(dirname "$log")" 2>/dev/null; then
        setsid puffer runs resume --interrupted --auto >>"$log" 2>&1 </dev/null &
    fi
fi

if [ "$#" -eq 0 ]; then
    set -- bash
fi
exec "$@"
