"""Issue 30: a user's uid is never one this host already uses, as an account or as the owner of a running process
(another TiHub's user, a container's), on SQLite and PostgreSQL (ti_hub/ops/unixids.py)."""

from __future__ import annotations

import os
import subprocess

import pytest

from ti_hub.ops import unixids
from ti_hub.ops.unixids import HostUids, UidPolicy, process_uids


def test_allocation_skips_uids_of_running_processes(db, tmp_path):
    proc = tmp_path / "proc"
    for pid, uid in (("10", 700_000), ("11", 700_001), ("12", 700_003)):
        (proc / pid).mkdir(parents=True)
        (proc / pid / "status").write_text(f"Name:\tx\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    policy = UidPolicy(700_000, 700_005)
    with db.begin() as s:
        got = unixids.ensure(s, ["ann", "bob"], policy, HostUids(proc, in_passwd=lambda uid: uid == 700_004))
    assert got == {"ann": 700_002, "bob": 700_005}
    with db.begin() as s:  # kept, whatever runs now
        assert unixids.ensure(s, ["bob", "ann"], policy, lambda uid: True) == got
        with pytest.raises(Exception, match="no Unix uid is left in 700000-700005"):
            unixids.ensure(s, ["cat"], policy, HostUids(proc, in_passwd=lambda uid: False))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a process as another uid")
def test_allocation_skips_the_uid_of_a_real_process(db):
    running = process_uids()
    uid = next(u for u in range(3_900_000, 4_000_000, 7) if u not in running and u + 1 not in running
               and not unixids._in_passwd(u) and not unixids._in_passwd(u + 1))
    sleeper = subprocess.Popen(["sleep", "60"], user=uid, group=uid)
    try:
        with db.begin() as s:
            # the default host_has: passwd and /proc, read at the allocation
            assert unixids.ensure(s, ["dan"], UidPolicy(uid, uid + 10)) == {"dan": uid + 1}
    finally:
        sleeper.kill()
        sleeper.wait()
