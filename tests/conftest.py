"""Shared fixtures: a real embedded TiHub (JupyterHub + proxy + ti service + local backend) per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hubproc import own_hub  # noqa: E402
from hubproc import pytest_fixture_setup  # noqa: E402, F401  (a hook: a fixture failing after its hub started stops it)


@pytest.fixture(scope="session", autouse=True)
def no_mounts_left(tmp_path_factory):
    """Volumes and work directories may be loop-mounted file systems (ti_hub/storage/loopfs.py) that outlive
    the driver or hub that made them: whatever this session left mounted under its temporary directory goes at
    its end (lazily; the loop devices detach themselves), so that none stays attached and pytest can remove the
    directory later. Tests that make volumes through a LocalVolumeDriver of their own and do not test disks
    pass it disk_limits="off"."""
    yield
    from hubproc import unmount_under

    unmount_under(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def hub(tmp_path_factory):
    yield from own_hub(tmp_path_factory, "tihub")


@pytest.fixture
def new_user(hub):
    """Sign up a fresh user, have the admin authorize them, and log them in."""
    return hub.person
