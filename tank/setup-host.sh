#!/usr/bin/env bash
# tank/setup-host.sh: a Debian 12 (bookworm) machine → a puffer box. Run as root.
#
# Installs the Docker engine, git, vim, tmux, curl, Python, sudo; where an NVIDIA GPU is on the
# PCI bus, the driver and the NVIDIA Container Toolkit; puffer-core (this checkout) in a venv with
# `puffer` and the login shell `puffertank-login` on PATH; registers that shell in /etc/shells;
# installs the broker, the one program between users and the engine (group puffertank, one sudo
# rule); writes the limits of each user's tanks; keeps enrolled users' code in their tanks (an
# sshd drop-in for the group, no ~/.pam_environment, no systemd user manager); records the box's
# image (--image) and enrols users (--user), closing the account of those taken off. Every step
# checks first and logs one line; a second run changes nothing and says so. `--help` lists the options.
#
# It never opens a port and never configures a VPN: how users reach the box (Tailscale,
# WireGuard, a LAN) stays the admin's choice.
#
# It runs as root, so it takes nothing from anyone else: a fixed PATH, root's own HOME, umask
# 022 (the venv is for every user), the caller's environment emptied except the settings
# that reach the package index (KEPT_ENV), Debian's /usr/bin/python3 by absolute path (a
# python3 of root's, e.g. pyenv's under 0700 /root, would make a venv no user can run), and
# a source tree only root can change (check_source).
set -Eeuo pipefail
umask 022
SYSFS="${PUFFER_SETUP_SYSFS:-/sys}"             # tests point this at a fake PCI bus
# Kept from the caller: the package index, the CA bundle pip trusts for it (checked like the
# source: root's alone), pip's timeout, the proxies. Root's own pip settings belong in
# /etc/pip.conf or root's ~/.config/pip/pip.conf, which pip still reads.
KEPT_ENV=" PIP_INDEX_URL PIP_CERT PIP_DEFAULT_TIMEOUT http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY TERM "
for _name in $(compgen -e); do
    [[ $KEPT_ENV == *" $_name "* ]] || unset -v "$_name" 2>/dev/null || true
done
unset -v _name
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C
HOME=$(getent passwd 0 | cut -d: -f6) || true
export HOME=${HOME:-/root}

PROG=setup-host
VENV=/opt/puffertank/venv
FINGERPRINT="$VENV/puffertank-source.sha256"   # what the venv was installed from
LOGIN=/usr/local/bin/puffertank-login
BROKER=/usr/local/sbin/puffertank-broker         # the one program group puffertank may run as root
GROUP=puffertank
SUDOERS=/etc/sudoers.d/puffertank
STATE_DIR=/var/lib/puffertank/containers         # the broker's record: container id → owner
DOCKER_CONFIG_DIR=/etc/puffertank/docker         # the broker's DOCKER_CONFIG: root's, no CLI plugin of anyone's
IMAGE_FILE=/etc/puffertank/image
DEFAULT_IMAGE=puffertank:latest
LIMITS_FILE=/etc/puffertank/limits              # each tank's memory, swap, processes, CPU share; tanks per user
SSHD_DROPIN=/etc/ssh/sshd_config.d/puffertank.conf
UNITS=/etc/systemd/system                       # where a user's systemd manager is masked (user@UID.service)
LINGER_DIR=/var/lib/systemd/linger
CRON_SPOOL=/var/spool/cron/crontabs
LOG=/var/log/puffertank-setup.log               # output of the commands that change the box
BASE_PACKAGES=(git vim tmux curl ca-certificates python3 python3-venv sudo)
PYTHON=/usr/bin/python3                          # Debian's, from BASE_PACKAGES: the venv's home
DOCKER_URL=https://download.docker.com/linux/debian
DOCKER_KEY=/etc/apt/keyrings/docker.asc
DOCKER_SOURCES=/etc/apt/sources.list.d/docker.sources
NV_URL=https://nvidia.github.io/libnvidia-container
NV_KEY=/etc/apt/keyrings/nvidia-container-toolkit.asc
NV_LIST=/etc/apt/sources.list.d/nvidia-container-toolkit.list
# Bounded waits: the dpkg lock, each download, each retry.
APT=(apt-get -q -o DPkg::Lock::Timeout=120 -o Acquire::Retries=3
    -o Acquire::http::Timeout=60 -o Acquire::https::Timeout=60)
CURL=(curl -fsSL --max-time 120 --retry 3)

usage() {
    cat <<EOF
Usage: tank/setup-host.sh [OPTIONS]

Turns a Debian 12 (bookworm) machine into a puffer box. Run as root. Idempotent: each step
checks first and logs one line ("setup-host: STEP: what happened"); a second run changes
nothing and ends with "(nothing changed)". The last lines give each step's seconds.

Options:
  --dry-run            print what each step would do; change nothing
  --docker-repo REPO   where the engine comes from: debian (default: Debian's docker.io) or
                       docker (Docker's own apt repository and signed key: docker-ce,
                       docker-ce-cli, containerd.io; refused while docker.io is installed)
  --source DIR         the puffer-core checkout to install (default: the one holding this script).
                       pip builds it as root, so it must be root's alone: DIR, each folder
                       above it, and every file and folder pip reads in it (pyproject.toml,
                       puffer_core/, the constraints file; a symbolic link by what it points
                       to) owned by root and not writable by group or others; otherwise
                       refused (chown -R root:root DIR && chmod -R go-w DIR, or a root-owned copy)
  --image REF          the box's current PufferTank image, written to $IMAGE_FILE (the broker
                       makes users' containers from it; without the file it uses
                       $DEFAULT_IMAGE). Pin it by digest, REPO@sha256:DIGEST (what
                       puffer tank push prints): a registry's tag names whatever was pushed last.
                       A digest the box does not hold is pulled first (puffer tank pull,
                       verified), and the file changes only once it is here
  --user NAME          enrol NAME (repeatable): create it if missing (useradd -m, home 0700),
                       login shell $LOGIN, member of group $GROUP, never of group
                       docker (root-equivalent; a rerun takes enrolled users out of it). Not
                       root, not a system account
  --fix-homes          make enrolled users' homes 0700 where others can read them (without
                       it, each such home gets one warning line and is left as it is)
  --exact-users        the --user list is this box's whole list: every other enrolled user is
                       taken off the box, their account closed: expired (no login, no key, no
                       ssh forward), sessions ended, crontab and linger removed, login shell
                       nologin, out of group $GROUP, their containers stopped; home and
                       files kept. Enrolling them again opens it. One line each (the fleet's
                       playbook, tank/fleet/site.yml, runs it so)
  --memory SIZE        each tank's memory, e.g. 48G (default: the box's memory less a reserve
                       for the host, at least 2G or 10%, divided by --tanks)
  --swap SIZE          each tank's swap beyond --memory (default 0)
  --pids N             each tank's processes and threads (default 4096)
  --cpu-shares N       each tank's CPU weight when the cores are contended (default 1024: equal)
  --tanks N            containers per user, puffertank-USER and its --new siblings (default 2)
                       The five limits go to $LIMITS_FILE; an option not given keeps the
                       file's value, 'auto' puts back the default. The broker applies them to
                       every tank it makes or joins, and this script to every tank already made
  --no-nvidia          skip the NVIDIA steps even where an NVIDIA GPU is present
  --print-sshd-config  print the sshd drop-in this script writes, and exit
  -h, --help           this text

