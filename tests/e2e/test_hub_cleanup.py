"""A test hub stops on every path (issue 31, newcomer 9): one that never gets ready, one whose own_hub fails after
it started, and one whose module fixture fails after starting it leave no process behind, at once (not when the
garbage collector gets to a generator). One whose tests are over stops in the background, leaving nothing either."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hubproc import hub_processes, join_stopping, own_hub, start_hub

pytestmark = pytest.mark.e2e

TESTS = Path(__file__).resolve().parents[1]


def gone(data: Path, within: float = 30) -> list[int]:
    """What still runs for ``data`` after ``within`` seconds (what was stopped may take a moment to be reaped)."""
    deadline = time.monotonic() + within
    while (left := hub_processes(data)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def reap(data: Path) -> None:
    """Whatever a failed check left of this test's hub goes all the same (nothing of another test's: the data
    directory is this test's own)."""
    for pid in hub_processes(data):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_hub_that_is_not_ready_in_time_is_stopped_with_its_group(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    try:
        with pytest.raises(RuntimeError, match=r"did not become ready in 2 s; stopped") as err:
            start_hub(data, ready_timeout=2)
        pgid = int(re.search(r"pid (\d+)", str(err.value))[1])  # `ti-hub start` leads a session of its own
        deadline = time.monotonic() + 30
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not group_alive(pgid)
        assert gone(data) == []
    finally:
        reap(data)


def test_own_hub_failing_after_the_hub_started_stops_it(tmp_path_factory):
    # the hub starts with another admin password: own_hub's login, after the hub is up, fails
    hubs = own_hub(tmp_path_factory, "loginfails", extra_env={"TI_HUB_ADMIN_PASSWORD": "another-pass-5678"})
    with pytest.raises(PermissionError, match="login of admin refused"):
        next(hubs)
    (log,) = tmp_path_factory.getbasetemp().glob("loginfails[0-9]*/data.log")
    try:
        assert b"TiHub is ready at" in log.read_bytes()  # it was up
        assert gone(log.parent / "data") == []
    finally:
        reap(log.parent / "data")


def test_a_served_hub_stops_in_the_background_and_leaves_nothing(tmp_path_factory):
    """own_hub's hub, once its tests are over, stops while what comes next goes on (stop_in_background): closing
    the generator does not wait for the stop, which still leaves no process and no data directory."""
    hubs = own_hub(tmp_path_factory, "served")
    data = next(hubs).data_dir
    try:
        t0 = time.monotonic()
        hubs.close()
        assert time.monotonic() - t0 < 1.0  # a graceful stop takes seconds
        join_stopping()
        assert gone(data, within=0) == []
        assert not data.exists()
    finally:
        reap(data)


INNER = '''
import os
from pathlib import Path

import pytest
from hubproc import hub_processes, own_hub

MARK = Path(os.environ["MARK"])


def started(hub):
    assert hub_processes(hub.data_dir)  # the hub runs
    with MARK.open("a") as f:
        f.write(f"{hub.data_dir}\\n")
    raise RuntimeError("the module's setup fails after its hub started")


@pytest.fixture(scope="module")
def broken_loop(tmp_path_factory):
    for hub in own_hub(tmp_path_factory, "loop"):
        started(hub)
        yield hub


@pytest.fixture(scope="module")
def broken_next(tmp_path_factory):
    gen = own_hub(tmp_path_factory, "next")  # the generator stays a local of the failed fixture
    hub = next(gen)
    started(hub)
    yield hub
    next(gen, None)


def test_uses_one(broken_loop):
    pass


def test_uses_the_other(broken_next):
    pass


def test_then_none_of_them_runs():
    # the failed fixtures (and the hub generators they hold) live on in pytest for the rest of the module
    data = MARK.read_text().split()
    assert len(data) == 2
    assert [hub_processes(d) for d in data] == [[], []]
'''


def test_a_module_fixture_failing_after_its_hub_started_stops_it(tmp_path):
    """In a pytest run of its own (the hook tests/conftest.py registers, loaded from hubproc)."""
    (tmp_path / "test_inner_broken.py").write_text(textwrap.dedent(INNER))
    mark = tmp_path / "data-dir"
    path = [str(TESTS), str(TESTS.parent), os.environ.get("PYTHONPATH", "")]  # hubproc, and this checkout's ti_hub
    env = {**os.environ, "MARK": str(mark), "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "hubproc", "-p", "no:cacheprovider", "-q",
                          "--basetemp", str(tmp_path / "inner"), "--rootdir", str(tmp_path), "-c", os.devnull,
                          str(tmp_path / "test_inner_broken.py")],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    report = out.stdout + out.stderr
    data = [Path(d) for d in mark.read_text().split()] if mark.exists() else []
    try:
        assert re.search(r"\b1 passed\b.*\b2 errors\b", report), report
        assert "the module's setup fails after its hub started" in report
        assert [gone(d, within=0) for d in data] == [[], []]
    finally:
        for d in data:
            reap(d)
