"""ti_hub/plumbing/children.py: children die with their parent (kill -9 included); a parent sees a child's death at once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from ti_hub.plumbing import children
from ti_hub.plumbing.children import restart_delay

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl and pidfds are Linux's")

PARENT = """
import subprocess, sys, time
from ti_hub.plumbing.children import die_with_parent_preexec
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                         preexec_fn=die_with_parent_preexec())
print(child.pid, flush=True)
time.sleep(60)
"""


def gone(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def test_a_child_dies_when_its_parent_is_killed_hard():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    assert not gone(child)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while not gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(child), "the child outlived its killed parent"


def test_a_child_whose_parent_died_before_the_prctl_signals_itself():
    preexec = children.die_with_parent_preexec(signal.SIGTERM)
    pid = os.fork()
    if pid == 0:  # this child stands for "the parent is gone": its own child's getppid() is not the builder
        code = 1
        try:
            grandchild = os.fork()
            if grandchild == 0:
                try:
                    preexec()
                    time.sleep(5)
                finally:
                    os._exit(0)
            _, status = os.waitpid(grandchild, 0)
            code = 0 if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, "the grandchild did not signal itself"


def test_preexec_is_only_set_from_the_main_thread():
    import threading

    got = []
    t = threading.Thread(target=lambda: got.append(children.die_with_parent_preexec()))
    t.start()
    t.join()
    assert got == [None]  # the signal would come when that thread ends, not when the process dies


def test_watch_exit_calls_back_at_once_and_can_be_cancelled():
    async def scenario() -> tuple[float, float]:
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
        q = subprocess.Popen([sys.executable, "-c", "pass"])
        seen = asyncio.get_running_loop().create_future()
        cancel = children.watch_exit(p.pid, lambda: seen.set_result(time.monotonic()))
        children.watch_exit(q.pid, lambda: seen.set_result(-1.0))()  # cancelled at once: never calls
        assert cancel is not None
        at = await asyncio.wait_for(seen, 10)
        ended = time.monotonic()
        p.wait()
        q.wait()
        return at, ended

    t0 = time.monotonic()
    at, _ = asyncio.run(scenario())
    assert 0.4 < at - t0 < 2.0  # the child slept 0.5 s; JupyterHub's poll would have come after 30 s


def test_restart_at_once_then_back_off_while_it_keeps_dying_at_start():
    assert restart_delay(3600, 0) == (0.0, 0)  # crashed after running a while
    assert restart_delay(1.0, 0) == (0.0, 1)  # one quick retry
    assert restart_delay(1.0, 1) == (1.0, 2)
    assert restart_delay(1.0, 2) == (2.0, 3)
    assert restart_delay(1.0, 10) == (30.0, 11)
    assert restart_delay(60, 11) == (0.0, 0)  # it ran a while: the streak is over
