# shellcheck shell=bash
# PufferTank: trust an extra CA bundle for ONE build step, without leaving it in the image.
#
# Source it at the start of a RUN step that downloads (the tank's Dockerfiles do):
#     RUN . /usr/local/lib/puffertank/ca.sh && apt-get update && ...
# When the build passes PUFFER_CA_URL (`puffer tank build --ca-cert PATH` serves the bundle
# on the host's loopback for the length of the build, which is why --ca-cert needs
# --network host), the bundle is fetched into a temporary folder, checked against the
# SHA-256 named in the URL, and apt (Acquire::https::CAInfo through APT_CONFIG), pip
# (PIP_CERT), curl, git, requests and OpenSSL (SSL_CERT_FILE) are pointed at it. The folder
# lives on /dev/shm, the build container's tmpfs, which is never part of a layer, and is
# deleted when the step's shell exits; the variables die with the step. Without
# PUFFER_CA_URL this file does nothing.
#
# The same way, PUFFER_LOCK_URL (`puffer tank build --lock FILE`) is a lock of an earlier
# image (`puffer tank lock IMAGE`) served on the loopback: it is fetched, checked and added
# to PIP_CONSTRAINT, so every pip install of the step resolves to the locked versions.
# PUFFER_LOCK_HASHES_URL (layer 1 only) is the same lock with each file's sha256: fetched
# into PUFFER_LOCK_HASHES, a constraint file layer 1's PyTorch step installs under with
# --require-hashes, so PyTorch and everything it pulls in match the lock byte for byte.
# Needs bash (the fetch uses /dev/tcp: the base image may have no curl yet).

# __puffer_fetch URL FILE: GET http://HOST:PORT/SHA256.EXT into FILE, checked against SHA256.
__puffer_fetch() {
    local rest hostport path host port line digest
    rest="${1#http://}"
    hostport="${rest%%/*}"
    path="/${rest#*/}"
    host="${hostport%:*}"
    port="${hostport##*:}"
    exec 3<>"/dev/tcp/${host}/${port}" || return 1
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$path" "$hostport" >&3
    IFS= read -r line <&3 || return 1
    case "$line" in
        "HTTP/"*" 200 "*) ;;
        *) echo "puffertank: the build's file server answered: ${line%$'\r'}" >&2; return 1 ;;
    esac
    while IFS= read -r line <&3; do
        [ -z "${line%$'\r'}" ] && break
    done
    cat <&3 >"$2"
    exec 3<&-
    digest="${path##*/}"
    digest="${digest%.*}"
    echo "${digest}  $2" | sha256sum -c --status - || {
        echo "puffertank: the file fetched from $1 does not match its SHA-256" >&2
        return 1
    }
}

# __puffer_fetch_or_exit URL FILE WHAT OPTION: __puffer_fetch, or one line saying why the build stops.
__puffer_fetch_or_exit() {
    __puffer_fetch "$1" "$2" && return 0
    echo "puffertank: cannot fetch $3 from $1;" \
        "builds with $4 need host networking (puffer tank build --network host)" >&2
    exit 1
}

if [ -n "${PUFFER_CA_URL:-}${PUFFER_LOCK_URL:-}${PUFFER_LOCK_HASHES_URL:-}" ]; then
    if [ -d /dev/shm ] && [ -w /dev/shm ]; then
        __puffer_ca_dir="$(mktemp -d /dev/shm/puffer-ca.XXXXXX)"
    else
        __puffer_ca_dir="$(mktemp -d /tmp/puffer-ca.XXXXXX)"
    fi
    trap 'rm -rf "$__puffer_ca_dir"' EXIT
fi

if [ -n "${PUFFER_CA_URL:-}" ]; then
    __puffer_fetch_or_exit "$PUFFER_CA_URL" "$__puffer_ca_dir/ca.pem" "the CA bundle" --ca-cert
    printf 'Acquire::https::CAInfo "%s";\n' "$__puffer_ca_dir/ca.pem" >"$__puffer_ca_dir/apt.conf"
    export APT_CONFIG="$__puffer_ca_dir/apt.conf"
    export PIP_CERT="$__puffer_ca_dir/ca.pem"
    export SSL_CERT_FILE="$__puffer_ca_dir/ca.pem"
    export REQUESTS_CA_BUNDLE="$__puffer_ca_dir/ca.pem"
    export CURL_CA_BUNDLE="$__puffer_ca_dir/ca.pem"
    export GIT_SSL_CAINFO="$__puffer_ca_dir/ca.pem"
fi

if [ -n "${PUFFER_LOCK_URL:-}" ]; then
    __puffer_fetch_or_exit "$PUFFER_LOCK_URL" "$__puffer_ca_dir/lock.txt" "the lock" --lock
    # pip splits PIP_CONSTRAINT on white space: the lock joins the step's other constraints.
    export PIP_CONSTRAINT="${PIP_CONSTRAINT:+$PIP_CONSTRAINT }$__puffer_ca_dir/lock.txt"
fi

if [ -n "${PUFFER_LOCK_HASHES_URL:-}" ]; then
    __puffer_fetch_or_exit "$PUFFER_LOCK_HASHES_URL" "$__puffer_ca_dir/lock-hashes.txt" "the lock's hashes" --lock
    export PUFFER_LOCK_HASHES="$__puffer_ca_dir/lock-hashes.txt"
fi
unset -f __puffer_fetch __puffer_fetch_or_exit
