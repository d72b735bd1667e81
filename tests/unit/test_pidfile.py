"""ti_hub/plumbing/pidfile.py: a pid file names one process (pid + start time + boot), never one that took its pid over."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from ti_hub.plumbing import pidfile
from ti_hub.plumbing.pidfile import Proc, Record, parse_record, parse_stat, same_process, started_at

STAT = "4242 (python3 -m ti_hub (x) y) S 4200 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1 2 3"


def test_stat_is_parsed_after_the_last_parenthesis():
    assert parse_stat(4242, STAT) == Proc(pid=4242, ppid=4200, state="S", start=987654)


def test_records_round_trip_and_a_bare_pid_is_read():
    full = Record(12, 3456, "b00t")
    assert parse_record(full.text()) == full
    assert parse_record(Record(12, 3456, None).text()) == Record(12, 3456, None)
    assert parse_record("12\n") == Record(12)  # JupyterHub's own files
    assert parse_record("") is None and parse_record("x 1 2") is None and parse_record("0") is None


def test_a_full_record_matches_only_the_same_start_and_boot():
    rec = Record(12, 3456, "b00t")
    assert same_process(rec, Proc(12, 1, "S", 3456), "b00t", None, 100)
    assert not same_process(rec, Proc(12, 1, "S", 3999), "b00t", None, 100)  # the pid was reused
    assert not same_process(rec, Proc(12, 1, "S", 3456), "other", None, 100)  # another boot
    assert not same_process(rec, None, "b00t", None, 100)  # gone
    assert not same_process(rec, Proc(12, 1, "Z", 3456), "b00t", None, 100)  # a zombie holds nothing


def test_a_bare_pid_matches_a_process_started_before_the_file_was_written():
    rec = Record(12)
    # started 50 s after boot; the file was written 51 s after boot: the one that wrote it
    assert same_process(rec, Proc(12, 1, "S", 5000), "b", 51.0, 100)
    # started 100 s after boot, long after the file: it took the pid over
    assert not same_process(rec, Proc(12, 1, "S", 10000), "b", 51.0, 100)
    assert not same_process(rec, Proc(12, 1, "S", 5000), "b", -3.0, 100)  # a file from an earlier boot
    assert not same_process(rec, Proc(12, 1, "S", 5000), "b", None, 100)


def test_started_at_is_boot_time_plus_ticks():
    assert started_at(Record(1, 250, "b"), 1000.0, 100) == 1002.5
    assert started_at(Record(1), 1000.0, 100) is None


def test_live_processes_are_recognized_and_dead_or_reused_ones_are_not(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        path = tmp_path / "x.pid"
        rec = pidfile.write(path, child.pid)
        assert rec.start is not None and pidfile.alive(path) == rec and pidfile.running(rec)
        # the same pid with another start time (what a reused pid looks like)
        path.write_text(Record(child.pid, rec.start + 1, rec.boot).text())
        assert pidfile.alive(path) is None
        # JupyterHub's kind of file: a bare pid, written after the process started
        path.write_text(f"{child.pid}\n")
        assert pidfile.alive(path) == rec
        # ... or one written long before it started: the pid names a later process
        old = time.time() - 3600
        os.utime(path, (old, old))
        assert pidfile.alive(path) is None
    finally:
        child.kill()
        child.wait()
    assert not pidfile.running(rec)


def test_remove_if_leaves_a_successors_record(tmp_path):
    path = tmp_path / "x.pid"
    mine = pidfile.write(path, os.getpid())
    path.write_text(Record(os.getpid(), 1, "other").text())  # a successor wrote its own meanwhile
    pidfile.remove_if(path, mine)
    assert path.exists()
    path.write_text(mine.text())
    pidfile.remove_if(path, mine)
    assert not path.exists()
