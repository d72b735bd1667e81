"""The fair queue's cycle, rule by rule (SPEC Q1, Q2, Q4, Q8, JOB8; issue 3)."""

from __future__ import annotations

import pytest

from ti_hub.backends.base import NodeCapacity
from ti_hub.scheduler.core import cycle
from ti_hub.scheduler.model import Allocation, Instance, Request, Running, Usage
from ti_hub.scheduler.score import Scores


def node(name: str, gpus: int = 8, dtype: str = "a100", pool: str = "p1", cpu: float = 64.0) -> NodeCapacity:
    return NodeCapacity(name, pool, {dtype: list(range(gpus))} if gpus else {}, cpu, 512 * 1024)


def req(job_id: int, owner: str = "u1", gpus: int = 1, n: int = 1, kind: str = "single", dtype: str = "a100",
        pool: str = "p1", **kw) -> Request:
    return Request(job_id, owner, kind, pool, dtype, tuple(Instance(gpus, 1.0, 1024) for _ in range(n)),
                   order=kw.pop("order", job_id), **kw)


def running(job_id: int, node_name: str, devices: tuple[int, ...], owner: str = "r", priority: int = 100,
            preemptible: bool = True, started: float = 0.0, kind: str = "single", ends_at: float | None = None,
            dtype: str = "a100") -> Running:
    alloc = Allocation(node_name, dtype, devices, 1.0, 1024)
    return Running(job_id, owner, kind, "p1", dtype, priority, preemptible, started, (alloc,), ends_at)


def admitted(res) -> list[int]:
    return [a.job_id for a in res.admitted]


def order_of(requests, scores=None) -> list[int]:
    """The queue order, read from positions (a cluster with no free device admits nothing)."""
    res = cycle([node("n1", gpus=0)], [], requests, scores=scores)
    return [j for j, _ in sorted(res.positions.items(), key=lambda kv: kv[1].position)]


ORDER_CASES = [
    # (name, requests, scores, expected order)
    ("creation order by default", [req(3), req(1), req(2)], None, [1, 2, 3]),
    ("priority beats creation", [req(1), req(2, priority=500)], None, [2, 1]),
    ("a pin beats priority", [req(1, priority=1000), req(2, pinned_at=10.0)], None, [2, 1]),
    ("a later pin goes first", [req(1, pinned_at=10.0), req(2, pinned_at=20.0), req(3)], None, [2, 1, 3]),
    ("lower usage score first", [req(1, owner="heavy"), req(2, owner="light")],
     Scores({("heavy", "a100"): 7.5, ("light", "a100"): 0.5}), [2, 1]),
    ("priority beats the score", [req(1, owner="light"), req(2, owner="heavy", priority=200)],
     Scores({("heavy", "a100"): 7.5}), [2, 1]),
    ("the score counts for the queue's device type only", [req(1, owner="a"), req(2, owner="b")],
     Scores({("a", "v100"): 9.0}), [1, 2]),
    ("the owner's own order beats creation", [req(1, user_rank=2.0), req(2, user_rank=1.0)], None, [2, 1]),
]


@pytest.mark.parametrize("name,requests,scores,expected", ORDER_CASES, ids=[c[0] for c in ORDER_CASES])
def test_order_inside_a_queue(name, requests, scores, expected):
    assert order_of(requests, scores) == expected


def test_device_types_and_kinds_never_block_each_other():
    nodes = [node("n1", gpus=4), node("v1", gpus=2, dtype="v100")]
    res = cycle(nodes, [], [req(1, gpus=8), req(2, gpus=1, dtype="v100"), req(3, gpus=2, kind="workspace"),
                            req(4, gpus=2, kind="distributed", n=1)])
    assert sorted(admitted(res)) == [2, 3, 4]
    assert {p.job_id for p in res.pending} == {1}


def test_head_of_line_blocks_its_own_queue():
    held = [Allocation("n1", "a100", (0, 1), 1.0, 1024)]
    res = cycle([node("n1", gpus=4)], held, [req(1, gpus=4), req(2, gpus=1), req(3, gpus=1)])
    assert admitted(res) == []
    reasons = {p.job_id: p.reason for p in res.pending}
    assert reasons[1] == "waiting for 1 x 4 x a100 in pool p1: 2 a100 free"
    assert reasons[2].startswith("behind job 1 in queue p1/a100/single (1 job ahead)")
    assert res.positions[3].position == 3 and res.positions[3].ahead == 2


