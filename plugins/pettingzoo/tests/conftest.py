from __future__ import annotations

import warnings

import pytest
from puffer_core.testing import reset_plugins


@pytest.fixture(autouse=True)
def fresh_plugins():
    """Each test loads plugins anew (a test may hide pettingzoo or change the environment)."""
    reset_plugins()
    yield
    reset_plugins()


@pytest.fixture(autouse=True)
def quiet_pettingzoo():
    # PettingZoo logs a UserWarning per illegal move and per rendering hint; tests check
    # behaviour, not those messages.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield
