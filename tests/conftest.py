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


def tier_of(nodeid: str) -> str:
    """The tier of a test id: its folder under tests/ (unit, integration, e2e, browser, k8s)."""
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0].split("::")[0]


def pytest_terminal_summary(terminalreporter):
    """Each tier's time (setup, call and teardown of its tests, its fixtures' hubs included), for .ci/run's end."""
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    for reports in terminalreporter.stats.values():
        for rep in reports:
            nodeid, duration = getattr(rep, "nodeid", None), getattr(rep, "duration", None)
            if not nodeid or duration is None or getattr(rep, "when", None) is None:
                continue
            tier = tier_of(nodeid)
            totals[tier] = totals.get(tier, 0.0) + duration
            if rep.when == "call" or (rep.when == "setup" and rep.outcome != "passed"):
                counts[tier] = counts.get(tier, 0) + 1
    if not totals:
        return
    terminalreporter.write_sep("=", "time per tier")
    for tier in sorted(totals, key=totals.get, reverse=True):
        terminalreporter.write_line(f"{tier:<12} {totals[tier]:7.0f} s = {totals[tier] / 60:5.1f} min  "
                                    f"({counts.get(tier, 0)} tests)")
    everything = sum(totals.values())
    terminalreporter.write_line(f"{'all':<12} {everything:7.0f} s = {everything / 60:5.1f} min")