def test_gang_is_all_or_nothing_and_spans_nodes():
    nodes = [node("n1", gpus=4), node("n2", gpus=4)]
    held = [Allocation("n2", "a100", (0, 1), 1.0, 1024)]
    big = req(1, gpus=4, n=2, kind="distributed")
    res = cycle(nodes, held, [big, req(2, gpus=2, kind="single")])
    assert admitted(res) == [2]  # the gang took nothing: the single job still found room
    assert "waiting for 2 x 4 x a100 in pool p1" in res.pending[0].reason
    res = cycle(nodes, [], [big])
    (adm,) = res.admitted
    assert sorted(a.node for a in adm.placement) == ["n1", "n2"]
    assert all(len(a.devices) == 4 for a in adm.placement)


def test_best_fit_keeps_whole_machines_free():
    nodes = [node("empty", gpus=8), node("half", gpus=8)]
    held = [Allocation("half", "a100", (0, 1, 2, 3, 4, 5), 1.0, 1024)]
    (adm,) = cycle(nodes, held, [req(1, gpus=2)]).admitted
    assert adm.placement[0].node == "half" and adm.placement[0].devices == (6, 7)


def test_preemption_lowest_priority_then_most_recent_and_only_as_needed():
    nodes = [node("n1", gpus=4)]
    victims = [running(10, "n1", (0,), priority=50, started=1.0), running(11, "n1", (1,), priority=50, started=5.0),
               running(12, "n1", (2, 3), priority=20, started=0.0)]
    held = [a for v in victims for a in v.placement]
    res = cycle(nodes, held, [req(1, gpus=3)], running=victims)
    (adm,) = res.admitted
    assert adm.preempts == (12, 11) and res.preempted == [12, 11]  # priority 20 first, then the later start
    assert sorted(d for a in adm.placement for d in a.devices) == [1, 2, 3]


@pytest.mark.parametrize("case", ["preemptible head", "workspace victim", "higher-priority victim",
                                  "non-preemptible victim", "would not fit anyway"])
def test_when_preemption_does_not_happen(case):
    nodes = [node("n1", gpus=2)]
    victim = running(10, "n1", (0, 1), priority=50,
                     kind="workspace" if case == "workspace victim" else "single",
                     preemptible=case != "non-preemptible victim")
    if case == "higher-priority victim":
        victim = running(10, "n1", (0, 1), priority=900)
    head = req(1, gpus=4 if case == "would not fit anyway" else 2, preemptible=case == "preemptible head")
    res = cycle(nodes, list(victim.placement), [head], running=[victim])
    assert res.admitted == [] and res.preempted == []


def test_quota_waits_without_blocking_the_queue():
    limits = {("alice", "single", "a100"): Usage(devices=2, cpu=100, memory_mib=10**7)}
    usage = {("alice", "single", "a100"): Usage(devices=2, cpu=2, memory_mib=2048)}
    res = cycle([node("n1")], [], [req(1, owner="alice"), req(2, owner="bob")], limits=limits, usage=usage)
    assert admitted(res) == [2]
    assert res.pending[0].reason == "quota: single-node a100 devices 2/2, this job needs 1"


def test_quota_counts_what_this_cycle_admits():
    limits = {("alice", "single", "a100"): Usage(devices=3, cpu=100, memory_mib=10**7)}
    res = cycle([node("n1")], [], [req(i, owner="alice", gpus=2) for i in (1, 2)], limits=limits)
    assert admitted(res) == [1] and res.pending[0].reason.startswith("quota: single-node a100 devices 2/3")


