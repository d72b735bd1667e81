"""Lending idle devices between virtual clusters of one cohort (issue 18, beyond the anchors): the pure policy."""

from __future__ import annotations

from ti_hub.backends.base import NodeCapacity
from ti_hub.scheduler.core import VCRules, cycle
from ti_hub.scheduler.model import Allocation, Instance, Request, Running


def node(name: str, pool: str, gpus: int = 1, dtype: str = "gpu") -> NodeCapacity:
    return NodeCapacity(name, pool, {dtype: list(range(gpus))}, 8.0, 8192)


def req(job_id: int, pool: str, owner: str = "u1", gpus: int = 1, kind: str = "single", **kw) -> Request:
    return Request(job_id, owner, kind, pool, "gpu", (Instance(gpus, 1.0, 1024),), order=job_id, **kw)


def run_on(job_id: int, node_name: str, pool: str, devices=(0,), lent_by: str = "", owner: str = "u1",
           priority: int = 100, started: float = 0.0, preemptible: bool = False) -> Running:
    return Running(job_id, owner, "single", pool, "gpu", priority, preemptible, started,
                   (Allocation(node_name, "gpu", tuple(devices), 1.0, 1024),), lent_by=lent_by)


NODES = [node("na", "A"), node("nb", "B")]
COHORT = {"A": "c1", "B": "c1"}


def held(*runs: Running):
    return [a for r in runs for a in r.placement]


def test_a_job_that_does_not_fit_its_vc_borrows_an_idle_device_of_its_cohort():
    a1 = run_on(1, "na", "A")
    res = cycle(NODES, held(a1), [req(2, "A")], running=[a1], vc=VCRules(cohorts=COHORT))
    assert [(x.job_id, x.lent_by, x.placement[0].node) for x in res.admitted] == [(2, "B", "nb")]
    assert res.pending == [] and 2 not in res.positions


def test_no_cohort_no_lending():
    a1 = run_on(1, "na", "A")
    for rules in (VCRules(), VCRules(cohorts={"A": "c1"}), VCRules(cohorts={"A": "c1", "B": "c2"}),
                  VCRules(cohorts={"A": "", "B": ""})):
        res = cycle(NODES, held(a1), [req(2, "A")], running=[a1], vc=rules)
        assert res.admitted == [] and [p.job_id for p in res.pending] == [2]


def test_a_vc_that_opts_out_lends_nothing_but_may_still_borrow():
    a1 = run_on(1, "na", "A")
    res = cycle(NODES, held(a1), [req(2, "A")], running=[a1], vc=VCRules(cohorts=COHORT, no_lend={"B"}))
    assert res.admitted == []
    b1 = run_on(3, "nb", "B")
    res = cycle(NODES, held(b1), [req(4, "B")], running=[b1], vc=VCRules(cohorts=COHORT, no_lend={"B"}))
    assert [(x.job_id, x.lent_by) for x in res.admitted] == [(4, "A")]


def test_a_draining_vc_lends_nothing():
    a1 = run_on(1, "na", "A")
    res = cycle(NODES, held(a1), [req(2, "A")], running=[a1], vc=VCRules(cohorts=COHORT, draining={"B"}))
    assert res.admitted == []


def test_the_owners_job_reclaims_lent_devices_whatever_the_borrowers_priority():
    a1 = run_on(1, "na", "A")
    a2 = run_on(2, "nb", "A", lent_by="B", priority=1000)  # not preemptible as a job: borrowed all the same
    res = cycle(NODES, held(a1, a2), [req(3, "B", owner="u2", preemptible=True)], running=[a1, a2],
                vc=VCRules(cohorts=COHORT))
    assert res.preempted == [2]
    assert [(x.job_id, x.lent_by, x.placement[0].node, x.preempts) for x in res.admitted] == [(3, "", "nb", (2,))]


def test_reclaim_takes_the_most_recent_borrower_and_only_as_many_as_needed():
    nodes = [node("na", "A", gpus=1), node("nb", "B", gpus=2)]
    a1 = run_on(1, "na", "A")
    old = run_on(2, "nb", "A", devices=(0,), lent_by="B", started=10.0)
    new = run_on(3, "nb", "A", devices=(1,), lent_by="B", started=20.0)
    res = cycle(nodes, held(a1, old, new), [req(4, "B")], running=[a1, old, new], vc=VCRules(cohorts=COHORT))
    assert res.preempted == [3] and [x.job_id for x in res.admitted] == [4]


def test_own_preemptible_jobs_are_not_reclaimed_as_lent():
    a0 = run_on(9, "na", "A")
    b1 = run_on(1, "nb", "B", preemptible=True, priority=500)
    res = cycle(NODES, held(a0, b1), [req(2, "B")], running=[a0, b1], vc=VCRules(cohorts=COHORT))
    assert res.preempted == [] and res.admitted == []  # higher priority, own VC: ordinary preemption rules