Steps: packages (${BASE_PACKAGES[*]} and the engine; apt-get update only when something
is missing), engine (systemctl enable --now docker where systemd is PID 1), nvidia (only with
an NVIDIA GPU on the PCI bus: Debian's nvidia-driver from non-free, which needs the apt
components contrib non-free non-free-firmware; NVIDIA's container toolkit from NVIDIA's
repository; nvidia-ctk runtime configure --runtime=docker and a docker restart), puffer
(puffer-core[tank] in the venv $VENV by $PYTHON, made again only when the source
changed or users could not run it), links (/usr/local/bin/puffer), scripts ($LOGIN
and $BROKER, run as python -I), broker (group $GROUP, $SUDOERS
letting it run $BROKER as root and nothing else, checked with visudo -c;
$STATE_DIR and $DOCKER_CONFIG_DIR, root's alone), limits ($LIMITS_FILE), sshd
($SSHD_DROPIN: for group $GROUP every session runs the login, sftp included;
forwarding one way only, ssh -L; no agent or X11 forwarding, tunnel or ~/.ssh/rc; checked with
sshd -t and reloaded), pam (user_readenv=0 wherever pam_env read ~/.pam_environment), shells
($LOGIN in /etc/shells), image, docker group (every enrolled user taken out of
group docker), old containers (login containers made before the broker, named for removal),
user NAME (and no systemd user manager, user@UID.service masked, no linger), other users
(with --exact-users: each enrolled user not named, taken off and their account closed).

Never: opens a port, touches the firewall, configures Tailscale or any VPN (the admin's
choice), removes a package. A failed step is undone where it can be (files are written to a
temporary name and moved; a failed venv install puts the previous venv back) and the steps
after it do not run. Command output goes to $LOG.

Environment: emptied but for PIP_INDEX_URL, PIP_CERT (a file root's alone), PIP_DEFAULT_TIMEOUT,
the proxy variables and TERM; PATH is /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin,
HOME root's, umask 022; the venv is made by $PYTHON. PUFFER_SETUP_SYSFS (default /sys):
where the PCI bus is read (for tests).
Exit codes: 0 done, 1 a step failed, 2 refused (bad option, not root, not Debian 12).
EOF
}

say() { printf '%s: %s\n' "$PROG" "$*"; }
die() { printf '%s: %s\n' "$PROG" "$*" >&2; exit 2; }   # refused before anything changed
now_us() { local t=${EPOCHREALTIME/[.,]/}; echo "$t"; }
secs() { printf '%d.%d s' $(($1 / 1000000)) $(($1 / 100000 % 10)); }

# -- options ------------------------------------------------------------------------------
ARGS=("$@") DRY=0 REPO=debian SRC="" IMAGE="" NVIDIA=1 USERS=() FIX_HOMES=0 EXACT=0 LIMITS=() PRINT_SSHD=0
need_value() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value; see --help"; }
limit() { # OPTION VALUE: one of the limits, checked for its form here and its range by the limits step
    local key=${1#--} pattern='^[0-9]+$'
    key=${key//-/_}
    if [[ $key == memory || $key == swap ]]; then pattern='^[0-9]+(\.[0-9]+)?[KMGTkmgt]?$'; fi
    [[ $2 == auto || $2 =~ $pattern ]] ||
        die "$1 '$2' is not $([[ $key == memory || $key == swap ]] && echo 'a size (e.g. 48G)' || echo 'a whole number') or auto; see --help"
    LIMITS+=("$key=$2")
}
while (($#)); do
    case $1 in
        --dry-run) DRY=1 ;;
        --docker-repo) need_value "$@"; REPO=$2; shift ;;
        --source) need_value "$@"; SRC=$2; shift ;;
        --image) need_value "$@"; IMAGE=$2; shift ;;
        --user) need_value "$@"; USERS+=("$2"); shift ;;
        --user=*) USERS+=("${1#--user=}") ;;
        --exact-users) EXACT=1 ;;
        --no-nvidia) NVIDIA=0 ;;
        --fix-homes) FIX_HOMES=1 ;;
        --memory | --swap | --pids | --cpu-shares | --tanks) need_value "$@"; limit "$1" "$2"; shift ;;
        --print-sshd-config) PRINT_SSHD=1 ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown option '$1'; see --help" ;;
    esac
    shift
done

# -- checks before anything changes -------------------------------------------------------
os_field() { sed -n "s/^$1=//p" /etc/os-release | head -n1 | tr -d '"'; }

check_system() {
    ((EUID == 0)) || die "must run as root (running as uid $EUID): sudo $0 ${ARGS[*]}"
    [[ -r /etc/os-release ]] || die "no /etc/os-release: cannot tell the system; this script is for Debian 12 (bookworm)"
    local id version pretty
    id=$(os_field ID) version=$(os_field VERSION_ID) pretty=$(os_field PRETTY_NAME)
    [[ $id == debian && $version == 12 ]] ||
        die "not Debian 12 (bookworm): /etc/os-release says ID=${id:-?} VERSION_ID=${version:-?} (${pretty:-no PRETTY_NAME}); run it on a Debian 12 machine"
}

