"""The simulator with virtual clusters (issue 18, lending): the split of a trace, and borrowing and reclaim in a
replay."""

from __future__ import annotations

from ti_hub.backends.base import NodeCapacity
from ti_hub.scheduler.model import Instance
from ti_hub.sim import vcs
from ti_hub.sim.engine import Settings, simulate
from ti_hub.sim.policies import POLICIES
from ti_hub.sim.trace import TraceJob


def tj(job_id: int, submit: float, user: str, duration: float = 100.0) -> TraceJob:
    return TraceJob(job_id, submit, duration, user, "single", "default", "gpu", (Instance(1, 1.0, 1024),))


NODES = [NodeCapacity("n0", "default", {"gpu": [0]}, 8.0, 8192), NodeCapacity("n1", "default", {"gpu": [0]}, 8.0, 8192)]
# user0 -> vc0, user1 -> vc1: vc0 has two jobs at once, vc1's job comes at t=50
JOBS = [tj(1, 0.0, "user0"), tj(2, 0.0, "user0"), tj(3, 50.0, "user1")]


def test_split_gives_each_vc_machines_and_each_users_jobs_one_vc():
    nodes, jobs = vcs.split(NODES, JOBS, 2)
    assert sorted(n.pool for n in nodes) == ["vc0", "vc1"]
    assert [j.pool for j in jobs] == ["vc0", "vc0", "vc1"]
    assert vcs.split(NODES, JOBS, 1) == (NODES, JOBS)


def replay(cohort: bool):
    nodes, jobs = vcs.split(NODES, JOBS, 2)
    res = simulate(nodes, jobs, POLICIES["fifo"], Settings(vc=vcs.rules(2, cohort=cohort)))
    return res, {r.job.job_id: r for r in res.records}


def test_without_lending_the_second_job_waits_for_its_own_vc():
    res, rec = replay(cohort=False)
    assert rec[2].first_start == 100.0 and rec[2].borrowed == 0 and res.preemptions == 0
    assert rec[3].first_start == 50.0


def test_with_lending_it_borrows_and_is_reclaimed_keeping_its_age():
    res, rec = replay(cohort=True)
    assert rec[2].first_start == 0.0 and rec[2].borrowed == 1  # on vc1's idle device at once
    assert rec[3].first_start == 50.0 and rec[3].waited_s == 0.0  # vc1's own job takes it back at once
    assert rec[2].preemptions == 1 and res.preemptions == 1
    assert rec[2].end == 200.0  # requeued at 50, vc0's device is free at 100, it runs again in full


def test_the_cli_splits_into_vcs_and_lends(tmp_path, capsys):
    import json

    from ti_hub.sim.cli import main
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("submit_s,duration_s,user,device_type,devices\n0,100,user0,gpu,1\n0,100,user0,gpu,1\n"
                    "50,100,user1,gpu,1\n")
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("name,pool,device_type,devices,cpu,memory_mib\nn0,default,gpu,1,8,8192\n"
                     "n1,default,gpu,1,8,8192\n")
    out = {}
    for lending in (False, True):
        args = [str(jobs), "--nodes", str(nodes), "--policies", "fifo", "--vcs", "2", "--json", "--quiet"]
        assert main(args + (["--lending"] if lending else [])) == 0
        out[lending] = json.loads(capsys.readouterr().out)
    assert out[True]["settings"]["lending"] and not out[False]["settings"]["lending"]
    assert out[False]["policies"][0]["preemptions"] == 0 and out[True]["policies"][0]["preemptions"] == 1
    assert out[True]["policies"][0]["delay_s"]["mean"] < out[False]["policies"][0]["delay_s"]["mean"]
    assert main([str(jobs), "--nodes", str(nodes), "--vcs", "0", "--quiet"]) == 2
