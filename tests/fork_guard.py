"""Forking a process that runs other threads fails the test (used by the conftests of the
vector and bench tests): such a fork may deadlock the child, and Python 3.12+ only warns.

A warning filter of "error" (pytest's ``filterwarnings``) cannot catch it: CPython turns the
warning into an exception and at once clears it (raising out of ``os.fork`` mid-way is not
safe), so the fork goes on and, under "error", the warning is lost without a trace. This
records the warning instead and fails the test once it is over.
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Iterator

import pytest

#: The start of Python's warning (3.12+) when a process with other threads forks.
FORK_WARNING = r"This process \(pid=\d+\) is multi-threaded, use of fork\(\)"


def is_fork_warning(record: warnings.WarningMessage) -> bool:
    return issubclass(record.category, DeprecationWarning) and re.match(FORK_WARNING, str(record.message)) is not None


@contextlib.contextmanager
def forks_from_threads_fail() -> Iterator[None]:
    """Fail the test if anything in the block forks this process while it runs other threads;
    other warnings pass through to pytest as usual."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.filterwarnings("always", message=FORK_WARNING, category=DeprecationWarning)
        yield
    forks = [record for record in caught if is_fork_warning(record)]
    for other in (record for record in caught if not is_fork_warning(record)):  # back to pytest's summary
        warnings.warn_explicit(other.message, other.category, other.filename, other.lineno, source=other.source)
    if forks:
        where = ", ".join(sorted({f"{record.filename}:{record.lineno}" for record in forks}))
        pytest.fail(
            f"forked {len(forks)} time(s) while the process ran other threads ({where}): the child may deadlock; "
            "the backend must start workers with forkserver there",
            pytrace=False,
        )


@contextlib.contextmanager
def forking_on_purpose() -> Iterator[None]:
    """Around a fork the test asks for itself (``start_method="fork"``): where earlier tests
    left threads running (torch's pool), Python warns, rightly, and that is not the backend's doing."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=FORK_WARNING, category=DeprecationWarning)
        yield