def test_backfill_is_opt_in_and_respects_the_heads_reserved_start():
    nodes = [node("n1", gpus=4)]
    busy = running(10, "n1", (0, 1, 2), ends_at=1000.0, preemptible=False)
    args = dict(running=[busy], now=100.0)
    queue = [req(1, gpus=4), req(2, gpus=1, duration_s=600), req(3, gpus=1, duration_s=5000)]
    assert admitted(cycle(nodes, busy.placement, queue, **args)) == []
    res = cycle(nodes, busy.placement, queue, backfill=True, **args)
    assert [(a.job_id, a.backfilled) for a in res.admitted] == [(2, True)]  # ends at 700 <= 1000; 3 would not
    unknown = running(10, "n1", (0, 1, 2), ends_at=None, preemptible=False)  # a running job without a declared duration
    assert admitted(cycle(nodes, unknown.placement, queue, backfill=True, running=[unknown], now=100.0)) == []


def test_nothing_is_ever_over_committed():
    import random

    rnd = random.Random(7)
    nodes = [node(f"n{i}", gpus=rnd.choice([2, 4, 8]), cpu=16) for i in range(20)]
    reqs = [req(i, owner=f"u{i % 9}", gpus=rnd.choice([0, 1, 2, 4, 8]), n=rnd.choice([1, 1, 2, 3]),
                kind=rnd.choice(["single", "distributed", "workspace"])) for i in range(1, 400)]
    res = cycle(nodes, [], reqs)
    used: dict[tuple[str, int], int] = {}
    cpu: dict[str, float] = {}
    for adm in res.admitted:
        for a in adm.placement:
            cpu[a.node] = cpu.get(a.node, 0) + a.cpu
            for d in a.devices:
                used[(a.node, d)] = used.get((a.node, d), 0) + 1
    assert res.admitted and all(v == 1 for v in used.values())
    caps = {n.name: n for n in nodes}
    assert all(d in caps[n].devices["a100"] for n, d in used)
    assert all(c <= caps[n].cpu + 1e-9 for n, c in cpu.items())
    assert len(res.admitted) + len(res.pending) == len(reqs)


# -- a capacity kept across cycles (cycle(capacity=...), the simulator's way) -----------------------------

def _free_state(cap):
    return {name: ({t: list(d) for t, d in fn.devices.items() if d}, round(fn.cpu, 6), fn.memory_mib)
            for name, fn in cap.free.items()}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_kept_capacity_decides_like_a_fresh_one_and_ends_with_the_result_applied(seed):
    import random

    from ti_hub.scheduler.capacity import Capacity

    rnd = random.Random(seed)
    nodes = [node(f"n{i}", gpus=rnd.choice([2, 4, 8]), cpu=16) for i in range(8)]
    victims = [running(100 + i, f"n{i}", (0, 1), priority=50, started=float(i)) for i in range(4)]
    held = [a for v in victims for a in v.placement]
    reqs = []
    for i in range(1, 60):
        n = rnd.choice([1, 1, 2])
        reqs.append(req(i, owner=f"u{i % 3}", gpus=rnd.choice([0, 1, 2, 4]), n=n,
                        kind="distributed" if n > 1 else "single", preemptible=rnd.random() < 0.5))
    fresh = cycle(nodes, held, reqs, running=victims)
    cap = Capacity(nodes, held)
    kept = cycle([], [], reqs, running=victims, capacity=cap)  # nodes and held are not read
    assert (kept.admitted, kept.pending, kept.preempted, kept.positions) == \
        (fresh.admitted, fresh.pending, fresh.preempted, fresh.positions)
    still_held = [a for v in victims if v.job_id not in fresh.preempted for a in v.placement]
    admitted = [a for adm in fresh.admitted for a in adm.placement]
    assert _free_state(cap) == _free_state(Capacity(nodes, still_held + admitted))


def test_a_kept_capacity_admits_again_once_the_caller_releases():
    from ti_hub.scheduler.capacity import Capacity

    cap = Capacity([node("n1", gpus=2)], [])
    first = cycle([], [], [req(1, gpus=2), req(2, gpus=2)], capacity=cap)
    assert admitted(first) == [1]
    again = cycle([], [], [req(2, gpus=2)], capacity=cap)  # nothing released: job 1 still holds both
    assert admitted(again) == [] and "0 a100 free" in again.pending[0].reason
    cap.release(first.admitted[0].placement)
    assert admitted(cycle([], [], [req(2, gpus=2)], capacity=cap)) == [2]


