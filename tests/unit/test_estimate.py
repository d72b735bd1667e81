"""Q6 start estimates: a pure sweep over running ends and queued jobs, table-driven."""

import pytest

from ti_hub.scheduler.estimate import (Holding, estimate_starts, expected_duration, typical_durations)
from ti_hub.scheduler.model import Instance, Request

NOW = 1000.0


def req(job_id, devices=1, kind="single", dtype="A100", instances=1, owner="u", cpu=1.0):
    return Request(job_id, owner, kind, "p", dtype, tuple(Instance(devices, cpu, 1) for _ in range(instances)))


def run(total, holding, queues, durations):
    return estimate_starts(total, holding, queues, lambda r: durations.get(r.job_id), NOW)


CASES = [
    # free devices now: starts now
    ("free now", {("p", "A100"): 4}, [], {("p", "A100", "single"): [req(1, 2)]}, {}, {1: NOW}),
    # waits for the earliest end that frees enough
    ("next end", {("p", "A100"): 4}, [Holding("p", "A100", 2, NOW + 50), Holding("p", "A100", 2, NOW + 80)],
     {("p", "A100", "single"): [req(1, 2), req(2, 2)]}, {1: 100.0}, {1: NOW + 50, 2: NOW + 80}),
    # a queued job's own duration frees its devices for the one behind it
    ("chain", {("p", "A100"): 2}, [Holding("p", "A100", 2, NOW + 10)],
     {("p", "A100", "single"): [req(1, 2), req(2, 2)]}, {1: 30.0}, {1: NOW + 10, 2: NOW + 40}),
    # unknown end (no duration, no history): that job and those behind it cannot be told
    ("unknown", {("p", "A100"): 2}, [Holding("p", "A100", 2, None)],
     {("p", "A100", "single"): [req(1, 1), req(2, 1)]}, {}, {1: None, 2: None}),
    # bigger than the pool: never; it blocks nothing (issue 17: the cycle takes it out of line)
    ("never", {("p", "A100"): 2}, [], {("p", "A100", "single"): [req(1, 4), req(2, 1)]}, {}, {1: None, 2: NOW}),
    # other kinds of the same type are other queues: the workspace is not behind the blocked single job
    ("queues interleave", {("p", "A100"): 2}, [Holding("p", "A100", 1, NOW + 20)],
     {("p", "A100", "single"): [req(1, 2)], ("p", "A100", "workspace"): [req(2, 1, kind="workspace")]},
     {}, {1: NOW + 20, 2: None}),
    # CPU-only jobs count cores
    ("cpu cores", {("p", "cpu"): 8.0}, [Holding("p", "cpu", 6.0, NOW + 5)],
     {("p", "cpu", "single"): [req(1, 0, dtype="cpu", cpu=4.0)]}, {}, {1: NOW + 5}),
    # a gang counts all its instances
    ("gang", {("p", "A100"): 8}, [Holding("p", "A100", 4, NOW + 7)],
     {("p", "A100", "distributed"): [req(1, 2, kind="distributed", instances=4)]}, {}, {1: NOW + 7}),
    # overdue running work counts as ending now
    ("overdue", {("p", "A100"): 1}, [Holding("p", "A100", 1, NOW - 99)],
     {("p", "A100", "single"): [req(1, 1)]}, {}, {1: NOW}),
]


@pytest.mark.parametrize("name,total,holding,queues,durations,want", CASES, ids=[c[0] for c in CASES])
def test_estimates(name, total, holding, queues, durations, want):
    assert run(total, holding, queues, durations) == want


def test_typical_durations_are_medians_per_owner_kind_type_with_an_owner_fallback():
    t = typical_durations([("a", "single", "A100", 10.0), ("a", "single", "A100", 30.0),
                           ("a", "single", "A100", 20.0), ("a", "distributed", "T4", 500.0), ("b", "single", "A100", 0)])
    assert t[("a", "single", "A100")] == 20.0 and t[("a",)] == 30.0 and ("b",) not in t
    assert expected_duration(None, "a", "single", "A100", t) == 20.0
    assert expected_duration(None, "a", "distributed", "A100", t) == 30.0  # the owner's median of anything
    assert expected_duration(45, "a", "single", "A100", t) == 45.0  # declared wins
    assert expected_duration(None, "c", "single", "A100", t) is None


def test_a_workspace_has_no_expected_end_from_its_owners_job_history():
    # issue 17, item 19: a workspace borrowed its owner's median job run time, so jobs waiting for its cores
    # got an estimate that slid into the past
    typical = {("ann",): 50.0, ("ann", "workspace", "cpu"): 50.0}
    assert expected_duration(None, "ann", "workspace", "cpu", typical) is None
    assert expected_duration(3600, "ann", "workspace", "cpu", typical) == 3600.0
    assert expected_duration(None, "ann", "single", "cpu", typical) == 50.0
