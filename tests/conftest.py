"""Shared fixtures: a real embedded TiHub (JupyterHub + proxy + ti service + local backend) per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hubproc import own_hub  # noqa: E402


@pytest.fixture(scope="session")
def hub(tmp_path_factory):
    yield from own_hub(tmp_path_factory, "tihub")


@pytest.fixture
def new_user(hub):
    """Sign up a fresh user, have the admin authorize them, and log them in."""
    return hub.person
