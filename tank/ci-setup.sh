#!/usr/bin/env bash
# Prepare this machine for PufferTank's real build tests (tests/tank/test_tank_docker.py):
#   1. Debian's docker.io (the engine), debootstrap and docker-registry (the registry the
#      push/pull tests start on 127.0.0.1; its own service is left stopped), installed if missing;
#   2. a Docker engine answering on DOCKER_HOST (default unix:///var/run/docker.sock),
#      started as `dockerd --iptables=false --bridge=none` when none answers
#      (builds then need host networking: `puffer tank build --network host`);
#   3. the base image puffertank-debian:bookworm (Debian 12, Python 3.11 in its apt),
#      made with `debootstrap --variant=minbase` from the Debian mirror this machine's own
#      apt sources use, because the engine cannot pull images here. An imported image has
#      no registry digest: `puffer tank build --base-image` records it by its image id.
# Idempotent and fast when everything is already in place. Run as root.
# Environment: PUFFERTANK_DEBIAN_IMAGE (image name), PUFFERTANK_DEBIAN_MIRROR (mirror URL
# instead of the one read from /etc/apt/sources.list*), PUFFERTANK_DOCKERD_LOG (log file).
set -euo pipefail

IMAGE="${PUFFERTANK_DEBIAN_IMAGE:-puffertank-debian:bookworm}"
SUITE=bookworm
LOG="${PUFFERTANK_DOCKERD_LOG:-/var/log/puffertank-dockerd.log}"

say() { printf 'tank/ci-setup: %s\n' "$*" >&2; }

# -- 1. packages --------------------------------------------------------------------------
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
[[ -x /usr/bin/docker-registry ]] || missing+=(docker-registry)
if ((${#missing[@]})); then
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if [[ " ${missing[*]} " == *" docker-registry "* ]] && [[ -d /run/systemd/system ]]; then
        # The tests start their own registry on 127.0.0.1; the package's service listens on :5000, every interface.
        say "stopping and disabling the docker-registry service the package started"
        systemctl disable --now docker-registry >/dev/null 2>&1 || true
    fi
fi

# -- 2. the engine ------------------------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
    if [[ -n "${DOCKER_HOST:-}" && "${DOCKER_HOST}" != unix:///var/run/docker.sock ]]; then
        say "DOCKER_HOST=${DOCKER_HOST} does not answer; unset it to let this script start a local dockerd"
        exit 1
    fi
    say "starting dockerd (log: $LOG)"
    nohup dockerd --iptables=false --bridge=none >"$LOG" 2>&1 &
    for _ in $(seq 1 120); do
        if docker info >/dev/null 2>&1; then break; fi
        sleep 0.5
    done
    if ! docker info >/dev/null 2>&1; then
        say "dockerd did not come up within 60 s; last lines of $LOG:"
        tail -n 20 "$LOG" >&2 || true
        exit 1
    fi
fi

# -- 3. the debootstrapped base image -----------------------------------------------------
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    say "engine up, $IMAGE present"
    exit 0
fi

mirror="${PUFFERTANK_DEBIAN_MIRROR:-}"
if [[ -z "$mirror" ]]; then
    # The first Debian source of this machine that serves the suite (one-line or deb822 format).
    mirror="$(python3 - "$SUITE" <<'PY'
import glob, sys
suite = sys.argv[1]
entries = []  # (uris, suites, components)
for path in ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]:
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError:
        continue
    for line in lines:
        parts = line.split("#", 1)[0].split()
        if parts and parts[0] == "deb":
            parts = [p for p in parts[1:] if not p.startswith("[")]  # drop [options]
            if len(parts) >= 3:
                entries.append(([parts[0]], [parts[1]], parts[2:]))
for path in sorted(glob.glob("/etc/apt/sources.list.d/*.sources")):
    try:
        text = open(path, encoding="utf-8").read()
    except OSError:
        continue
    for para in text.split("\n\n"):
        fields = {}
        for line in para.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.split()
        if "deb" in fields.get("types", []) and fields.get("enabled", ["yes"]) != ["no"]:
            entries.append((fields.get("uris", []), fields.get("suites", []), fields.get("components", [])))
for uris, suites, components in entries:
    if suite in suites and "main" in components and uris:
        print(uris[0])
        break
PY
)"
fi
if [[ -z "$mirror" ]]; then
    say "no apt source for Debian $SUITE found in /etc/apt/sources.list*; set PUFFERTANK_DEBIAN_MIRROR"
    exit 1
fi

say "building $IMAGE with debootstrap from $mirror"
root="$(mktemp -d /var/tmp/puffertank-rootfs.XXXXXX)"
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase "$SUITE" "$root" "$mirror" >/dev/null
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
tar --numeric-owner -C "$root" -c . | docker import - "$IMAGE" >/dev/null
say "built $IMAGE"
