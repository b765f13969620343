"""The box's limits of each tank: the file, its defaults derived from the box, what setup-host writes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from puffer_core.tank.box import limits as tank_limits
from puffer_core.tank.box.limits import GIB, LimitsError, TankLimits, box_limits, defaults, merged, parse_limits

BOX = 128 * GIB  # the Puffer Stack's boxes


def test_the_defaults_keep_the_hosts_reserve_free_of_all_one_users_tanks():
    limits = defaults(BOX)
    assert limits.tanks == 2 and limits.swap == 0 and limits.pids == 4096 and limits.cpu_shares == 1024
    reserve = BOX - limits.memory * limits.tanks
    assert reserve >= 0.10 * BOX and reserve < 0.11 * BOX
    small = defaults(8 * GIB)
    assert 8 * GIB - small.memory * small.tanks >= 2 * GIB  # at least 2 GiB for the host on a small box
    assert defaults(BOX, tanks=4).memory * 4 <= 0.9 * BOX


def test_the_file_sets_what_it_names_and_leaves_the_rest_to_the_defaults():
    limits, keys = parse_limits("# the admin's\nmemory = 48G\npids=2048  # Ray needs many\n", BOX)
    assert keys == {"memory", "pids"}
    assert limits == TankLimits(memory=48 * GIB, swap=0, pids=2048, cpu_shares=1024, tanks=2)
    assert parse_limits("", BOX)[0] == defaults(BOX)
    assert parse_limits("tanks = 4\n", BOX)[0].memory == defaults(BOX, tanks=4).memory
    assert parse_limits("memory = 1.5GiB\nswap = 512M\n", BOX)[0].swap == 512 * 2**20


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("memory 48G", "line 1: 'memory 48G' is not KEY = VALUE with a key of memory, swap, pids"),
        ("cpus = 4", "'cpus = 4' is not KEY = VALUE"),
        ("memory = lots", "memory = 'lots' is not a size"),
        ("pids = 1e4", "pids = '1e4' is not a whole number"),
        ("memory = 1M", "memory = 1048576 is out of range: at least 64.0 MiB"),
        ("pids = 10", "pids = 10 is out of range: at least 64"),
        ("cpu_shares = 1", "cpu_shares = 1 is out of range: 2 to 262,144"),
        ("tanks = 0", "tanks = 0 is out of range: 1 to 64"),
    ],
)
def test_a_bad_line_names_itself_and_what_is_accepted(text, says):
    with pytest.raises(LimitsError, match=None) as caught:
        parse_limits(text, BOX, where="/etc/puffertank/limits")
    assert says in str(caught.value)


def test_docker_is_given_memory_plus_swap_and_reads_it_back_so():
    limits = TankLimits(memory=8 * GIB, swap=GIB, pids=512, cpu_shares=256, tanks=3)
    assert limits.docker_args() == ["--memory", str(8 * GIB), "--memory-swap", str(9 * GIB), "--pids-limit", "512",
                                    "--cpu-shares", "256"]  # fmt: skip
    assert limits.of_container() == {"Memory": 8 * GIB, "MemorySwap": 9 * GIB, "PidsLimit": 512, "CpuShares": 256}


def test_setup_hosts_options_change_only_their_keys_and_auto_goes_back_to_the_default():
    first = merged("", {"memory": "48G", "pids": "2048"}, BOX)
    assert first.startswith("# The limits of each PufferTank on this box")
    assert parse_limits(first, BOX) == (TankLimits(memory=48 * GIB, pids=2048), {"memory", "pids"})
    second = merged(first, {"tanks": "3"}, BOX)  # a later run without --memory keeps it
    assert parse_limits(second, BOX)[0] == TankLimits(memory=48 * GIB, pids=2048, tanks=3)
    back = merged(second, {"memory": "auto"}, BOX)
    assert parse_limits(back, BOX)[0].memory == defaults(BOX, tanks=3).memory
    assert merged(back, {}, BOX) == back  # a rerun with nothing new writes the same bytes
    with pytest.raises(LimitsError, match="gpus is not a limit"):
        merged("", {"gpus": "1"}, BOX)


def test_the_module_prints_the_file_or_one_line_why_not(tmp_path):
    current = tmp_path / "limits"
    current.write_text("memory = 4G\n")
    run = [sys.executable, "-I", "-m", "puffer_core.tank.box.limits", str(current)]
    proc = subprocess.run([*run, "pids=1024"], capture_output=True, text=True, check=True)
    assert "memory = 4096M\npids = 1024\n" in proc.stdout
    bad = subprocess.run([*run, "pids=many"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr == "limits: pids = 'many' is not a whole number\n"


def test_the_boxs_limits_read_its_memory_and_its_file(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       32768000 kB\nMemFree: 1 kB\n")
    assert box_limits(str(tmp_path / "absent"), str(meminfo)) == defaults(32768000 * 1024)
    (tmp_path / "limits").write_text("tanks = 1\n")
    assert box_limits(str(tmp_path / "limits"), str(meminfo)).memory == defaults(32768000 * 1024, tanks=1).memory
    assert tank_limits.format_size(1536 * 2**20) == "1.5 GiB"
