"""The notebook's line about an idle workspace (magics/leasewatch.py): which alerts make a line, once each."""

from __future__ import annotations

import threading

from ti_hub.magics.leasewatch import LeaseWatch, notices, start_in_workspace


def idle(id_: int, owner="ann", ws="desk", open_=True, **extra):
    return {"id": id_, "kind": "workspace", "rule": "idle", "open": open_,
            "figures": {"owner": owner, "workspace": ws, "idle_since": "2026-11-27T01:00:00Z",
                        "reclaim_at": "2026-11-27T01:30:00Z", "mean_utilization": 0.5, **extra}}


def test_only_open_idle_warnings_of_this_workspace_make_a_line_once():
    seen: set[int] = set()
    alerts = [idle(1), idle(2, ws="other"), idle(3, owner="bob"), idle(4, open_=False),
              {"id": 5, "kind": "job", "rule": "overrun", "figures": {"owner": "ann", "workspace": "desk"}}]
    (line,) = notices(alerts, "ann", "desk", seen)
    assert "idle since 2026-11-27T01:00:00Z" in line and "stopped at 2026-11-27T01:30:00Z" in line
    assert "0.5 %" in line and "%ti_renew" in line
    assert notices(alerts, "ann", "desk", seen) == []  # shown once
    assert len(notices(alerts + [idle(6)], "ann", "desk", seen)) == 1  # a new warning after a renewal: again


def test_the_watch_survives_a_failing_api_and_prints_from_its_thread():
    said: list[str] = []
    calls = {"n": 0}
    done = threading.Event()

    def fetch():
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("hub restarting")
        return {"items": [idle(7)]}

    def say(line):
        said.append(line)
        done.set()

    w = LeaseWatch(fetch, "ann", "desk", say=say, interval=0.01)
    w.start()
    assert done.wait(5)
    w.stopped.set()
    assert calls["n"] >= 2 and len(said) == 1 and "idle since" in said[0]


def test_no_watch_outside_a_workspace():
    assert start_in_workspace({}) is None
    assert start_in_workspace({"JUPYTERHUB_USER": "ann"}) is None  # no TI_API_URL
    assert start_in_workspace({"JUPYTERHUB_USER": "ann", "TI_API_URL": "http://x", "TI_LEASE_WATCH": "0"}) is None
