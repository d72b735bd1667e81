"""The replay on hand-made traces whose outcome can be worked out on paper."""

from __future__ import annotations

import math

import pytest

from ti_hub.backends.base import NodeCapacity
from ti_hub.scheduler.model import Instance
from ti_hub.sim import metrics
from ti_hub.sim.engine import Settings, simulate
from ti_hub.sim.policies import POLICIES, parse
from ti_hub.sim.trace import TraceJob

T = 3600.0


def node(name: str = "n1", gpus: int = 1, pool: str = "default") -> NodeCapacity:
    return NodeCapacity(name, pool, {"g": list(range(gpus))} if gpus else {}, 64.0, 1 << 20)


def job(jid: int, submit: float, duration: float, user: str = "ann", gpus: int = 1, n: int = 1,
        preemptible: bool = False, priority: int = 100) -> TraceJob:
    return TraceJob(jid, submit, duration, user, "distributed" if n > 1 else "single", "default",
                    "g" if gpus else "cpu", tuple(Instance(gpus, 1.0, 1024) for _ in range(n)), priority, preemptible)


def run(nodes, jobs, policy: str, **kw):
    res = simulate(nodes, jobs, POLICIES[policy], Settings(settling_s=T, **kw))
    return res, {r.job.job_id: r for r in res.records}


# one device; a heavy user queues three jobs, a light user one, while the heavy user's first job runs
HEAVY_THEN_LIGHT = [job(1, 0, 100, "heavy"), job(2, 1, 100, "heavy"), job(3, 2, 100, "heavy"),
                    job(4, 3, 100, "light")]

ORDER_CASES = [
    # (policy, expected start of each job): fifo serves by submission; fair lets the light user go next
    ("fifo", {1: 0, 2: 100, 3: 200, 4: 300}),
    ("no-score", {1: 0, 2: 100, 3: 200, 4: 300}),
    ("fair", {1: 0, 4: 100, 2: 200, 3: 300}),
]


@pytest.mark.parametrize("policy,starts", ORDER_CASES, ids=[c[0] for c in ORDER_CASES])
def test_fifo_and_fair_order(policy, starts):
    res, recs = run([node()], HEAVY_THEN_LIGHT, policy)
    assert {j: r.first_start for j, r in recs.items()} == starts
    assert all(r.waited_s == starts[j] - r.job.submit_s for j, r in recs.items())
    assert all(r.end == starts[j] + 100 for j, r in recs.items())
    summ = metrics.summary(res)
    delays = sorted(starts[j] - r.job.submit_s for j, r in recs.items())
    assert summ["delay_s"]["mean"] == pytest.approx(sum(delays) / 4) and summ["delay_s"]["max"] == delays[-1]
    assert summ["completed"] == 4 and summ["unfinished"] == 0 and summ["rejected"] == 0


def test_priority_counts_except_in_fifo():
    jobs = [job(1, 0, 10), job(2, 1, 10), job(3, 2, 10, priority=500)]
    assert run([node()], jobs, "fifo")[1][3].first_start == 20
    assert run([node()], jobs, "no-score")[1][3].first_start == 10


def test_utilization_over_the_run_and_up_to_the_horizon():
    # 2 devices; 2 held over [0, 50], 1 held over [100, 200]; last submission at 100
    res, _ = run([node(gpus=2)], [job(1, 0, 50, gpus=2), job(2, 100, 100)], "fair")
    summ = metrics.summary(res)
    assert (res.start_s, res.end_s, res.horizon_s) == (0, 200, 100)
    assert summ["utilization"] == pytest.approx((2 * 50 + 1 * 100) / (2 * 200))
    assert summ["utilization_horizon"] == pytest.approx(2 * 50 / (2 * 100))


def test_a_preempted_job_goes_back_and_runs_again_in_full():
    jobs = [job(1, 0, 100, "be", preemptible=True), job(2, 10, 50, "ls")]
    res, recs = run([node()], jobs, "fair")
    assert (recs[2].first_start, recs[2].end) == (10, 60)
    assert (recs[1].first_start, recs[1].preemptions, recs[1].end) == (0, 1, 160)
    assert recs[1].waited_s == 50  # from its preemption at 10 to its restart at 60
    assert res.preemptions == 1 and metrics.summary(res)["jct_s"]["max"] == 160


