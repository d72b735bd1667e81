"""The SQLite write lock hands over across processes at once; one ti service per database."""

from __future__ import annotations

import logging
import os
import time

import pytest

from ti_hub.db.writelock import WriteLock
from ti_hub.service.processes import hold_instance_lock


def test_write_lock_serializes_processes_and_hands_over_promptly(tmp_path):
    lock = WriteLock(tmp_path / "ti.sqlite.write-lock")
    with lock:
        pass  # opened in this process before the fork, as the service's leader does
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child holds the lock for 0.5 s
        os.close(r)
        try:
            with lock:
                os.write(w, b"held")
                time.sleep(0.5)
                released = time.monotonic()
            os.write(w, repr(released).encode())
        finally:
            os._exit(0)
    os.close(w)
    assert os.read(r, 4) == b"held"
    t0 = time.monotonic()
    with lock:
        got = time.monotonic()
    released = float(os.read(r, 64))
    os.waitpid(pid, 0)
    assert got - t0 >= 0.4, "the lock was not exclusive across processes"
    # SQLite's busy handler would sleep up to 100 ms between tries; the flock is handed over at once
    assert got - released < 0.05, got - released


def test_write_lock_serializes_threads(tmp_path):
    import threading

    lock = WriteLock(tmp_path / "lock")
    inside, worst = [0], [0]

    def work():
        for _ in range(200):
            with lock:
                inside[0] += 1
                worst[0] = max(worst[0], inside[0])
                inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert worst[0] == 1


def test_second_service_on_a_database_waits_then_refuses(tmp_path):
    log = logging.getLogger("test")
    path = tmp_path / "ti.sqlite.service-lock"
    first = hold_instance_lock(path, log)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            hold_instance_lock(path, log, wait=0.3)
        except SystemExit as e:
            code = 7 if "another ti service" in str(e) else 2
        finally:
            os._exit(code)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7
    os.close(first)  # the first service is gone: the next one gets the lock
    os.close(hold_instance_lock(path, log, wait=0.3))


def test_scheduler_share_is_validated(tmp_path):
    from traitlets import TraitError

    from ti_hub.service.app import TiService

    with pytest.raises(TraitError, match="scheduler_max_share"):
        TiService(scheduler_max_share=0)
