"""What one user's tanks may take of a shared box: memory, swap, processes, CPU share, how many.

The admin sets them in one root-owned file, ``/etc/puffertank/limits`` (``tank/setup-host.sh
--memory SIZE --swap SIZE --pids N --cpu-shares N --tanks N``, or the fleet inventory's
``puffer_limits``), one ``key = value`` per line::

    memory = 57G        # each tank's memory, swap not included (docker run --memory)
    swap = 0            # each tank's swap beyond that (--memory-swap is memory + swap)
    pids = 4096         # each tank's processes and threads (--pids-limit)
    cpu_shares = 1024   # each tank's CPU weight when the cores are contended (--cpu-shares)
    tanks = 2           # containers per user (puffertank-USER and its --new NAME siblings)

The broker (:mod:`puffer_core.tank.box.broker`) applies them to every tank it makes, and to a
tank it joins whose limits differ (``docker update``). A key the file leaves out takes its
default, derived from the box so that no single user can take it down: each tank may use the
box's memory less a reserve for the host, divided by ``tanks``, so that all of one user's tanks
together stay below what the host needs to keep running. The GPU is not limited: its memory is
shared among the tanks that use it.

Standard library and the box's protocol only: the broker, which runs as root, imports it.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from puffer_core.tank.box.protocol import LIMITS_FILE

__all__ = ["LIMITS_FILE", "LimitsError", "TankLimits", "box_limits", "defaults", "parse_limits", "render_limits"]

GIB = 2**30
#: What the host keeps for itself: at least this much memory, or this share of it.
RESERVE_BYTES = 2 * GIB
RESERVE_SHARE = 0.10
DEFAULT_PIDS = 4096
DEFAULT_CPU_SHARES = 1024
DEFAULT_TANKS = 2
#: The smallest sensible values: a tank must start a shell and Python.
MIN_MEMORY = 64 * 2**20
MIN_PIDS = 64
#: Docker's own bounds for --cpu-shares.
CPU_SHARES_RANGE = (2, 262144)
MAX_TANKS = 64
KEYS = ("memory", "swap", "pids", "cpu_shares", "tanks")
_SIZE = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[KMGT]?)(?:i?B)?\Z", re.IGNORECASE)
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


class LimitsError(ValueError):
    """A limit that is not one: names the key, the value and what is accepted."""


@dataclass(frozen=True)
class TankLimits:
    """Each tank's memory and swap (bytes), processes and CPU weight, and how many tanks a user may have."""

    memory: int
    swap: int = 0
    pids: int = DEFAULT_PIDS
    cpu_shares: int = DEFAULT_CPU_SHARES
    tanks: int = DEFAULT_TANKS

    def docker_args(self) -> list[str]:
        """The ``docker run`` / ``docker update`` options that set them."""
        return ["--memory", str(self.memory), "--memory-swap", str(self.memory + self.swap),
                "--pids-limit", str(self.pids), "--cpu-shares", str(self.cpu_shares)]  # fmt: skip

    def of_container(self) -> dict[str, int]:
        """What ``docker inspect``'s HostConfig says when a container has these limits."""
        return {"Memory": self.memory, "MemorySwap": self.memory + self.swap, "PidsLimit": self.pids,
                "CpuShares": self.cpu_shares}  # fmt: skip

    def describe(self) -> str:
        """One line for people: ``memory 9.7 GiB (no swap), 4,096 processes, CPU shares 1,024; 2 tanks per user``."""
        swap = "no swap" if not self.swap else f"+{format_size(self.swap)} swap"
        return (f"memory {format_size(self.memory)} ({swap}), {self.pids:,} processes, CPU shares "
                f"{self.cpu_shares:,}; {self.tanks} tank{'s' * (self.tanks != 1)} per user")  # fmt: skip


def format_size(size: int) -> str:
    """``size`` bytes in the largest binary unit that keeps it at 1 or more: ``9.7 GiB``."""
    for unit in ("T", "G", "M", "K"):
        if size >= _UNITS[unit]:
            return f"{size / _UNITS[unit]:.1f} {unit}iB"
    return f"{size} B"


def parse_size(text: str, key: str) -> int:
    """``57G``, ``512M``, ``1.5GiB``, ``0``: bytes (binary units); :class:`LimitsError` naming ``key`` otherwise."""
    match = _SIZE.match(text.strip())
    if not match:
        raise LimitsError(f"{key} = {text[:40]!r} is not a size: a number of bytes, or with K, M, G or T (e.g. 48G)")
    return int(float(match["number"]) * _UNITS[match["unit"].upper()])


def memory_total(meminfo: str = "/proc/meminfo") -> int:
    """The box's memory in bytes (``MemTotal``)."""
    with open(meminfo, encoding="ascii") as file:
        for line in file:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise LimitsError(f"{meminfo} has no MemTotal line")


