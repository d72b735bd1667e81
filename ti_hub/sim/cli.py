"""``ti-hub simulate``: arguments, loading, one replay per policy, the report. The I/O shell of the package."""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from ..backends.base import NodeCapacity
from . import alibaba, metrics, policies, report, trace, vcs
from .engine import Settings, simulate
from .trace import TraceError, TraceJob

DESCRIPTION = """Replay a job trace on a virtual clock through TiHub's scheduler core (the same cycle, usage
scores and placement as the ti service) under several policies, and report queueing delay, job completion
time, device utilization, per-user shares of device-hours against demand and Jain's fairness index."""

EPILOG = """trace formats (detected from the header; see docs/simulator.md):
  native   submit_s,duration_s,user,device_type,devices[,instances,cpu,memory_mib,kind,pool,priority,
           preemptible,job_id], with --nodes FILE: name,pool,device_type,devices,cpu,memory_mib
  alibaba  an openb_pod_list_*.csv of the Alibaba GPU 2023 trace; nodes from the
           openb_node_list_all_node.csv beside it (or --nodes); users drawn by a seeded Zipf law

policies: fifo (submission order), no-score (Q2 order without usage scores), fair (Q2 with usage scores),
  fair+backfill (fair + backfill with the real run times as declared durations)

examples:
  ti-hub simulate ../shared/data/alibaba-gpu-2023/openb_pod_list_default.csv --out sim-out
  ti-hub simulate jobs.csv --nodes nodes.csv --policies fifo,fair --json"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", help="the job trace (CSV): native or an Alibaba GPU 2023 pod list")
    p.add_argument("--format", choices=("auto", "native", "alibaba"), default="auto",
                   help="trace format (default: from the header)")
    p.add_argument("--nodes", default="", help="node list: native CSV or the Alibaba node list "
                   "(default for an Alibaba trace: openb_node_list_all_node.csv beside it)")
    p.add_argument("--policies", default="all",
                   help=f"comma list of {', '.join(policies.POLICIES)} or all (default: %(default)s)")
    p.add_argument("--out", default="", help="write summary.json/.csv and per-policy jobs, users and score "
                   "timelines (CSV) here")
    p.add_argument("--json", action="store_true", help="print the summary as JSON instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    g = p.add_argument_group("scheduling")
    g.add_argument("--settling-hours", type=float, default=6.0,
                   help="usage-score settling time T (Q3; default %(default)s h)")
    g.add_argument("--period", type=float, default=0.0, help="also run a cycle every PERIOD virtual seconds "
                   "while jobs wait (default 0: only at arrivals and completions)")
    g.add_argument("--horizon", type=float, default=None, help="measure shares and utilization up to this "
                   "many seconds after the first submission (default: the last submission)")
    g.add_argument("--score-sample", type=float, default=None,
                   help="seconds between score-timeline samples (default: the trace's span / 200)")
    g.add_argument("--vcs", type=int, default=1, help="split machines and users into N virtual clusters "
                   "(machines in turn, largest first; user<k> to VC k mod N; default %(default)s: one pool)")
    g.add_argument("--lending", action="store_true", help="with --vcs: all VCs in one cohort, lending each "
                   "other idle devices (borrowed jobs are reclaimed when the lender's jobs need them)")
    g = p.add_argument_group("load (what-if knobs; both default to the trace as recorded)")
    g.add_argument("--arrival-speedup", type=float, default=1.0,
                   help="divide the time between submissions by this (durations unchanged)")
    g.add_argument("--node-fraction", type=float, default=1.0,
                   help="keep this fraction of the nodes, drawn with --seed (file order kept)")
    g = p.add_argument_group("Alibaba trace mapping")
    g.add_argument("--users", type=int, default=alibaba.DEFAULT_USERS, help="users to assign pods to "
                   "(default %(default)s)")
    g.add_argument("--user-skew", type=float, default=alibaba.DEFAULT_SKEW,
                   help="Zipf exponent of the user draw: P(user k) ~ 1/(k+1)^skew (default %(default)s)")
    g.add_argument("--seed", type=int, default=alibaba.DEFAULT_SEED, help="seed of every draw (default %(default)s)")
    g.add_argument("--gpu-types", choices=("any", "model"), default="any",
                   help="any: every GPU model is one device type 'gpu' (the default pod list names no model); "
                        "model: the node's model, pods drawn among their gpu_spec models (default %(default)s)")
    g.add_argument("--skip-unscheduled", action="store_true",
                   help="drop pods never scheduled in the original cluster (no scheduled_time)")


def _positive(name: str, v: float | None, allow_zero: bool = False) -> None:
    if v is not None and (v < 0 or (v == 0 and not allow_zero)):
        raise ValueError(f"--{name} must be {'>= 0' if allow_zero else '> 0'}")


def load(a: argparse.Namespace) -> tuple[list[NodeCapacity], list[TraceJob], str]:
    header = trace.header_of(a.trace)
    fmt = a.format
    if fmt == "auto":
        fmt = "alibaba" if alibaba.is_pod_list(header) else "native"
    if fmt == "alibaba":
        node_path = a.nodes or str(alibaba.default_node_list(a.trace))
        if not Path(node_path).exists():
            raise ValueError(f"no node list: {node_path} does not exist (give --nodes)")
        nodes = (alibaba.read_nodes(node_path, a.gpu_types) if alibaba.is_node_list(trace.header_of(node_path))
                 else trace.read_nodes(node_path))
        nodes = _sample(nodes, a.node_fraction, a.seed)
        jobs = alibaba.read_pods(a.trace, nodes, users=a.users, skew=a.user_skew, seed=a.seed,
                                 skip_unscheduled=a.skip_unscheduled)
    else:
        if not a.nodes:
            raise ValueError("a native trace needs --nodes FILE")
        nodes = (alibaba.read_nodes(a.nodes, a.gpu_types) if alibaba.is_node_list(trace.header_of(a.nodes))
                 else trace.read_nodes(a.nodes))
        nodes = _sample(nodes, a.node_fraction, a.seed)
        jobs = trace.read_jobs(a.trace)
    if a.arrival_speedup != 1.0 and jobs:
        t0 = jobs[0].submit_s
        jobs = [TraceJob(j.job_id, t0 + (j.submit_s - t0) / a.arrival_speedup, j.duration_s, j.user, j.kind,
                         j.pool, j.device_type, j.instances, j.priority, j.preemptible) for j in jobs]
    return nodes, jobs, fmt


def _sample(nodes: list[NodeCapacity], fraction: float, seed: int) -> list[NodeCapacity]:
    if fraction >= 1.0:
        return nodes
    keep = set(random.Random(seed).sample(range(len(nodes)), max(1, round(fraction * len(nodes)))))
    return [n for i, n in enumerate(nodes) if i in keep]


def run(a: argparse.Namespace) -> int:
    say = (lambda msg: None) if a.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    try:
        chosen = policies.parse(a.policies)
        _positive("settling-hours", a.settling_hours)
        _positive("period", a.period, allow_zero=True)
        _positive("horizon", a.horizon)
        _positive("score-sample", a.score_sample)
        _positive("arrival-speedup", a.arrival_speedup)
        if not 0 < a.node_fraction <= 1:
            raise ValueError("--node-fraction must be in (0, 1]")
        if a.users < 1:
            raise ValueError("--users must be >= 1")
        if a.vcs < 1:
            raise ValueError("--vcs must be >= 1")
        t = time.perf_counter()
        nodes, jobs, fmt = load(a)
    except (TraceError, ValueError, OSError) as e:
        print(f"ti-hub simulate: error: {e}", file=sys.stderr)
        return 2
    if not jobs:
        print(f"ti-hub simulate: error: {a.trace}: no jobs", file=sys.stderr)
        return 2
    say(f"loaded {len(jobs):,} jobs and {len(nodes):,} nodes ({fmt}) in {time.perf_counter() - t:.1f} s")
    nodes, jobs = vcs.split(nodes, jobs, a.vcs)
    t0 = jobs[0].submit_s
    settings = Settings(settling_s=a.settling_hours * 3600, period_s=a.period,
                        horizon_s=t0 + a.horizon if a.horizon is not None else None, sample_s=a.score_sample,
                        progress=say, clock=time.monotonic,
                        vc=vcs.rules(a.vcs, cohort=a.lending) if a.vcs > 1 else None)
    runs = []
    for pol in chosen:
        t = time.perf_counter()
        res = simulate(nodes, jobs, pol, settings)
        wall = time.perf_counter() - t
        rows = metrics.users(res)
        summ = metrics.summary(res, rows)
        summ["runtime_s"] = wall
        runs.append((res, rows, summ))
        say(f"{pol.name}: {summ['completed']:,} jobs done, {res.cycles:,} cycles in {wall:.1f} s")
    meta = {"trace": str(a.trace), "format": fmt, "nodes": len(nodes), "jobs": len(jobs),
            "devices": runs[0][0].devices_total, "settling_hours": a.settling_hours, "period_s": a.period,
            "arrival_speedup": a.arrival_speedup, "node_fraction": a.node_fraction, "vcs": a.vcs,
            "lending": a.lending and a.vcs > 1,
            "policies": [p.name for p in chosen]}
    if fmt == "alibaba":
        meta.update(users=a.users, user_skew=a.user_skew, seed=a.seed, gpu_types=a.gpu_types,
                    skip_unscheduled=a.skip_unscheduled)
    summaries = [s for _, _, s in runs]
    if a.out:
        try:
            written = report.write_out(Path(a.out), meta, runs)
        except OSError as e:
            print(f"ti-hub simulate: error: cannot write {a.out}: {e}", file=sys.stderr)
            return 1
        say(f"wrote {len(written)} files under {a.out}")
    if a.json:
        print(report.to_json(meta, summaries))
    else:
        print(report.table(summaries))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="ti-hub simulate", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(p)
    return run(p.parse_args(argv))
