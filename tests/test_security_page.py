"""docs/security.md matches the code: the limits it quotes, and the names it tells users to type."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from puffer_core import atomic
from puffer_core.plugins import manager
from puffer_core.specs import limits
from puffer_core.train import archive, config, restore, run_lock
from puffer_core.vector.ray.start import OPT_IN

ROOT = Path(__file__).parents[1]
PAGE = (ROOT / "docs" / "security.md").read_text()


def test_the_limits_it_quotes_are_the_codes():
    assert f"`num_envs` ≤ {limits.MAX_ENVS:,}" in PAGE
    assert f"`hidden_size` ≤ {config.MAX_HIDDEN:,}" in PAGE
    assert limits.MAX_SECONDS == 7 * 24 * 3600 and "at most a\nweek" in PAGE
    assert f"`spin_us` 0 to {limits.MAX_SPIN_US:,.0f} µs" in PAGE and limits.MAX_INFO_BUFFER_BYTES == 2**30
    assert f"`max_restarts` 1 to {limits.MAX_RESTARTS:,}" in PAGE and "`info_buffer_bytes` 0 to 1 GiB" in PAGE


def test_the_checkpoint_bounds_it_quotes_are_the_codes():
    assert f"more than {archive.MAX_ENTRIES:,} entries" in PAGE
    assert archive.MAX_PICKLE_BYTES == 256 * 2**20 and "a pickle over 256 MiB" in PAGE
    assert f"({restore.ENVS_PER_CPU:,} envs\n  and {restore.WORKERS_PER_CPU} workers per CPU" in PAGE


def test_the_names_it_gives_exist():
    from puffer_core.cli import matrix as matrix_cli, tank as tank_cli

    checkpoint = (ROOT / "puffer_core" / "train" / "checkpoint.py").read_text()  # read, not imported: needs torch
    assert f"DIR/{run_lock.LOCK_NAME}" in PAGE
    assert f'"{OPT_IN}": True' in PAGE
    assert "UnsafeCheckpointError" in PAGE and "class UnsafeCheckpointError" in checkpoint
    assert "--pass-env" in PAGE and "--pass-env" in inspect.getsource(matrix_cli)
    assert "--cap-add" in PAGE and "--cap-add" in inspect.getsource(tank_cli)
    assert "weights_only=True" in PAGE and "weights_only=True" in checkpoint
    for name in ("private_directory", "publish_new"):
        assert f"`{name}`" in PAGE and callable(getattr(atomic, name, None)), name
    assert "mmap=True" in PAGE and "mmap=True" in checkpoint
    assert "`PUBLISHED_PLUGINS`" in PAGE and hasattr(manager, "PUBLISHED_PLUGINS")
    assert "`EnvSpec.restorable`" in PAGE
    from puffer_core.cli import train as train_cli

    options = {option for param in train_cli.eval_cmd.params for option in param.opts}
    assert {"--trust-kwargs", "--no-saved-kwargs", "--kwarg"} <= options
    assert all(flag in PAGE for flag in ("--trust-kwargs", "--no-saved-kwargs", "--kwarg"))


def test_the_readme_links_it():
    assert "](docs/security.md)" in (ROOT / "README.md").read_text()


def test_the_matrix_and_ray_names_it_gives_exist():
    from puffer_core.matrix.environment import INDEX_VARIABLES, NEVER_PASSED
    from puffer_core.vector.ray.private import TOKEN_NAME

    for name in ("PIP_*", "UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS"):
        assert name in INDEX_VARIABLES and f"`{name}`" in PAGE
    assert "HOME" in NEVER_PASSED and "`HOME`" in PAGE
    assert f"`~/.ray/{TOKEN_NAME}`" in PAGE and "`RAY_AUTH_TOKEN_PATH`" in PAGE


def test_the_registry_names_it_gives_exist():
    from puffer_core.cli import tank_registry
    from puffer_core.tank.box.login import IMAGE_FILE

    assert "`puffer_core/specs/images.py`" in PAGE and (ROOT / "puffer_core" / "specs" / "images.py").is_file()
    push = {option for param in tank_registry.push_cmd.params for option in param.opts}
    pull = {option for param in tank_registry.pull_cmd.params for option in param.opts}
    assert "--pins" in push and {"--pins", "--registry", "--lock"} <= pull
    assert f"`{IMAGE_FILE}`" in PAGE and "valid_image()" in (ROOT / "tank" / "setup-host.sh").read_text()


def test_the_shared_box_names_it_gives_exist():
    from puffer_core.tank.box import broker

    setup_host = (ROOT / "tank" / "setup-host.sh").read_text()
    assert "`puffer_core/tank/box/broker.py`" in PAGE and (ROOT / "puffer_core/tank/box/broker.py").is_file()
    assert f"`{broker.BrokerConfig().state_dir}/<id>.json`" in PAGE
    assert "`/etc/sudoers.d/puffertank`" in PAGE and "SUDOERS=/etc/sudoers.d/puffertank" in setup_host
    assert f"`{broker.BrokerConfig().allowed_file}`" in PAGE and f"`{broker.BrokerConfig().image_file}`" in PAGE
    tests = "tests/tank/test_tank_broker_docker.py"
    assert tests in PAGE and (ROOT / tests).is_file()


def test_every_line_of_what_an_enrolled_user_can_do_names_a_test_that_exists():
    section = PAGE.split("## The host: what an enrolled user can and cannot do")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| can") or line.startswith("| cannot")]
    assert len(rows) >= 10
    named = [name for line in section.splitlines() for name in re.findall(r"`(test_[a-z0-9_]+)`", line)]
    assert all(re.search(r"`test_[a-z0-9_]+`", row) for row in rows), "each row names its test"
    sources = "\n".join(path.read_text() for path in (ROOT / "tests").rglob("test_*.py"))
    missing = [name for name in named if f"def {name}(" not in sources]
    assert not missing, f"docs/security.md names tests that do not exist: {missing}"


def test_the_hosts_names_it_gives_exist():
    from puffer_core.tank.box.limits import LIMITS_FILE

    setup_host = (ROOT / "tank" / "setup-host.sh").read_text()
    assert f"`{LIMITS_FILE}`" in PAGE and f"LIMITS_FILE={LIMITS_FILE}" in setup_host
    assert (
        "`/etc/ssh/sshd_config.d/puffertank.conf`" in PAGE
        and "SSHD_DROPIN=/etc/ssh/sshd_config.d/puffertank.conf" in setup_host
    )
    for name in ("read_regular", "open_own_log"):
        assert f"`{name}`" in PAGE and callable(getattr(atomic, name, None)), name
    assert "`Proxy-Authorization`" in PAGE
