"""Q2-Q8, JOB8 on the embedded platform: a dedicated hub with 2 demo GPUs, so that the queue is real."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time

import pytest
from hubproc import ADMIN, ADMIN_PASSWORD, own_hub
from tihub_client import wait

pytestmark = pytest.mark.e2e

GPUS = 2


@pytest.fixture(scope="module")
def qhub(tmp_path_factory):
    gen = own_hub(tmp_path_factory, "qhub", f"c.LocalBackend.devices = {{'demo-gpu': {GPUS}}}\n"
                  "c.TiService.scheduler_interval = 0.3\n"
                  # scores are saved whenever what users hold changes: a long period shows no lag
                  "c.TiService.usage_sample_interval = 600.0\n")
    hub = next(gen)
    # late waits are alerted 1 s past the estimate: the rule job-wait (it was TiService.wait_alert_grace)
    out = hub.admin.ti("admin", "alert-rule", "update", "job-wait", "--threshold", "1", "--json")
    assert out.returncode == 0, out.stderr
    yield hub
    next(gen, None)


def gpu_job(name: str, command: str = "sleep 60", **kw) -> dict:
    return {"name": name, "plan": "demo-gpu-1", "image": "python-cpu", "command": command, **kw}


def kill_all(u, ids):
    for i in ids:
        u.api("POST", f"/jobs/{i}/kill")
    for i in ids:
        u.wait_job(i, states=("killed", "completed", "failed", "error"))


def positions(u, ids):
    """Positions as the scheduler wrote them (None while provisional)."""
    q = {j["id"]: j["queue"] or {} for j in u.ok("GET", "/queue?all=1")["items"]}
    return {i: None if q[i].get("provisional") else q[i].get("position") for i in ids if i in q}


def test_queue_management_validates_and_reorders(qhub):
    admin, alice, bob = qhub.admin, qhub.person("qa"), qhub.person("qb")
    blockers = [alice.ok("POST", "/jobs", json=gpu_job(f"block{i}"))["id"] for i in range(GPUS)]
    wait(lambda: all(alice.ok("GET", f"/jobs/{b}")["status"] == "running" for b in blockers), what="blockers run")
    answers = [alice.ok("POST", "/jobs", json=gpu_job(f"wait{i}")) for i in range(3)]
    # each submission's answer says where it waits (counted after its commit, outside the write lock)
    assert [x["queue"]["position"] for x in answers] == [1, 2, 3], answers
    a1, a2, a3 = (x["id"] for x in answers)
    b1 = bob.ok("POST", "/jobs", json=gpu_job("bob-wait"))["id"]
    ids = [a1, a2, a3, b1]
    try:
        # the scheduler writes positions, reasons and estimated starts
        wait(lambda: all(p is not None for p in positions(alice, ids).values()) and len(positions(alice, ids)) == 4,
             what="positions")
        # bob holds nothing, alice holds both GPUs: bob's lower usage score puts him first
        head = bob.ok("GET", f"/jobs/{b1}")
        assert head["queue"]["position"] == 1 and head["queue"]["queue"] == "default/demo-gpu/single", head
        assert head["reason"].startswith("waiting for 1 x 1 x demo-gpu in pool default"), head["reason"]
        second = alice.ok("GET", f"/jobs/{a1}")
        assert second["queue"]["position"] == 2 and f"behind job {b1}" in second["reason"], second
        assert head["queue"]["estimated_start"] is None  # sleep 60 has no declared duration, no history yet

        # bad input: named field, nothing changed
        for body, field in (({"priority": 0}, "priority"), ({"priority": 1001}, "priority"),
                            ({"priority": "high"}, "priority"), ({}, "priority"), ({"priority": 5, "x": 1}, "x")):
            r = admin.api("POST", f"/jobs/{a3}/priority", json=body)
            assert r.status_code == 400 and r.json()["field"] == field, (body, r.text)
        assert alice.api("POST", f"/jobs/{a3}/priority", json={"priority": 900}).status_code == 403
        assert alice.api("POST", f"/jobs/{a3}/pin").status_code == 403
        assert admin.api("POST", "/jobs/99999999/pin").status_code == 404
        assert bob.api("POST", f"/jobs/{a2}/move", json={"to": "top"}).status_code == 403
        assert alice.api("POST", f"/jobs/{a2}/move", json={"to": "middle"}).json()["field"] == "to"
        assert alice.api("POST", f"/jobs/{a2}/move", json={"before": b1}).json()["field"] == "before"
        assert alice.api("POST", f"/jobs/{a2}/move", json={"to": "top", "after": a1}).status_code == 400
        r = admin.api("POST", f"/jobs/{blockers[0]}/pin")
        assert r.status_code == 409 and "only queued" in r.json()["detail"]
        assert alice.ok("GET", f"/jobs/{a3}")["priority"] == 100

        # the owner's order: a3 to the top of alice's jobs -> it takes a1's slot, never bob's
        alice.ok("POST", f"/jobs/{a3}/move", json={"to": "top"})
        wait(lambda: positions(alice, ids) == {b1: 1, a3: 2, a1: 3, a2: 4}, what="a3 moved up")
        # an admin pin goes first; a later pin before an earlier one
        admin.ok("POST", f"/jobs/{a2}/pin")
        wait(lambda: positions(alice, ids)[a2] == 1, what="pin")
        admin.ok("POST", f"/jobs/{a1}/pin")
        wait(lambda: positions(alice, ids) == {a1: 1, a2: 2, b1: 3, a3: 4}, what="later pin first")
        admin.ok("POST", f"/jobs/{a1}/unpin")
        admin.ok("POST", f"/jobs/{a2}/unpin")
        # priority beats usage scores
        admin.ok("POST", f"/jobs/{a1}/priority", json={"priority": 500})
        wait(lambda: positions(alice, ids) == {a1: 1, b1: 2, a3: 3, a2: 4}, what="priority")
        detail = bob.ok("GET", f"/jobs/{b1}")
        assert [j["id"] for j in detail["queue"]["jobs_ahead"]] == [a1]
        assert any("priority 100 -> 500" in e["message"] for e in alice.ok("GET", f"/jobs/{a1}")["events"])
        # the panel: alice runs 2 and queues 3 demo-gpu jobs
        panel = alice.ok("GET", "/queue/panel")
        mine = next(p for p in panel["mine"] if p["kind"] == "single" and p["device_type"] == "demo-gpu")
        assert (mine["running"], mine["queued"], mine["devices"], mine["gap"]) == (2, 3, 2, 3)
        gpu = next(c for c in panel["cluster"] if c["device_type"] == "demo-gpu")
        assert (gpu["total"], gpu["occupied"], gpu["free"], gpu["gap"]) == (GPUS, 2, 0, 4)
        # scores: mine only, everyone's with view-all (users have it by default); admins see all
        mine_scores = alice.ok("GET", "/queue/scores")["items"]
        assert {s["user"] for s in mine_scores} == {alice.name} and mine_scores[0]["held"] == 2
        everyone = admin.ok("GET", "/queue/scores?all=1")["items"]
        assert alice.name in {s["user"] for s in everyone}
        # cancel queued work
        assert bob.ok("POST", f"/jobs/{b1}/cancel")["status"] == "killed"
        r = bob.api("POST", f"/jobs/{b1}/cancel")
        assert r.status_code == 409
    finally:
        kill_all(alice, blockers + [a1, a2, a3])


def test_preemption_requeues_the_most_recent_preemptible_job(qhub):
    low, high = qhub.person("pl"), qhub.person("ph")
    first = low.ok("POST", "/jobs", json=gpu_job("pre1", preemptible=True))["id"]
    low.wait_job(first, states=("running",))
    second = low.ok("POST", "/jobs", json=gpu_job("pre2", preemptible=True))["id"]
    low.wait_job(second, states=("running",))
    boss = high.ok("POST", "/jobs", json=gpu_job("boss"))["id"]
    try:
        high.wait_job(boss, states=("running",), timeout=30)
        victim = low.wait_job(second, states=("queued",), timeout=30)
        # its reason says "preempted by job N" until the next scheduling cycle words why it waits now (a slow
        # poll may see only that): the history keeps the preemption
        events = [e["message"] for e in low.ok("GET", f"/jobs/{second}")["events"]]
        assert any(f"preempted by job {boss}" in m for m in events)
        assert victim["started_at"] is None and victim["placement"] is None
        assert low.ok("GET", f"/jobs/{first}")["status"] == "running"  # the older one keeps running
        # it gets its GPU back once the preempting job ends
        high.ok("POST", f"/jobs/{boss}/kill")
        low.wait_job(second, states=("running",), timeout=30)
    finally:
        kill_all(low, [first, second])
        kill_all(high, [boss])


def test_two_users_with_equal_demand_get_equal_device_time(qhub):
    """Alice submits 8 jobs, then Bob 8 jobs of the same size: a plain FIFO would run all of Alice's first.
    With usage scores they alternate: when half of the work is done, each has had half (within 25%)."""
    alice, bob = qhub.person("fa"), qhub.person("fb")
    n, secs = 8, 2
    ids = {alice.name: [], bob.name: []}
    for u in (alice, bob):
        for i in range(n):
            ids[u.name].append(u.ok("POST", "/jobs", json=gpu_job(f"equal{i}", f"sleep {secs}"))["id"])
    done = {}
    for u in (alice, bob):
        for i in ids[u.name]:
            done[i] = u.wait_job(i, timeout=180)
    assert all(j["status"] == "completed" for j in done.values())

    def t(s):
        return dt.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()

    finishes = sorted(t(j["finished_at"]) for j in done.values())
    mid = finishes[len(finishes) // 2 - 1]  # when half of the jobs are done
    share = {}
    for name, jobs in ids.items():
        share[name] = sum(max(0.0, min(mid, t(done[i]["finished_at"])) - t(done[i]["started_at"]))
                          for i in jobs if done[i]["started_at"] and t(done[i]["started_at"]) < mid)
    total = sum(share.values())
    assert total > 0
    assert abs(share[alice.name] - share[bob.name]) / total <= 0.25, share


def test_queue_cli_lists_and_manages(qhub, tmp_path):
    u = qhub.person("qc")
    blockers = [u.ok("POST", "/jobs", json=gpu_job(f"cblock{i}"))["id"] for i in range(GPUS)]
    waiting = [u.ok("POST", "/jobs", json=gpu_job(f"cwait{i}"))["id"] for i in range(2)]
    env = {"TI_API_URL": qhub.url, "TI_TOKEN": u.token, "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}

    def ti(*args):
        return subprocess.run([sys.executable, "-m", "ti_hub.cli.main", *args], env=env, capture_output=True,
                              text=True, timeout=60)

    try:
        wait(lambda: all(p is not None for p in positions(u, waiting).values()), what="positions")
        r = ti("queue", "--json")
        assert r.returncode == 0, r.stderr
        r = ti("queue")
        assert "cwait0" in r.stdout and "waiting for" in r.stdout
        row = next(x for x in r.stdout.splitlines() if "cwait0" in x)
        assert "demo-gpu-1" in row.split(), row  # the plan's name, not its id (issue 17, item 13)
        r = ti("queue", "move", str(waiting[1]), "--top")
        assert r.returncode == 0, r.stderr
        assert "moved; position 1 in default/demo-gpu/single" in r.stdout, r.stdout  # the new place (item 10)
        wait(lambda: positions(u, waiting) == {waiting[1]: 1, waiting[0]: 2}, what="cli move")
        r = ti("queue", "pin", str(waiting[0]))
        assert r.returncode != 0 and "permission" in r.stderr
        r = ti("queue", "scores", "--json")
        assert r.returncode == 0 and u.name in r.stdout
        r = ti("queue", "cancel", str(waiting[0]))
        assert r.returncode == 0, r.stderr
        assert u.ok("GET", f"/jobs/{waiting[0]}")["status"] == "killed"
    finally:
        kill_all(u, blockers + waiting)


def test_queue_page_shows_users_their_own_and_admins_everyones(qhub):
    u = qhub.person("pg")
    other = qhub.person("po")
    blockers = [other.ok("POST", "/jobs", json=gpu_job(f"pblock{i}"))["id"] for i in range(GPUS)]
    for b in blockers:
        other.wait_job(b, states=("running",))
    mine = u.ok("POST", "/jobs", json=gpu_job("page-wait"))["id"]
    try:
        wait(lambda: positions(u, [mine]).get(mine), what="position")
        # users hold jobs:view-all by default (SPEC ACC5): they see everyone's queue and scores, as admins do
        # (without it, only their own: tests/integration/test_live_queue.py)
        page = qhub.login(u.name, f"pw-{u.name}-long-enough").browser.get(f"{qhub.url}/services/ti/queue")
        assert page.status_code == 200 and "page-wait" in page.text
        assert f"<td>{other.name}</td>" in page.text  # other's usage score: users may view all jobs
        # SPEC JOB5: other sees my queued job as a summary (place, resources), nothing it would run; I never see
        # other's running blockers
        seen = other.ok("GET", f"/jobs/{mine}")
        assert seen["summary"] is True and seen["queue"]["position"] >= 1 and seen["devices_per_instance"] == 1
        assert not {"command", "env", "image", "volumes", "ports", "events"} & set(seen)
        (queued,) = [j for j in other.ok("GET", "/queue?all=1")["items"] if j["id"] == mine]
        assert queued["summary"] is True and "command" not in queued
        assert all(u.api("GET", f"/jobs/{b}").status_code == 404 for b in blockers)
        assert u.ok("GET", f"/jobs/{mine}")["command"] == "sleep 60"  # mine: in full
        admin_page = qhub.login(ADMIN, ADMIN_PASSWORD).browser.get(f"{qhub.url}/services/ti/queue")
        assert admin_page.status_code == 200 and "page-wait" in admin_page.text
        assert "<td>demo-gpu</td><td>2</td><td>2</td><td>0</td>" in admin_page.text  # total, occupied, free
        # issue 17, item 26: CPU and memory beside the device types (each blocker holds 1 core, 4096 MiB)
        (pool,) = u.ok("GET", "/queue/panel")["pools"]
        assert (pool["pool"], pool["cpu_used"], pool["memory_mib_used"]) == ("default", 2, 8192), pool
        cpu_row = f"<td>default</td><td>{pool['cpu_total']:g}</td><td>2</td><td>{pool['cpu_free']:g}</td>"
        assert cpu_row in page.text
        cluster = qhub.login(u.name, f"pw-{u.name}-long-enough").browser.get(f"{qhub.url}/services/ti/cluster")
        assert cluster.status_code == 200 and cpu_row in cluster.text
    finally:
        kill_all(other, blockers)
        kill_all(u, [mine])


def cli(hub, u, home, *args):
    env = {"TI_API_URL": hub.url, "TI_TOKEN": u.token, "HOME": str(home), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "ti_hub.cli.main", *args], env=env, capture_output=True,
                          text=True, timeout=60)


def test_a_gang_that_can_never_fit_is_refused_at_submission(qhub, tmp_path):
    """Issue 17, items 8 and 20: 3 workers of a 1-device plan on a 2-device cluster would queue forever."""
    u = qhub.person("qg")
    r = u.api("POST", "/jobs", json=gpu_job("gang3", kind="distributed", workers=3))
    assert r.status_code == 409 and r.json()["field"] == "workers", r.text  # the cluster decides: 409
    detail = r.json()["detail"]
    assert "can never run at once" in detail and f"at most {GPUS} at once" in detail, detail
    assert f"largest machine has {GPUS} x demo-gpu" in detail, detail
    r = cli(qhub, u, tmp_path, "job", "submit", "--name", "gang3", "--kind", "distributed", "--workers", "3",
            "--plan", "demo-gpu-1", "--image", "python-cpu", "--", "true")
    assert r.returncode != 0 and "workers" in r.stderr and "can never run at once" in r.stderr, r.stderr
    assert u.ok("GET", "/jobs")["total"] == 0  # nothing stored


def test_scores_show_the_exact_value_at_once(qhub, tmp_path):
    """Issue 17, item 11: held devices and the score are current right after admission and after a kill
    (they lagged up to the sampling period); devices are shown unweighted beside the weighted figure."""
    u = qhub.person("qs")

    def mine():
        return {s["device_type"]: s for s in u.ok("GET", "/queue/scores")["items"]}

    job = u.ok("POST", "/jobs", json=gpu_job("score-me"))["id"]
    try:
        u.wait_job(job, states=("running",))
        s = mine()["demo-gpu"]
        assert (s["held_devices"], s["held"]) == (1, 1.0) and s["score"] > 0, s
        first = s["score"]
        time.sleep(1.0)
        assert mine()["demo-gpu"]["score"] > first  # brought forward to the moment asked, not to the last save
        r = cli(qhub, u, tmp_path, "queue", "scores")
        assert r.returncode == 0 and "WEIGHTED" in r.stdout, r.stdout + r.stderr
        line = next(x for x in r.stdout.splitlines() if x.startswith(u.name))
        assert line.split()[1:4][0] == "demo-gpu" and line.split()[3] == "1", line
    finally:
        kill_all(u, [job])
    wait(lambda: mine()["demo-gpu"]["held_devices"] == 0, timeout=30, what="held 0 after the kill")