def test_backfill_starts_a_short_job_before_the_blocked_head_when_asked():
    # 2 devices; job 1 holds one until 100; job 2 (2 devices) must wait for it; job 3 (1 device, 50 s) fits now
    jobs = [job(1, 0, 100), job(2, 1, 10, gpus=2), job(3, 2, 50)]
    _, plain = run([node(gpus=2)], jobs, "fair")
    _, bf = run([node(gpus=2)], jobs, "fair+backfill")
    assert (plain[2].first_start, plain[3].first_start) == (100, 110)  # 3 waits behind the head
    assert (bf[3].first_start, bf[3].backfilled, bf[2].first_start) == (2, True, 100)  # and the head is not delayed


def test_a_job_no_node_can_hold_is_rejected_and_blocks_nothing():
    res, recs = run([node(gpus=2)], [job(1, 0, 10, gpus=4), job(2, 1, 10)], "fifo")
    assert recs[1].rejected and recs[1].end is None
    assert recs[2].first_start == 1
    summ = metrics.summary(res)
    assert (summ["rejected"], summ["completed"], summ["unfinished"]) == (1, 1, 0)


def test_a_gang_that_never_fits_is_rejected_and_blocks_nothing():
    # one instance fits a node, two never do at once (issue 17, item 8): rejected, not queued forever
    jobs = [job(1, 0, 10, gpus=2, n=2), job(2, 1, 10, gpus=1, n=2), job(3, 2, 10)]
    res, recs = run([node(gpus=2)], jobs, "fair")
    summ = metrics.summary(res)
    assert recs[1].rejected and (summ["rejected"], summ["unfinished"], summ["completed"]) == (1, 0, 2)


def test_cycles_only_when_someone_waits_and_something_changed():
    # three jobs at once: one cycle admits all; the completions find nobody waiting
    res, recs = run([node(gpus=4)], [job(1, 5, 10), job(2, 5, 20), job(3, 5, 30)], "fair")
    assert res.cycles == 1 and {r.first_start for r in recs.values()} == {5}
    res, _ = run([node(gpus=1)], [job(1, 0, 10), job(2, 0, 10)], "fair")
    assert res.cycles == 2  # at 0 (one admitted, one waits) and at 10 (the device is free again)


def test_period_adds_cycles_while_jobs_wait():
    jobs = [job(1, 0, 100), job(2, 0, 10)]
    res, recs = run([node()], jobs, "fair", period_s=30)
    assert res.cycles == 5 and recs[2].first_start == 100  # at 0, 30, 60, 90 and 100


def test_the_score_timeline_follows_the_closed_form():
    res, _ = run([node()], [job(1, 0, 2 * T, "ann"), job(2, 3 * T, 10, "bob")], "fair", sample_s=T / 2)
    got = {t: v for t, u, _, v in res.scores if u == "ann"}
    for t in (T / 2, T, 2 * T):  # holding 1 device from 0: s = 1 - e^(-t/T)
        assert got[t] == pytest.approx(1 - math.exp(-t / T))
    s2 = 1 - math.exp(-2)  # released at 2T: decays from there
    assert got[3 * T] == pytest.approx(s2 * math.exp(-1))


def test_shares_and_jain_against_demand():
    # one device, both users want it for [0, 100]; fifo serves ann first: she gets all she asked for by the
    # horizon (100), bob nothing
    jobs = [job(1, 0, 100, "ann"), job(2, 0, 100, "bob"), job(3, 100, 1, "cyd", gpus=0)]
    res, _ = run([node()], jobs, "fifo")
    rows = {u.user: u for u in metrics.users(res)}
    assert rows["ann"].satisfaction == pytest.approx(1.0) and rows["bob"].satisfaction == 0.0
    assert rows["ann"].demand_share == pytest.approx(0.5) and rows["ann"].received_share == pytest.approx(1.0)
    assert math.isnan(rows["cyd"].satisfaction)  # no device demand: left out of Jain's index
    assert metrics.summary(res, list(rows.values()))["jain_index"] == pytest.approx(0.5)


def test_policy_names():
    assert [p.name for p in parse("all")] == ["fifo", "no-score", "fair", "fair+backfill"]
    assert [p.name for p in parse("fair, fifo,fair")] == ["fair", "fifo"]
    with pytest.raises(ValueError, match="unknown policy 'lifo'"):
        parse("lifo")
