#!/usr/bin/env python
"""`ti-hub simulate` on the whole default Alibaba GPU 2023 trace (issue 3 target: <= 60 s), in-process.

    python benchmarks/bench_simulate.py [--runs 3] [--node-fraction 1.0] [--name simulate]

Loads ../shared/data/alibaba-gpu-2023/openb_pod_list_default.csv (8,152 pods) and its node list (1,523 nodes)
with the default mapping (docs/simulator.md), replays it under every policy ``--runs`` times, one after the
other, and reports the median wall time per policy with the replay's own results (the same every run: the
replay is deterministic). ``--node-fraction 0.01`` replays the same pods on a seeded 1% of the nodes: a
loaded cluster, where the policies differ. Results to benchmarks/results/<name>.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from ti_hub.sim import alibaba, metrics, policies  # noqa: E402
from ti_hub.sim.cli import _sample  # noqa: E402
from ti_hub.sim.engine import Settings, simulate  # noqa: E402
from ti_hub.sim.report import _clean  # noqa: E402

TRACE = ROOT.parent / "shared" / "data" / "alibaba-gpu-2023" / "openb_pod_list_default.csv"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--trace", default=str(TRACE))
    p.add_argument("--node-fraction", type=float, default=1.0)
    p.add_argument("--policies", default="all")
    p.add_argument("--name", default="simulate")
    a = p.parse_args(argv)
    from benchplatform import code_version, machine_info

    t = time.perf_counter()
    nodes = alibaba.read_nodes(alibaba.default_node_list(a.trace))
    nodes = _sample(nodes, a.node_fraction, alibaba.DEFAULT_SEED)
    jobs = alibaba.read_pods(a.trace, nodes)
    load_s = time.perf_counter() - t
    out = {"code": code_version(), "machine": machine_info(),
           "settings": {"trace": a.trace, "jobs": len(jobs), "nodes": len(nodes), "node_fraction": a.node_fraction,
                        "runs": a.runs, "load_s": round(load_s, 2)},
           "policies": []}
    for pol in policies.parse(a.policies):
        walls, summ = [], None
        for _ in range(a.runs):
            t = time.perf_counter()
            res = simulate(nodes, jobs, pol, Settings())
            walls.append(time.perf_counter() - t)
            summ = metrics.summary(res)
        summ["runtime_s"] = {"median": round(statistics.median(walls), 2), "runs": [round(w, 2) for w in walls]}
        out["policies"].append(summ)
        print(f"{pol.name}: median {statistics.median(walls):.2f} s over {a.runs} runs "
              f"({summ['cycles']:,} cycles)", file=sys.stderr, flush=True)
    fair = [s for s in out["policies"] if s["policy"] == "fair"]
    if fair:
        out["verdicts"] = {"fair_le_60s": fair[0]["runtime_s"]["median"] <= 60}
    dest = HERE / "results" / f"{a.name}.json"
    dest.write_text(json.dumps(_clean(out), indent=1))
    print(json.dumps(_clean({"settings": out["settings"], "verdicts": out.get("verdicts"),
                             "runtime_s": {s["policy"]: s["runtime_s"]["median"] for s in out["policies"]}}),
                     indent=1))
    print("results:", dest)


if __name__ == "__main__":
    main()
