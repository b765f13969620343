"""The docker fixtures: one engine and one PufferTank build per test session (per xdist worker)."""

from __future__ import annotations

import pytest
from docker_tank import build_tank, engine


@pytest.fixture(scope="session")
def client():
    return engine()


@pytest.fixture(scope="session")
def built(client):
    """The three layers (nethack and atari, no torch) tagged puffertank-ci, built once."""
    return build_tank()
