#!/usr/bin/env python
"""Lending idle capacity between virtual clusters (issue 18) on the Alibaba GPU 2023 trace, in-process.

    python benchmarks/bench_lending.py [--vcs 2,4] [--node-fraction 0.05] [--policy fair] [--name lending]

Loads ../shared/data/alibaba-gpu-2023/openb_pod_list_default.csv and its node list with the default mapping
(docs/simulator.md), keeps a seeded ``--node-fraction`` of the nodes (a loaded cluster: at 1.0 the trace
barely queues), splits machines and users into N VCs (ti_hub/sim/vcs.py: machines in turn, largest first;
user<k> to VC k mod N, so the Zipf law's heavy users load some VCs more), and replays it under one policy
twice per N: every VC on its own (no cohort) and all N in one cohort (lending). Also the same machines as
one pool, the bound lending approaches. Reports device utilization, mean/p95 queueing delay, preemptions
(reclaims) and borrowed runs; results to benchmarks/results/<name>.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from ti_hub.sim import alibaba, metrics, policies, vcs  # noqa: E402
from ti_hub.sim.cli import _sample  # noqa: E402
from ti_hub.sim.engine import Settings, simulate  # noqa: E402
from ti_hub.sim.report import _clean  # noqa: E402

TRACE = ROOT.parent / "shared" / "data" / "alibaba-gpu-2023" / "openb_pod_list_default.csv"


def row(label: str, n: int, res, wall: float) -> dict:
    s = metrics.summary(res)
    return {"setup": label, "vcs": n, "utilization": s["utilization_horizon"], "delay_mean_s": s["delay_s"]["mean"],
            "delay_p95_s": s["delay_s"]["p95"], "jct_mean_s": s["jct_s"]["mean"], "completed": s["completed"],
            "rejected": s["rejected"], "unfinished": s["unfinished"], "preemptions": s["preemptions"],
            "borrowed_runs": sum(r.borrowed for r in res.records), "cycles": s["cycles"], "runtime_s": wall}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", default=str(TRACE))
    p.add_argument("--node-fraction", type=float, default=0.05)
    p.add_argument("--vcs", default="2,4", help="comma list of VC counts")
    p.add_argument("--policy", default="fair")
    p.add_argument("--name", default="lending")
    a = p.parse_args(argv)
    from benchplatform import code_version, machine_info

    nodes = alibaba.read_nodes(alibaba.default_node_list(a.trace))
    nodes = _sample(nodes, a.node_fraction, alibaba.DEFAULT_SEED)
    jobs = alibaba.read_pods(a.trace, nodes)
    pol = policies.parse(a.policy)[0]
    horizon = max(j.submit_s for j in jobs)
    rows = []

    def go(label: str, n: int, ns, js, rules) -> None:
        t = time.perf_counter()
        res = simulate(ns, js, pol, Settings(vc=rules, horizon_s=horizon))
        rows.append(row(label, n, res, time.perf_counter() - t))
        r = rows[-1]
        print(f"{label:>12} N={n}: utilization {r['utilization']:.3f}, delay mean {r['delay_mean_s']:.0f} s "
              f"p95 {r['delay_p95_s']:.0f} s, {r['borrowed_runs']} borrowed, {r['preemptions']} preemptions, "
              f"{r['rejected']} rejected ({r['runtime_s']:.1f} s)", file=sys.stderr, flush=True)

    go("one pool", 1, nodes, jobs, None)
    for n in (int(x) for x in a.vcs.split(",")):
        ns, js = vcs.split(nodes, jobs, n)
        go("no lending", n, ns, js, vcs.rules(n, cohort=False))
        go("lending", n, ns, js, vcs.rules(n, cohort=True))
    out = {"code": code_version(), "machine": machine_info(),
           "settings": {"trace": a.trace, "jobs": len(jobs), "nodes": len(nodes), "node_fraction": a.node_fraction,
                        "devices": sum(len(d) for n in nodes for d in n.devices.values()), "policy": pol.name,
                        "seed": alibaba.DEFAULT_SEED, "users": alibaba.DEFAULT_USERS},
           "runs": rows}
    dest = HERE / "results" / f"{a.name}.json"
    dest.write_text(json.dumps(_clean(out), indent=1))
    print(json.dumps(_clean(out["settings"]), indent=1))
    print("results:", dest)


if __name__ == "__main__":
    main()