is_checkout() { [[ -d $1/puffer_core ]] && grep -qs '^name = "puffer-core"' "$1/pyproject.toml"; }
# What root builds and runs must be root's alone: pip builds puffer-core as root and
# `puffer --version` runs it as root, so whoever can change a file it is built from, or a folder
# above one, runs code as root. Root's alone: owned by root, writable by no group or other
# user (a group's write also shows in the mode when an ACL grants it). A folder above may be
# world-writable with the sticky bit, as /tmp is: no one else can rename or remove what root
# owns there. A symbolic link is judged by what it points to (and the folders above that).
not_roots() { # PATH [above]: why PATH (no link) is not root's alone, or nothing
    local uid mode user who=others
    read -r uid mode user <<<"$(stat -c '%u %a %U' -- "$1")"
    if ((uid != 0)); then
        echo "owned by $user (uid $uid), mode $mode"
        return 0
    fi
    ((8#$mode & 8#022)) || return 0
    if [[ -n ${2:-} && -d $1 ]] && ((8#$mode & 8#1000)); then return 0; fi  # a sticky folder above (/tmp)
    if ((8#$mode & 8#020)); then who=group; fi
    if ((8#$mode & 8#020 && 8#$mode & 8#002)); then who="group and others"; fi
    echo "owned by root but writable by $who (mode $mode)"
}

folders_above() { # PATH (absolute, no links): /, then each folder down to PATH's own
    local p=$1 folders=()
    while [[ $p != / ]]; do p=$(dirname -- "$p"); folders=("$p" "${folders[@]}"); done
    printf '%s\n' "${folders[@]}"
}

first_not_roots() { # PATH (absolute, no links): "P is WHY" for the first of its folders (from /), or it, not root's alone
    local dir why
    while IFS= read -r dir; do
        why=$(not_roots "$dir" above)
        if [[ -n $why ]]; then echo "$dir, a folder above it, is $why"; return; fi
    done < <(folders_above "$1")
    why=$(not_roots "$1")
    if [[ -n $why ]]; then echo "$1 is $why"; fi
}

check_source() { # WHAT: refuse a source someone other than root could change (before anything changes)
    local what=$1 copy="cp -r $SRC /usr/local/src/puffer-core as root and pass --source /usr/local/src/puffer-core"
    local dir why entry target found=()
    while IFS= read -r dir; do
        why=$(not_roots "$dir" above)
        [[ -z $why ]] ||
            die "$what refused: $dir, a folder above it, is $why: whoever can change it can put another tree in its place, which pip builds as root; fix: copy the checkout to a folder root's alone ($copy), or make the folder root's (chown root:root $dir && chmod go-w $dir)"
    done < <(folders_above "$SRC")
    # The tree as source_files lists it (links in puffer_core/ are not copied): one find, its first offender.
    mapfile -t found < <(find "$SRC/puffer_core" -name __pycache__ -prune -o ! -type l \( ! -uid 0 -o -perm /022 \) -print -quit)
    for entry in "$SRC" "${found[@]}" "$SRC"/{pyproject.toml,setup.py,setup.cfg,MANIFEST.in,README.md,LICENSE,LICENSE.txt} \
        "$SRC/compat_matrix" "$SRC/compat_matrix/constraints-common.txt"; do
        if [[ -L $entry ]]; then
            target=$(realpath -e -- "$entry") ||
                die "$what refused: $entry is a link to $(readlink -- "$entry"), which does not exist: whoever makes it changes what pip builds as root; fix: remove the link or put a file root owns in its place"
            why=$(first_not_roots "$target")
            [[ -z $why ]] ||
                die "$what refused: $entry is a link to $target; $why: whoever can change it changes what pip builds as root; fix: replace the link with a copy root owns (cp --remove-destination $target $entry && chmod go-w $entry)"
        elif [[ -e $entry ]]; then
            why=$(not_roots "$entry")
            [[ -z $why ]] ||
                die "$what refused: $entry is $why: pip builds it as root, so whoever can change it runs code as root; fix: once you trust what it holds, chown -R root:root $SRC && chmod -R go-w $SRC, or copy it ($copy)"
        fi
    done
}

check_script() { # this script, when it is a file: root runs it, so it too must be root's alone
    local why
    [[ -n ${BASH_SOURCE[0]:-} && -f ${BASH_SOURCE[0]} ]] || return 0
    why=$(first_not_roots "$(realpath -e -- "${BASH_SOURCE[0]}")")
    [[ -z $why ]] ||
        die "this script refused: $why: whoever can change it runs code as root; fix: run it from a copy of the checkout root owns (as root: cp -r CHECKOUT /usr/local/src/puffer-core)"
}

check_pip_cert() { # PIP_CERT, when given: the CA bundle root's pip trusts for the index
    [[ -n ${PIP_CERT:-} ]] || return 0
    local target why
    target=$(realpath -e -- "$PIP_CERT") ||
        die "PIP_CERT=$PIP_CERT: no such file; name the CA bundle pip should trust, or unset it"
    why=$(first_not_roots "$target")
    [[ -z $why ]] ||
        die "PIP_CERT=$PIP_CERT refused: $why: whoever can change the CA bundle root's pip trusts can serve it any package; fix: chown root:root $target && chmod go-w $target, or point PIP_CERT at a copy root owns"
}

installed() { [[ $(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) == "install ok installed" ]]; }

check_options() {
    [[ $REPO == debian || $REPO == docker ]] || die "--docker-repo '$REPO' is not debian or docker"
    if [[ $REPO == docker ]]; then
        local pkg
        for pkg in docker.io containerd runc; do
            ! installed "$pkg" || die "--docker-repo docker: Debian's $pkg is installed and conflicts with Docker's packages; remove it first (apt-get remove docker.io containerd runc) or use --docker-repo debian"
        done
    fi
    local what="--source $SRC"
    if [[ -z $SRC ]]; then
        [[ -n ${BASH_SOURCE[0]:-} && -f ${BASH_SOURCE[0]} ]] || die "cannot tell which checkout holds this script; pass --source DIR"
        SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
        what="the checkout holding this script, $SRC (the default --source),"
    fi
    [[ -d $SRC ]] || die "--source $SRC is not a directory; pass the puffer-core checkout's root"
    SRC=$(cd "$SRC" && pwd -P)   # the real folders: a link above it is judged by where it leads
    is_checkout "$SRC" ||
        die "$SRC is not a puffer-core checkout (no puffer_core/ and pyproject.toml naming puffer-core); pass its root with --source DIR"
    check_source "$what"
    check_script
    check_pip_cert
    if ((${#LIMITS[@]})) && limits_module; then  # their ranges, where the venv can tell already
        local why
        why=$("$VENV/bin/python" -I -m puffer_core.tank.box.limits /dev/null "${LIMITS[@]}" 2>&1 >/dev/null) ||
            die "${why#limits: }; see --help"
    fi
    [[ -z $IMAGE ]] || valid_image "$IMAGE" ||
        die "--image '$IMAGE' is not an image reference (NAME[:TAG][@sha256:DIGEST], e.g. $DEFAULT_IMAGE)"
    local name seen=" "
    for name in "${USERS[@]}"; do
        check_user "$name"
        [[ $seen == *" $name "* ]] || seen+="$name "
    done
    read -r -a USERS <<<"$seen"
}

valid_image() {
    local part='[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*' label='[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?'
    local re="^(${label}(\\.${label})*(:[0-9]+)?/)?${part}(/${part})*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$"
    [[ ${#1} -le 255 && $1 =~ $re ]]
}

check_user() {
    local name=$1 uid uid_min
    [[ $name != root ]] || die "--user root refused: root keeps its own shell; enrol a regular user"
    [[ $name =~ ^[a-z_][a-z0-9_-]{0,31}$ ]] ||
        die "--user '$name' is not a valid user name: lowercase letters, digits, '-' and '_', starting with a letter or '_', at most 32 characters"
    uid=$(getent passwd "$name" | cut -d: -f3) || true
    uid_min=$(awk '$1 == "UID_MIN" {print $2}' /etc/login.defs 2>/dev/null) || true
    [[ -z $uid ]] || ((uid >= ${uid_min:-1000})) ||
        die "--user $name refused: it is a system account (uid $uid < ${uid_min:-1000}); enrol a regular user"
}

# -- step machinery -----------------------------------------------------------------------
STEP=checks KEPT="" CHANGED=() TIMES=() RB_NEW=() RB_SAVED=() TEMPS=() APT_FRESH=0 LOGGED=0 T_START=$(now_us)

note() { say "$STEP: $*"; }                      # the step's one line
did() { CHANGED+=("$STEP"); note "$*"; }         # it changed the box
would() { CHANGED+=("$STEP"); note "would $*"; } # a dry run: it would change the box
already() { note "already in place ($*)"; }

step() { # NAME FUNCTION [ARGS...]: run one step, timed, with its own undo list
    STEP=$1 KEPT=""
    shift
    RB_NEW=() RB_SAVED=()
    local t0
    t0=$(now_us)
    "$@"
    TIMES+=("$STEP $(secs $(($(now_us) - t0)))")
    RB_NEW=() RB_SAVED=()
}

undo_step() { # put back what the failed step wrote: files it made go, files it replaced return
    local path pair
    for path in "${RB_NEW[@]}"; do rm -rf -- "$path"; done
    for pair in "${RB_SAVED[@]}"; do mv -f -- "${pair#* }" "${pair%% *}"; done
}

fail() { # one line naming what failed; the step undone; the run stops
    trap - ERR
    printf '%s: %s: FAILED: %s%s\n' "$PROG" "$STEP" "$*" "${KEPT:+; not undone: $KEPT}" >&2
    undo_step
    local done_list
    done_list=$(comma_list "${CHANGED[@]}")
    printf '%s: stopped at step %s after %s (changed before it: %s); the steps after it did not run\n' \
        "$PROG" "$STEP" "$(secs $(($(now_us) - T_START)))" "${done_list:-nothing}" >&2
    exit 1
}
trap 'fail "\"$BASH_COMMAND\" exited $? (line $LINENO)"' ERR
trap 'rm -rf -- "${TEMPS[@]}"' EXIT

run() { # a command that changes the box: its output to $LOG; on failure its last lines and stop
    if ((!LOGGED)); then
        printf '== %s %s\n' "$(date -u +%FT%TZ)" "$PROG" >>"$LOG"
        LOGGED=1
    fi
    printf '+ %s\n' "$*" >>"$LOG"
    local rc=0
    "$@" >>"$LOG" 2>&1 || rc=$?
    if ((rc)); then
        tail -n 10 "$LOG" | sed 's/^/    | /' >&2
        fail "'$*' exited $rc (full output: $LOG)"
    fi
}

save_for_undo() { # PATH: the step's undo puts PATH back as it is now (or removes it, when it is new)
    local saved
    if [[ -e $1 ]]; then
        saved=$(mktemp "$1.previous.XXXXXX")
        cp -p -- "$1" "$saved"
        RB_SAVED+=("$1 $saved")
        TEMPS+=("$saved")
    else
        RB_NEW+=("$1")
    fi
}

put_file() { # PATH MODE TEMPFILE: move TEMPFILE into PATH (same filesystem: atomic), undoable
    chmod "$2" "$3"
    save_for_undo "$1"
    mv -f -- "$3" "$1"
}

make_dir() { # DIR: made if missing, and then undone with the step
    if [[ ! -d $1 ]]; then
        install -d -m 0755 "$1"
        RB_NEW+=("$1")
    fi
}

write_file() { # PATH MODE CONTENT
    local tmp
    make_dir "$(dirname "$1")"
    tmp=$(mktemp "$1.new.XXXXXX")
    TEMPS+=("$tmp")
    printf '%s\n' "$3" >"$tmp"
    put_file "$1" "$2" "$tmp"
}

fetch_key() { # URL PATH: an apt signing key (ASCII-armored: apt reads .asc keyrings as they are)
    local tmp
    make_dir "$(dirname "$2")"
    tmp=$(mktemp "$2.new.XXXXXX")
    TEMPS+=("$tmp")
    run "${CURL[@]}" -o "$tmp" "$1"
    grep -q 'BEGIN PGP PUBLIC KEY BLOCK' "$tmp" || fail "$1 did not return an ASCII-armored key"
    put_file "$2" 0644 "$tmp"
}

apt_update() { ((APT_FRESH)) || run "${APT[@]}" update; APT_FRESH=1; }

apt_install() { # only ever installs: --no-remove makes apt fail rather than remove a package
    local before=$KEPT
    apt_update
    KEPT="${before:+$before, }whatever apt installed before it failed"  # a package install is not undone
    run env DEBIAN_FRONTEND=noninteractive NEEDRESTART_MODE=l "${APT[@]}" -y --no-remove \
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold install "$@"
    KEPT="${before:+$before, }installed $*"
}

missing_of() { local p; for p in "$@"; do installed "$p" || printf '%s ' "$p"; done; }
present_of() { local p; for p in "$@"; do ! installed "$p" || printf '%s ' "$p"; done; }
systemd_pid1() { [[ $(cat /proc/1/comm 2>/dev/null) == systemd ]]; }
comma_list() { local out="" x; for x in "$@"; do out+="${out:+, }$x"; done; echo "$out"; }

# -- 1. packages --------------------------------------------------------------------------
docker_sources() {
    printf 'Types: deb\nURIs: %s\nSuites: bookworm\nComponents: stable\nArchitectures: %s\nSigned-By: %s' \
        "$DOCKER_URL" "$(dpkg --print-architecture)" "$DOCKER_KEY"
}

step_docker_repo() { # Docker's documented Debian install: its key in /etc/apt/keyrings, a deb822 source
    if [[ -s $DOCKER_KEY && $(cat "$DOCKER_SOURCES" 2>/dev/null) == "$(docker_sources)" ]]; then
        already "$DOCKER_SOURCES, key $DOCKER_KEY"
        return
    fi
    local first
    first=$(missing_of ca-certificates curl)
    first=${first% }
    if ((DRY)); then
        would "add Docker's apt repository $DOCKER_SOURCES with its key $DOCKER_KEY${first:+ (installing $first first)}"
        return
    fi
    if [[ -n $first ]]; then apt_install ca-certificates curl; fi
    fetch_key "$DOCKER_URL/gpg" "$DOCKER_KEY"
    write_file "$DOCKER_SOURCES" 0644 "$(docker_sources)"
    APT_FRESH=0
    did "added Docker's apt repository $DOCKER_SOURCES with its key $DOCKER_KEY${first:+ (installed $first first)}"
}

step_packages() {
    local engine=(docker.io) missing present
    if [[ $REPO == docker ]]; then
        engine=(docker-ce docker-ce-cli containerd.io)
    elif installed docker-ce; then
        engine=()  # an engine from Docker's repository is already here: docker.io would conflict
    fi
    missing=$(missing_of "${engine[@]}" "${BASE_PACKAGES[@]}")
    present=$(present_of "${engine[@]}" "${BASE_PACKAGES[@]}")
    missing=${missing% } present=${present% }
    [[ ${#engine[@]} -gt 0 ]] || present+=" (engine: docker-ce from Docker's repository)"
    if [[ -z $missing ]]; then
        already "$present"
    elif ((DRY)); then
        would "run apt-get update, then install $missing${present:+ (present: $present)}"
    else
        # shellcheck disable=SC2086  # a list of package names
        apt_install $missing
        did "installed $missing${present:+ (present: $present)}"
    fi
}

# -- 2. the engine ------------------------------------------------------------------------
step_engine() {
    if ! systemd_pid1; then
        if timeout 10 docker info >/dev/null 2>&1; then
            note "running (docker info answers); not managed here: systemd is not PID 1"
        else
            note "not started: systemd is not PID 1 (PID 1 is $(cat /proc/1/comm 2>/dev/null || echo '?')); start it with your init system or: dockerd >/var/log/dockerd.log 2>&1 &"
        fi
        return
    fi
    if systemctl is-enabled --quiet docker 2>/dev/null && systemctl is-active --quiet docker; then
        already "docker.service enabled and active"
    elif ((DRY)); then
        would "run systemctl enable --now docker"
    else
        run systemctl enable --now docker
        did "docker.service enabled and started"
    fi
}

# -- 3. NVIDIA ----------------------------------------------------------------------------
nvidia_gpu() { # prints "ADDRESS CLASS" of the first NVIDIA display controller (vendor 0x10de, class 0x03xxxx)
    local dev vendor class
    for dev in "$SYSFS"/bus/pci/devices/*; do
        [[ -r $dev/vendor && -r $dev/class ]] || continue
        read -r vendor <"$dev/vendor"
        read -r class <"$dev/class"
        if [[ ${vendor,,} == 0x10de && ${class,,} == 0x03* ]]; then
            echo "${dev##*/} $class"
            return 0
        fi
    done
    return 1
}

nonfree_enabled() { # the apt sources name the non-free component (one-line or deb822 format)
    grep -Eqs '^[[:space:]]*(deb[[:space:]].*[[:space:]]non-free([[:space:]]|$)|Components:.*[[:space:]]non-free([[:space:]]|$))' \
        /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources
}

step_nvidia_driver() {
    local pkgs=(nvidia-driver firmware-misc-nonfree "linux-headers-$(dpkg --print-architecture)")
    local components="apt components contrib non-free non-free-firmware (e.g. 'Components: main contrib non-free non-free-firmware' in /etc/apt/sources.list.d/debian.sources)"
    if installed nvidia-driver; then
        already "nvidia-driver installed"
        return
    elif [[ -r /proc/driver/nvidia/version ]]; then
        already "an NVIDIA driver is loaded: /proc/driver/nvidia/version; Debian's nvidia-driver not added"
        return
    elif ((DRY)); then
        local state="non-free is NOT in the apt sources yet: enable the"
        if nonfree_enabled; then state="non-free is in the apt sources; it needs the"; fi
        would "install ${pkgs[*]} from Debian's non-free ($state $components); a reboot loads it"
        return
    fi
    apt_update
    apt-cache policy nvidia-driver | grep -q 'Candidate: [^(]' ||
        fail "nvidia-driver is not in the apt sources: enable the $components, then run this again (or --no-nvidia)"
    apt_install "${pkgs[@]}"
    did "installed ${pkgs[*]} from Debian's non-free; reboot to load the driver"
}

step_nvidia_toolkit() { # NVIDIA's documented apt install, with the key kept armored in /etc/apt/keyrings
    if installed nvidia-container-toolkit; then
        already "nvidia-container-toolkit installed"
        return
    elif ((DRY)); then
        would "add NVIDIA's apt repository $NV_LIST with its key $NV_KEY, then install nvidia-container-toolkit"
        return
    fi
    fetch_key "$NV_URL/gpgkey" "$NV_KEY"
    # shellcheck disable=SC2016  # $(ARCH) is apt's own variable, expanded by apt
    write_file "$NV_LIST" 0644 "deb [signed-by=$NV_KEY] $NV_URL/stable/deb/\$(ARCH) /"
    APT_FRESH=0
    apt_install nvidia-container-toolkit
    did "added NVIDIA's apt repository $NV_LIST (key $NV_KEY) and installed nvidia-container-toolkit"
}

step_nvidia_runtime() {
    local daemon=/etc/docker/daemon.json restart="restart dockerd yourself to load it (systemd is not PID 1)"
    if grep -qs '"nvidia"' "$daemon"; then
        already "$daemon names the nvidia runtime"
        return
    elif ((DRY)); then
        would "run nvidia-ctk runtime configure --runtime=docker (writes $daemon) and restart docker"
        return
    fi
    save_for_undo "$daemon"  # nvidia-ctk rewrites it in place
    run nvidia-ctk runtime configure --runtime=docker
    if systemd_pid1; then
        run systemctl restart docker
        restart="docker restarted"
    fi
    did "nvidia runtime configured in $daemon; $restart"
}

steps_nvidia() {
    local gpu
    if ((!NVIDIA)); then
        step nvidia note "skipped: --no-nvidia"
    elif ! gpu=$(nvidia_gpu); then
        step nvidia note "skipped: no NVIDIA GPU found on the PCI bus (no device of vendor 0x10de with a display class 0x03xxxx in $SYSFS/bus/pci/devices)"
    else
        say "nvidia: NVIDIA GPU at ${gpu% *} (class ${gpu#* })"
        step nvidia-driver step_nvidia_driver
        step nvidia-toolkit step_nvidia_toolkit
        step nvidia-runtime step_nvidia_runtime
    fi
}

# -- 4. puffer-core in its venv -----------------------------------------------------------
source_files() { # the files pip builds puffer-core from, relative to SRC, sorted
    (
        cd "$SRC"
        local f
        for f in pyproject.toml setup.py setup.cfg MANIFEST.in README.md LICENSE LICENSE.txt; do
            if [[ -f $f ]]; then echo "$f"; fi
        done
        find puffer_core -name __pycache__ -prune -o -type f ! -name '*.pyc' -print
    ) | sort
}

constraints() { local c="$SRC/compat_matrix/constraints-common.txt"; if [[ -f $c ]]; then echo "$c"; fi; }

source_fingerprint() { # sha256 over those files' contents, the constraint set and the extra
    {
        source_files | (cd "$SRC" && xargs -d '\n' sha256sum --)
        if [[ -n $(constraints) ]]; then echo "constraints $(sha256sum <"$(constraints)")"; fi
        echo "extra tank"
    } | sha256sum | cut -c1-64
}

install_venv() {
    local stage cons=()
    # pip builds in the source tree (egg-info, build/): build from a copy, so the checkout
    # (often read-only, or a user's) is never written, and exactly the fingerprinted files go in.
    stage=$(mktemp -d /tmp/puffertank-src.XXXXXX)
    TEMPS+=("$stage")
    # -h: a link's target (checked by check_source), not the link, goes into the copy
    source_files | tar -C "$SRC" -chf - -T - | tar -C "$stage" -xf -
    if [[ -n $(constraints) ]]; then cons=(-c "$(constraints)"); fi
    make_dir "$(dirname "$VENV")"
    rm -rf -- "$VENV.previous"  # left by an interrupted run
    if [[ -e $VENV ]]; then mv -T -- "$VENV" "$VENV.previous"; fi
    RB_NEW+=("$VENV")   # undo: remove the new venv, then RB_SAVED brings the previous one back
    if [[ -e $VENV.previous ]]; then RB_SAVED+=("$VENV $VENV.previous"); fi
    run "$PYTHON" -I -m venv "$VENV"   # -I: no PYTHON* variables, no user site, not the cwd
    run "$VENV/bin/python" -I -m pip install --disable-pip-version-check --no-input "${stage}[tank]" "${cons[@]}"
    run "$VENV/bin/puffer" --version
    printf '%s  %s\n' "$1" "$SRC" >"$FINGERPRINT.new"
    mv -f -- "$FINGERPRINT.new" "$FINGERPRINT"
    rm -rf -- "$VENV.previous"
}

venv_unusable() { # why a user could not run the venv (made by another python, or unreadable), or nothing
    local home closed
    home=$(sed -n 's/^home *= *//p' "$VENV/pyvenv.cfg" 2>/dev/null | head -n1)
    if [[ $home != "${PYTHON%/*}" ]]; then
        echo "$VENV was made by the python in ${home:-an unknown folder}, not $PYTHON: users may not reach it"
        return 0
    fi
    closed=$(find "$VENV" \( \( -type d ! -perm -o=rx \) -o \( ! -type l ! -perm -o=r \) \) -print -quit)
    if [[ -n $closed ]]; then echo "$VENV holds what other users cannot read ($closed; a umask like 077 at its install)"; fi
}

step_puffer() {
    local want have="" why
    want=$(source_fingerprint)
    if [[ -r $FINGERPRINT ]]; then read -r have _ <"$FINGERPRINT"; fi
    if [[ ! -x $VENV/bin/puffer || ! -x $VENV/bin/puffertank-login ]]; then
        why="no complete venv at $VENV"
    elif [[ $want != "$have" ]]; then
        why="$VENV holds ${have:0:12}${have:+ }another source"
        [[ -n $have ]] || why="$VENV has no record of its source"
    elif why=$(venv_unusable) && [[ -n $why ]]; then
        :
    else
        already "$VENV holds $SRC, fingerprint ${want:0:12}"
        return
    fi
    if ((DRY)); then
        would "install puffer-core[tank] from $SRC (fingerprint ${want:0:12}) into a new venv $VENV ($why)"
        return
    fi
    install_venv "$want"
    did "installed puffer-core[tank] from $SRC (fingerprint ${want:0:12}) into $VENV ($why)"
}

# -- links, /etc/shells, the image --------------------------------------------------------
step_links() {
    local path=/usr/local/bin/puffer target=$VENV/bin/puffer
    if [[ $(readlink "$path" 2>/dev/null) == "$target" ]]; then
        already "$path → $target"
        return
    fi
    [[ ! -e $path || -L $path ]] || fail "$path is a file, not a link made by $PROG: move it away, then run this again"
    if ((DRY)); then
        would "link $path → $target"
        return
    fi
    ln -sfn "$target" "$path.new"
    TEMPS+=("$path.new")
    mv -Tf -- "$path.new" "$path"
    did "linked $path → $target"
}

step_shells() {
    if grep -qxF "$LOGIN" /etc/shells 2>/dev/null; then
        already "$LOGIN in /etc/shells"
        return
    elif ((DRY)); then
        would "add $LOGIN to /etc/shells"
        return
    fi
    local tmp
    tmp=$(mktemp /etc/shells.new.XXXXXX)
    TEMPS+=("$tmp")
    if [[ -e /etc/shells ]]; then cp -p /etc/shells "$tmp"; fi
    if [[ -s $tmp && -n $(tail -c1 "$tmp") ]]; then echo >>"$tmp"; fi
    echo "$LOGIN" >>"$tmp"
    put_file /etc/shells 0644 "$tmp"
    did "added $LOGIN to /etc/shells"
}

image_present() { docker image inspect "$1" >/dev/null 2>&1; }

step_image() {
    local current=""
    if [[ -r $IMAGE_FILE ]]; then read -r current <"$IMAGE_FILE" || true; fi
    if [[ -z $IMAGE ]]; then
        note "not set here (no --image); the login uses ${current:-$DEFAULT_IMAGE}${current:+ (from $IMAGE_FILE)}"
        return
    fi
    # A digest this box does not hold is pulled first (verified, by puffer tank pull): the file
    # names it only once it is here, so a failed pull leaves the box with the image it had.
    local pull=0
    if [[ $IMAGE == *@sha256:* ]] && ! image_present "$IMAGE"; then pull=1; fi
    if [[ $current == "$IMAGE" ]] && ((!pull)); then
        already "$IMAGE_FILE says $IMAGE"
    elif ((DRY)); then
        would "$( ((pull)) && echo "pull $IMAGE (verified by its digest), then ")write $IMAGE to $IMAGE_FILE (was ${current:-absent})"
    else
        if ((pull)); then
            docker info >/dev/null 2>&1 ||
                fail "the engine does not answer, so $IMAGE cannot be pulled; start it (systemctl start docker), then run this again (the box keeps ${current:-no image})"
            run "$VENV/bin/puffer" tank pull "$IMAGE" --tag "$DEFAULT_IMAGE" --quiet
        fi
        if [[ $current != "$IMAGE" ]]; then write_file "$IMAGE_FILE" 0644 "$IMAGE"; fi
        did "$( ((pull)) && echo "pulled $IMAGE (verified by its digest) as $DEFAULT_IMAGE; ")wrote $IMAGE to $IMAGE_FILE (was ${current:-absent})"
    fi
    if [[ $IMAGE == */* && $IMAGE != *@sha256:* ]]; then
        note "warning: $IMAGE is a registry's tag, which names whatever was pushed to it last: pin it by digest, REPO@sha256:… as puffer tank push prints it"
    fi
}

# -- the broker: the one way from a user to the engine ---------------------------------------
# The login runs as the user and only asks the broker; the broker runs as root (sudo, one rule)
# and does a fixed set of things for the caller alone (puffer_core/tank/box/broker.py). Both run as
# `python -I`: no PYTHONPATH (a ~/.pam_environment sets it), no user site, not the cwd.
script_text() { # KIND: the root-owned script that runs puffer_core.tank.KIND's main
    local what="the login shell of group $GROUP: it asks $BROKER, through sudo, for everything"
    [[ $1 == login ]] || what="the broker between group $GROUP and the engine, run as root by sudo ($SUDOERS)"
    printf '#!%s -I\n# Written by tank/setup-host.sh: %s.\nimport sys\n\nfrom puffer_core.tank.box.%s import main\n\nsys.exit(main())' \
        "$VENV/bin/python" "$what" "$1"
}

step_scripts() {
    local kind path changes=()
    for kind in login broker; do
        path=$LOGIN
        [[ $kind == login ]] || path=$BROKER
        if [[ -f $path && ! -L $path && $(cat "$path") == "$(script_text "$kind")" ]] && [[ -z $(not_roots "$path") ]]; then continue; fi
        [[ ! -e $path || -L $path || -f $path ]] || fail "$path is not a file: move it away, then run this again"
        changes+=("$path")
    done
    if ((${#changes[@]} == 0)); then
        already "$LOGIN and $BROKER run $VENV/bin/python -I"
        return
    elif ((DRY)); then
        would "write $(comma_list "${changes[@]}") (root's, 0755, run as python -I)"
        return
    fi
    for kind in login broker; do
        path=$LOGIN
        [[ $kind == login ]] || path=$BROKER
        if [[ -L $path ]]; then rm -f -- "$path"; fi  # the earlier setup linked the login into the venv
        write_file "$path" 0755 "$(script_text "$kind")"
    done
    did "wrote $(comma_list "${changes[@]}") (root's, 0755, run as python -I)"
}

sudoers_text() {
    printf '%s\n' "# Written by tank/setup-host.sh: the users of group $GROUP reach the Docker engine only" \
        "# through the broker, as root, with a reset environment; nothing else." \
        "Defaults!$BROKER env_reset" \
        "%$GROUP ALL=(root) NOPASSWD: $BROKER"
}

step_broker() {
    local changes=() dir tmp
    getent group "$GROUP" >/dev/null || changes+=("group $GROUP")
    for dir in "$STATE_DIR" "$DOCKER_CONFIG_DIR"; do
        [[ -d $dir && ! -L $dir && $(stat -c '%u %a' "$dir") == "0 700" ]] || changes+=("$dir (root's, 0700)")
    done
    [[ -f $SUDOERS && $(cat "$SUDOERS") == "$(sudoers_text)" && $(stat -c '%u %a' "$SUDOERS") == "0 440" ]] ||
        changes+=("$SUDOERS")
    if ((${#changes[@]} == 0)); then
        already "group $GROUP may run $BROKER as root ($SUDOERS), and nothing else"
        return
    elif ((DRY)); then
        would "make $(comma_list "${changes[@]}")"
        return
    fi
    getent group "$GROUP" >/dev/null || run groupadd --system "$GROUP"
    for dir in "$STATE_DIR" "$DOCKER_CONFIG_DIR"; do
        make_dir "$(dirname "$dir")"
        if [[ ! -d $dir ]]; then RB_NEW+=("$dir"); fi
        install -d -o root -g root -m 0700 "$dir"
    done
    make_dir "$(dirname "$SUDOERS")"
    tmp=$(mktemp "$(dirname "$SUDOERS")/.puffertank.XXXXXX")   # a dot: sudo reads no such name meanwhile
    TEMPS+=("$tmp")
    sudoers_text >"$tmp"
    chmod 0440 "$tmp"
    visudo -cqf "$tmp" >>"$LOG" 2>&1 || fail "visudo refused the rule it was about to write (see $LOG)"
    put_file "$SUDOERS" 0440 "$tmp"
    visudo -cq >>"$LOG" 2>&1 || fail "visudo -c refuses the sudo configuration with $SUDOERS in it (see $LOG)"
    did "made $(comma_list "${changes[@]}"): group $GROUP may run $BROKER as root, and nothing else"
}

# -- what one user may take of the box ----------------------------------------------------------
limits_module() { "$VENV/bin/python" -I -c 'import puffer_core.tank.box.limits' 2>/dev/null; }

apply_limits() { # the limits file's limits on every tank the broker made, running or not: one phrase
    local args id count=0 failed=()
    timeout 10 docker info >/dev/null 2>&1 || { echo "the engine does not answer: each tank gets them when next joined"; return 0; }
    args=$("$VENV/bin/python" -I -m puffer_core.tank.box.limits --docker-args "$LIMITS_FILE") || { echo "not applied"; return 0; }
    while read -r id; do
        [[ -n $id && -e $STATE_DIR/$id.json ]] || continue
        # shellcheck disable=SC2086  # the options, split on purpose
        if docker update $args -- "$id" >>"$LOG" 2>&1; then count=$((count + 1)); else failed+=("${id:0:12}"); fi
    done < <(docker ps -aq --no-trunc --filter label=org.puffer.tank.login)
    echo "applied to $count tank(s)${failed[*]:+; not to ${failed[*]} (see $LOG; each gets them at its --fresh)}"
}

step_limits() {
    local want current="" effect applied
    if ! limits_module; then  # a dry run before the venv holds this version
        would "write $LIMITS_FILE (each tank's limits, derived from this box${LIMITS[*]:+, with ${LIMITS[*]}})"
        return
    fi
    want=$("$VENV/bin/python" -I -m puffer_core.tank.box.limits "$LIMITS_FILE" "${LIMITS[@]}" 2>&1) || fail "${want#limits: }"
    effect=${want##*# in effect: }
    if [[ -r $LIMITS_FILE ]]; then current=$(cat "$LIMITS_FILE"); fi
    if [[ $current == "$want" ]]; then
        already "$LIMITS_FILE: $effect"
        return
    elif ((DRY)); then
        would "write $LIMITS_FILE: $effect"
        return
    fi
    write_file "$LIMITS_FILE" 0644 "$want"
    applied=$(apply_limits)
    did "wrote $LIMITS_FILE: $effect; $applied"
}

# -- the host, as docs/security.md says it is: an enrolled user's code runs in their tank -----------
sshd_text() {
    printf '%s\n' "# Written by tank/setup-host.sh: the users of group $GROUP reach this box through their" \
        "# PufferTank only: every session runs the login (sftp too, whatever the Subsystem), forwarding" \
        "# goes one way (ssh -L: to the box's ports and sockets), and nothing of theirs runs on the host" \
        "# (no ~/.ssh/rc, agent or X11 forwarding, tunnel). The script checks it with sshd -t." \
        "Match Group $GROUP" \
        "    ForceCommand $LOGIN" \
        "    AllowTcpForwarding local" \
        "    AllowStreamLocalForwarding local" \
        "    AllowAgentForwarding no" \
        "    X11Forwarding no" \
        "    PermitTunnel no" \
        "    PermitUserRC no" \
        "Match all"
}

step_sshd() {
    local sshd=/usr/sbin/sshd included=1 reload=""
    grep -Eqs '^[[:space:]]*Include[[:space:]]+/etc/ssh/sshd_config\.d/\*\.conf' /etc/ssh/sshd_config || included=0
    if [[ -f $SSHD_DROPIN && $(cat "$SSHD_DROPIN") == "$(sshd_text)" ]]; then
        already "$SSHD_DROPIN keeps group $GROUP in their tanks"
    elif ((DRY)); then
        would "write $SSHD_DROPIN (group $GROUP: the login for every session, ssh -L only, no ~/.ssh/rc)"
    else
        write_file "$SSHD_DROPIN" 0644 "$(sshd_text)"
        if [[ -x $sshd ]]; then
            $sshd -t >>"$LOG" 2>&1 || fail "sshd -t refuses its configuration with $SSHD_DROPIN in it (see $LOG)"
            if systemd_pid1 && systemctl is-active --quiet ssh; then
                run systemctl reload ssh
                reload="; sshd reloaded"
            fi
        fi
        did "wrote $SSHD_DROPIN (group $GROUP: the login for every session, ssh -L only, no ~/.ssh/rc)$reload"
    fi
    if [[ -x $sshd ]] && ((!included)); then
        note "warning: /etc/ssh/sshd_config does not include /etc/ssh/sshd_config.d/*.conf, so sshd never reads $SSHD_DROPIN: add 'Include /etc/ssh/sshd_config.d/*.conf' at its top"
    fi
}

pam_user_env() { # the PAM services whose pam_env reads each user's ~/.pam_environment
    local file
    for file in /etc/pam.d/*; do
        grep -Eqs '^[[:space:]]*[^#[:space:]].*pam_env\.so.*user_readenv=1' "$file" && echo "$file"
    done
    return 0
}

step_pam() {
    local files=() file tmp
    mapfile -t files < <(pam_user_env)
    if ((${#files[@]} == 0)); then
        already "no PAM service reads a user's ~/.pam_environment"
        return
    elif ((DRY)); then
        would "set user_readenv=0 in $(comma_list "${files[@]}") (a user's ~/.pam_environment sets LD_PRELOAD for what sshd starts)"
        return
    fi
    for file in "${files[@]}"; do  # PAM has no drop-in folder: the line is changed in place, the file saved for undo
        tmp=$(mktemp "$file.new.XXXXXX")
        TEMPS+=("$tmp")
        sed -E '/pam_env\.so/ s/user_readenv=1/user_readenv=0/' "$file" >"$tmp"
        put_file "$file" 0644 "$tmp"
    done
    did "set user_readenv=0 in $(comma_list "${files[@]}"): a user's ~/.pam_environment (LD_PRELOAD) no longer reaches what sshd starts on the host"
}

enrolled_in_docker() { # users whose login shell is the login and who are in group docker
    local user
    for user in $(getent group docker | cut -d: -f4 | tr ',' ' '); do
        [[ $(getent passwd "$user" | cut -d: -f7) != "$LOGIN" ]] || echo "$user"
    done
}

step_docker_group() {
    local users=()
    mapfile -t users < <(enrolled_in_docker)
    if ((${#users[@]} == 0)); then
        already "no enrolled user is in group docker"
        return
    elif ((DRY)); then
        would "take $(comma_list "${users[@]}") out of group docker (root-equivalent; the broker serves them)"
        return
    fi
    local user
    for user in "${users[@]}"; do run gpasswd -d "$user" docker; done
    did "took $(comma_list "${users[@]}") out of group docker (root-equivalent; the broker serves them now)"
}

step_old_containers() {
    local found=() id name
    docker info >/dev/null 2>&1 || { note "the engine does not answer: login containers made before the broker not looked for"; return; }
    while read -r id name; do
        [[ -n $id && ! -e $STATE_DIR/$id.json ]] && found+=("$name")
    done < <(docker ps -a --no-trunc --filter label=org.puffer.tank.login --format '{{.ID}} {{.Names}}')
    if ((${#found[@]} == 0)); then
        already "every login container was made by the broker"
        return
    fi
    note "warning: $(comma_list "${found[@]}") were made before the broker (by their users, then in group docker): the broker never joins them, so their users' logins are refused until you remove them (docker rm -f ${found[*]}; homes are kept)"
}

# -- users --------------------------------------------------------------------------------
user_state() { # NAME: "shell S, groups G" as the system has them now
    echo "login shell $(getent passwd "$1" | cut -d: -f7), groups $(id -nG "$1" 2>/dev/null | tr ' ' ',')"
}

home_note() { # NAME: the home's mode fixed with --fix-homes, or one warning line, when others can read it
    local name=$1 home mode
    home=$(getent passwd "$name" | cut -d: -f6)
    [[ -d $home ]] || return 0
    mode=$(stat -c '%a' "$home")
    ((8#$mode & 8#077)) || return 0
    if ((FIX_HOMES)) && ((!DRY)); then
        run chmod go-rwx "$home"
        did "made $home 0$(stat -c '%a' "$home") (was $mode: others could read it)"
    elif ((FIX_HOMES)); then
        would "make $home go-rwx (now $mode)"
    else
        note "warning: $home is mode $mode: other users of this box can read it; --fix-homes makes it 0700"
    fi
}

user_manager_unit() { echo "$UNITS/user@$(id -u "$1").service"; }

host_services_open() { # NAME: what lets NAME's own code run on the host outside a tank: a systemd user manager, linger
    local unit
    unit=$(user_manager_unit "$1")
    [[ $(readlink "$unit" 2>/dev/null) == /dev/null ]] || echo "a systemd user manager (user@$(id -u "$1").service)"
    [[ ! -e $LINGER_DIR/$1 ]] || echo "linger"
}

close_host_services() { # NAME: mask their systemd user manager (stopped where systemd runs), linger off
    local name=$1 unit
    unit=$(user_manager_unit "$name")
    if [[ $(readlink "$unit" 2>/dev/null) != /dev/null ]]; then
        [[ ! -e $unit || -L $unit ]] || fail "$unit is a file, not a link made by $PROG: move it away, then run this again"
        if [[ ! -e $unit ]]; then RB_NEW+=("$unit"); fi
        make_dir "$UNITS"
        ln -sfn /dev/null "$unit"
        if systemd_pid1; then
            run systemctl daemon-reload
            systemctl stop "${unit##*/}" >>"$LOG" 2>&1 || true
        fi
    fi
    if [[ -e $LINGER_DIR/$name ]]; then
        KEPT="${KEPT:+$KEPT, }linger of $name off"
        if systemd_pid1; then run loginctl disable-linger "$name"; else rm -f -- "${LINGER_DIR:?}/$name"; fi
    fi
}

expired() { # NAME: the account's expiry date has passed (shadow's field 8, days since 1970)
    local day
    day=$(getent shadow "$1" | cut -d: -f8)
    [[ -n $day ]] && ((day <= $(date +%s) / 86400))
}

step_user() {
    local name=$1 shell in_docker=0 in_group=0 changes=() open=() opened=0 crontab=0
    if getent passwd "$name" >/dev/null; then
        shell=$(getent passwd "$name" | cut -d: -f7)
        if id -nG "$name" | tr ' ' '\n' | grep -qx docker; then in_docker=1; fi
        if id -nG "$name" | tr ' ' '\n' | grep -qx "$GROUP"; then in_group=1; fi
        if expired "$name"; then opened=1; fi
        if [[ -e $CRON_SPOOL/$name ]]; then crontab=1; fi
        mapfile -t open < <(host_services_open "$name")
        [[ $shell == "$LOGIN" ]] || changes+=("login shell $LOGIN (was $shell)")
        ((in_group)) || changes+=("in group $GROUP")
        ((!in_docker)) || changes+=("out of group docker (root-equivalent)")
        ((!opened)) || changes+=("account opened again (it had expired)")
        ((${#open[@]} == 0)) || changes+=("no $(comma_list "${open[@]}") on the host")
        if ((${#changes[@]} == 0)); then
            already "login shell $LOGIN, in group $GROUP, not in group docker, no host services"
        elif ((DRY)); then
            would "$(comma_list "${changes[@]}")"
        else
            getent group "$GROUP" >/dev/null || fail "group $GROUP does not exist (the broker step makes it)"
            # One usermod call: shell, group and expiry change together or not at all.
            local expiry=()
            if ((opened)); then expiry=(--expiredate ''); fi
            if [[ $shell != "$LOGIN" ]] || ((!in_group || opened)); then
                run usermod -s "$LOGIN" -a -G "$GROUP" "${expiry[@]}" "$name"
            fi
            if ((in_docker)); then run gpasswd -d "$name" docker; fi
            close_host_services "$name"
            did "$(comma_list "${changes[@]}")"
        fi
        if ((crontab)); then
            note "warning: $name has a crontab ($CRON_SPOOL/$name), which cron runs on the host outside their tank: crontab -r -u $name removes it"
        fi
        home_note "$name"
        return
    fi
    if ((DRY)); then
        would "create it (useradd -m, home 0700) with login shell $LOGIN, in group $GROUP, no systemd user manager"
        return
    fi
    getent group "$GROUP" >/dev/null || fail "group $GROUP does not exist (the broker step makes it)"
    # One useradd call makes the user, its private home, shell and group together.
    local rc=0
    useradd -m -K HOME_MODE=0700 -s "$LOGIN" -G "$GROUP" "$name" >>"$LOG" 2>&1 || rc=$?
    if ((rc)); then
        getent passwd "$name" >/dev/null &&
            fail "useradd exited $rc but $name now exists ($(user_state "$name")); fix it or userdel -r $name, then run this again"
        fail "useradd exited $rc: $name was not created (output: $LOG)"
    fi
    close_host_services "$name"
    did "created (home $(getent passwd "$name" | cut -d: -f6), 0700), login shell $LOGIN, in group $GROUP, no systemd user manager"
}

enrolled_users() { # users whose login shell is the login, or who are in group puffertank
    {
        getent passwd | awk -F: -v login="$LOGIN" '$7 == login {print $1}'
        getent group "$GROUP" | cut -d: -f4 | tr ',' '\n'
    } | sed '/^$/d' | sort -u
}

kill_processes_of() { # UID: SIGKILL every process it runs on the host (procps may be missing); false when none
    local proc pid killed=1
    for proc in /proc/[0-9]*; do
        pid=${proc#/proc/}
        [[ $pid != "$$" && $(stat -c %u "$proc" 2>/dev/null) == "$1" ]] || continue
        kill -KILL "$pid" 2>/dev/null && killed=0
    done
    return $killed
}

step_other_user() { # NAME: an enrolled user not named by --user: taken off this box, account closed, home kept
    local name=$1 uid shell stopped=() id ended=""
    uid=$(id -u "$name") shell=$(getent passwd "$name" | cut -d: -f7)
    if ((DRY)); then
        would "take $name off this box (account expired, sessions ended, crontab and linger removed, login shell /usr/sbin/nologin, out of group $GROUP, containers stopped; home kept)"
        return
    fi
    # Expired first: no new session (key, password or forward) while the rest is closed.
    expired "$name" || run usermod --expiredate 1 "$name"
    [[ $shell != "$LOGIN" ]] || run usermod -s /usr/sbin/nologin "$name"
    if id -nG "$name" | tr ' ' '\n' | grep -qx "$GROUP"; then run gpasswd -d "$name" "$GROUP"; fi
    if docker info >/dev/null 2>&1; then
        while read -r id; do
            [[ -n $id ]] || continue
            run docker stop --time 10 -- "$id"
            stopped+=("$(docker inspect --format '{{.Name}}' -- "$id" | sed 's|^/||')")
        done < <(docker ps -q --filter "label=org.puffer.tank.login=$uid")
    fi
    # Their sessions (an ssh forward, a process left on the host) end: logind's, then any other.
    if systemd_pid1; then loginctl terminate-user "$name" >>"$LOG" 2>&1 || true; fi
    if kill_processes_of "$uid"; then ended=", sessions ended"; fi
    if [[ -e $CRON_SPOOL/$name ]]; then
        if command -v crontab >/dev/null; then run crontab -r -u "$name"; else rm -f -- "${CRON_SPOOL:?}/$name"; fi
        ended+=", crontab removed"
    fi
    close_host_services "$name"
    did "taken off this box: account expired$ended, no systemd user manager or linger, login shell /usr/sbin/nologin, out of group $GROUP${stopped[*]:+, stopped $(comma_list "${stopped[@]}")}; home $(getent passwd "$name" | cut -d: -f6) kept"
}

# -- main ---------------------------------------------------------------------------------
if ((PRINT_SSHD)); then
    sshd_text
    exit 0
fi
check_system
check_options
cd /  # no command runs in the caller's folder
if ((!DRY)); then  # one run at a time
    exec 9>/run/puffertank-setup-host.lock
    flock -n 9 || die "another setup-host.sh is running (lock /run/puffertank-setup-host.lock)"
fi
if [[ $REPO == docker ]]; then step docker-repo step_docker_repo; fi
step packages step_packages
step engine step_engine
steps_nvidia
step puffer step_puffer
step links step_links
step scripts step_scripts
step broker step_broker
step limits step_limits
step sshd step_sshd
step pam step_pam
step shells step_shells
step image step_image
step "docker group" step_docker_group
step "old containers" step_old_containers
for name in "${USERS[@]}"; do step "user $name" step_user "$name"; done
if ((EXACT)); then
    mapfile -t OTHERS < <(enrolled_users)
    for name in "${OTHERS[@]}"; do
        [[ " ${USERS[*]} " == *" $name "* ]] || step "user $name" step_other_user "$name"
    done
fi

say "step times: $(comma_list "${TIMES[@]}")"
total=$(secs $(($(now_us) - T_START)))
changed=$(comma_list "${CHANGED[@]}")
if ((DRY)); then
    say "dry run in $total, nothing changed (${changed:+would change: }${changed:-nothing to change})"
else
    say "done in $total (${changed:+changed: }${changed:-nothing changed})"
fi