def test_a_kept_capacity_tries_failed_shapes_again_next_cycle():
    from ti_hub.scheduler.capacity import Capacity

    cap = Capacity([node("n1", gpus=2)], [Allocation("n1", "a100", (0, 1), 1.0, 1024)])
    assert admitted(cycle([], [], [req(1, gpus=1)], capacity=cap)) == []
    cap.release([Allocation("n1", "a100", (0,), 0.0, 0)])
    cap.failed.add(("p1", "a100", req(1, gpus=1).instances))  # as if a shape failed after the release
    assert admitted(cycle([], [], [req(1, gpus=1)], capacity=cap)) == [1]


# -- issue 17, items 8 and 20: a gang that can never fit blocks nothing ----------------------------------------

def test_a_gang_no_pool_can_hold_at_once_never_blocks_its_queue():
    # 2 x 5 devices on machines of 8: each instance fits a machine, the gang never does
    res = cycle([node("n1", gpus=8)], [], [req(1, gpus=5, n=2, kind="distributed"),
                                           req(2, gpus=1, kind="distributed")])
    assert admitted(res) == [2]
    reasons = {p.job_id: p.reason for p in res.pending}
    assert reasons[1].startswith("can never fit: 2 instances of 5 x a100"), reasons[1]
    assert "at most 1 at once" in reasons[1] and "largest machine has 8 x a100" in reasons[1], reasons[1]
    assert res.unfit == {1: reasons[1]}


def test_nine_one_device_workers_on_four_devices_never_fit():
    res = cycle([node("n1", gpus=2), node("n2", gpus=2)], [], [req(1, n=9, kind="distributed"),
                                                                 req(2, n=4, kind="distributed")])
    assert admitted(res) == [2] and res.unfit[1].startswith("can never fit: 9 instances")


def test_a_gang_that_fits_only_with_a_cordoned_machine_waits_out_of_line():
    nodes = [node("n1", gpus=4), NodeCapacity("n2", "p1", {"a100": [0, 1, 2, 3]}, 64.0, 512 * 1024,
                                               schedulable=False)]
    res = cycle(nodes, [], [req(1, gpus=4, n=2, kind="distributed"), req(2, gpus=1, kind="distributed")])
    assert admitted(res) == [2] and res.unfit == {}
    reason = next(p.reason for p in res.pending if p.job_id == 1)
    assert reason.startswith("waiting out of line until cordoned machines of pool p1 are back:"), reason


def test_unfit_reason_names_the_largest_machine():
    from ti_hub.scheduler.capacity import machine_shapes, unfit

    shapes = machine_shapes([node("n1", gpus=8), node("n2", gpus=4)])
    assert unfit(shapes, "p1", "a100", Instance(5, 1.0, 1024), 2) == (
        "2 instances of 5 x a100, 1 CPU, 1024 MiB each; the machines of pool p1 hold at most 1 at once "
        "(its largest machine has 8 x a100, 64 CPU, 524288 MiB)")
    assert unfit(shapes, "p1", "a100", Instance(4, 1.0, 1024), 2) is None
    assert unfit(shapes, "p1", "a100", Instance(9, 1.0, 1024), 1).startswith("no machine of pool p1 holds 9 x a100")
    assert unfit(shapes, "p2", "a100", Instance(1, 1.0, 1024), 1) == "pool p2 has no machine with a100"
    assert unfit(shapes, "p1", "cpu", Instance(0, 64.0, 1024), 2) is None  # CPU-only: both machines
    assert unfit(shapes, "p1", "cpu", Instance(0, 64.0, 1024), 3).startswith("3 instances of 64 CPU, 1024 MiB")


def test_a_reason_says_only_what_holds_after_the_cycle():
    # issue 17, item 13: "1 admitted ahead this cycle" stayed in the stored reason long after that cycle
    res = cycle([node("n1", gpus=2)], [], [req(1, gpus=1), req(2, gpus=2)])
    assert admitted(res) == [1]
    assert res.pending[0].reason == "waiting for 1 x 2 x a100 in pool p1: 1 a100 free"
