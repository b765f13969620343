"""The bench tests fail if anything forks this process while it runs other threads (see fork_guard)."""

from __future__ import annotations

import pytest
from fork_guard import forks_from_threads_fail


@pytest.fixture(autouse=True)
def no_fork_from_threads():
    with forks_from_threads_fail():
        yield