def defaults(total: int, tanks: int = DEFAULT_TANKS) -> TankLimits:
    """The limits of a box with ``total`` bytes of memory: the host's reserve kept free of all one user's tanks."""
    reserve = max(RESERVE_BYTES, int(total * RESERVE_SHARE))
    memory = max(MIN_MEMORY, (total - reserve) // max(1, tanks))
    return TankLimits(memory=memory // 2**20 * 2**20, tanks=tanks)


def _check(limits: TankLimits) -> TankLimits:
    low, high = CPU_SHARES_RANGE
    for key, ok, accepted in (
        ("memory", limits.memory >= MIN_MEMORY, f"at least {format_size(MIN_MEMORY)}"),
        ("swap", limits.swap >= 0, "0 or more"),
        ("pids", limits.pids >= MIN_PIDS, f"at least {MIN_PIDS}"),
        ("cpu_shares", low <= limits.cpu_shares <= high, f"{low} to {high:,}"),
        ("tanks", 1 <= limits.tanks <= MAX_TANKS, f"1 to {MAX_TANKS}"),
    ):
        if not ok:
            raise LimitsError(f"{key} = {getattr(limits, key)} is out of range: {accepted}")
    return limits


def _integer(text: str, key: str) -> int:
    if not text.strip().isdigit():
        raise LimitsError(f"{key} = {text[:40]!r} is not a whole number")
    return int(text)


def _value(key: str, text: str) -> int:
    return parse_size(text, key) if key in ("memory", "swap") else _integer(text, key)


def parse_limits(text: str, total: int, where: str = LIMITS_FILE) -> tuple[TankLimits, set[str]]:
    """The limits ``text`` sets on a box of ``total`` bytes, and the keys it sets (the others are defaults)."""
    given: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        key, sep, value = (part.strip() for part in line.partition("="))
        if not sep or key not in KEYS:
            known = ", ".join(KEYS)
            raise LimitsError(f"{where} line {number}: {line[:60]!r} is not KEY = VALUE with a key of {known}")
        try:
            given[key] = _value(key, value)
        except LimitsError as exc:
            raise LimitsError(f"{where} line {number}: {exc}") from None
    base = defaults(total, given.get("tanks", DEFAULT_TANKS))
    return _check(dataclasses.replace(base, **given)), set(given)


def box_limits(path: str = LIMITS_FILE, meminfo: str = "/proc/meminfo") -> TankLimits:
    """This box's limits: ``path``'s, each key it leaves out (or the whole file, when missing) by default."""
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read(65536)
    except FileNotFoundError:
        text = ""
    except OSError as exc:
        raise LimitsError(f"cannot read {path}: {exc.strerror}") from None
    return parse_limits(text, memory_total(meminfo), path)[0]


HEADER = """\
# The limits of each PufferTank on this box: what one user's tanks may take of it.
# Written by tank/setup-host.sh (--memory SIZE --swap SIZE --pids N --cpu-shares N --tanks N;
# the fleet inventory's puffer_limits); the broker applies them to every tank it makes or joins.
# Edit by running setup-host.sh again; a key left out takes its default (derived from the box).
"""


def render_limits(limits: TankLimits, keys: Sequence[str] = KEYS) -> str:
    """The file's text: ``keys`` set as ``limits`` has them (the others by default), and what is in effect."""
    sizes = {"memory": f"{limits.memory // 2**20}M", "swap": f"{limits.swap // 2**20}M"}
    lines = [f"{key} = {sizes.get(key, getattr(limits, key))}" for key in KEYS if key in keys]
    return HEADER + "".join(line + "\n" for line in lines) + f"# in effect: {limits.describe()}\n"


def merged(current: str, options: Mapping[str, str], total: int) -> str:
    """``current``'s file with ``options`` (key → value, ``auto``: back to its default) applied, re-rendered."""
    limits, keys = parse_limits(current, total)
    values = {key: getattr(limits, key) for key in keys}
    for key, text in options.items():
        if key not in KEYS:
            raise LimitsError(f"{key} is not a limit: {', '.join(KEYS)}")
        if text.strip().lower() == "auto":
            values.pop(key, None)
        else:
            values[key] = _value(key, text)
    base = defaults(total, values.get("tanks", DEFAULT_TANKS))
    return render_limits(_check(dataclasses.replace(base, **values)), tuple(values))


USAGE = """usage: python -I -m puffer_core.tank.box.limits FILE [KEY=VALUE...]  the file, KEY set (auto: default)
       python -I -m puffer_core.tank.box.limits --docker-args FILE      the docker update options FILE sets
"""


def main(argv: Sequence[str] | None = None) -> int:
    """setup-host's limits step: the new file's text, or the options that apply a file to running tanks."""
    args = list(sys.argv[1:] if argv is None else argv)
    docker_args = args[:1] == ["--docker-args"]
    if docker_args:
        args = args[1:]
    if not args or (docker_args and len(args) != 1):
        print(USAGE, end="", file=sys.stderr)
        return 2
    try:
        try:
            with open(args[0], encoding="utf-8") as file:
                current = file.read(65536)
        except FileNotFoundError:
            current = ""
        if docker_args:
            print(" ".join(parse_limits(current, memory_total(), args[0])[0].docker_args()))
        else:
            sys.stdout.write(merged(current, dict(arg.partition("=")[::2] for arg in args[1:]), memory_total()))
    except (LimitsError, OSError) as exc:
        print(f"limits: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