def test_a_vc_with_its_own_job_waiting_for_capacity_does_not_lend_that_type():
    a1 = run_on(1, "na", "A")
    nodes = [node("na", "A", gpus=1), node("nb", "B", gpus=2)]
    b1 = run_on(2, "nb", "B", devices=(0,))
    res = cycle(nodes, held(a1, b1), [req(3, "A"), req(4, "B", gpus=2)], running=[a1, b1],
                vc=VCRules(cohorts=COHORT))
    assert res.admitted == []
    assert {p.job_id for p in res.pending} == {3, 4}


def test_per_user_caps_of_the_borrowing_vc_count_borrowed_devices():
    a1 = run_on(1, "na", "A")
    rules = VCRules(caps={("A", "gpu"): 1}, held={("u1", "A", "gpu"): 1}, cohorts=COHORT)
    res = cycle(NODES, held(a1), [req(2, "A")], running=[a1], vc=rules)
    assert res.admitted == [] and "cap of 1 gpu in VC A" in res.pending[0].reason
    # another user of A is under the cap: borrows; then a third job of that user is held by the cap
    rules = VCRules(caps={("A", "gpu"): 1}, held={("u1", "A", "gpu"): 1}, cohorts=COHORT)
    three = [node("na", "A"), node("nb", "B", gpus=2)]
    res = cycle(three, held(a1), [req(2, "A", owner="u2"), req(3, "A", owner="u2")], running=[a1], vc=rules)
    assert [(x.job_id, x.lent_by) for x in res.admitted] == [(2, "B")]
    assert [(p.job_id, p.reason.startswith("cap of 1 gpu in VC A")) for p in res.pending] == [(3, True)]


def test_workspaces_never_borrow():
    a1 = run_on(1, "na", "A")
    res = cycle(NODES, held(a1), [req(2, "A", kind="workspace")], running=[a1], vc=VCRules(cohorts=COHORT))
    assert res.admitted == []


def test_jobs_behind_a_blocked_head_borrow_in_order_while_devices_are_left():
    nodes = [node("na", "A", gpus=1), node("nb", "B", gpus=2)]
    a1 = run_on(1, "na", "A")
    res = cycle(nodes, held(a1), [req(2, "A"), req(3, "A"), req(4, "A")], running=[a1],
                vc=VCRules(cohorts=COHORT))
    assert [(x.job_id, x.lent_by) for x in res.admitted] == [(2, "B"), (3, "B")]
    assert [p.job_id for p in res.pending] == [4]


def test_a_job_that_cannot_borrow_does_not_stop_the_next():
    # A's head needs 2 devices; B has 1 idle: the 1-device job behind the head borrows it (out of line: it runs
    # on B's machine, never on what the head waits for in A)
    nodes = [node("na", "A", gpus=2), node("nb", "B", gpus=1)]
    a1 = run_on(1, "na", "A")
    res = cycle(nodes, held(a1), [req(2, "A", gpus=2), req(3, "A")], running=[a1], vc=VCRules(cohorts=COHORT))
    assert [(x.job_id, x.lent_by) for x in res.admitted] == [(3, "B")]
    assert [p.job_id for p in res.pending] == [2]


def test_the_owner_first_then_lending():
    # both VCs have a job waiting; B's own job takes B's idle device, A's job does not get it
    a1 = run_on(1, "na", "A")
    res = cycle(NODES, held(a1), [req(2, "A"), req(3, "B")], running=[a1], vc=VCRules(cohorts=COHORT))
    assert [(x.job_id, x.lent_by) for x in res.admitted] == [(3, "")]


def test_reclaim_takes_the_smallest_borrower_that_makes_room_and_only_on_the_machine_used():
    nodes = [node("na", "A", gpus=1), node("nb1", "B", gpus=4), node("nb2", "B", gpus=2)]
    a1 = run_on(1, "na", "A")
    big = run_on(2, "nb1", "A", devices=(0, 1, 2, 3), lent_by="B", started=30.0)
    small = run_on(3, "nb2", "A", devices=(0,), lent_by="B", started=10.0)
    other = run_on(4, "nb2", "A", devices=(1,), lent_by="B", started=5.0)
    runs = [a1, big, small, other]
    res = cycle(nodes, held(*runs), [req(5, "B")], running=runs, vc=VCRules(cohorts=COHORT))
    assert res.preempted == [3]  # not the more recent 4-device job
    # a 2-device job: the two one-device borrowers on nb2, not the 4-device one on nb1 too
    res = cycle(nodes, held(*runs), [req(6, "B", gpus=2)], running=runs, vc=VCRules(cohorts=COHORT))
    assert sorted(res.preempted) == [3, 4] and res.admitted[0].placement[0].node == "nb2"
