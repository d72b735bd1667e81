"""Job start on the embedded platform: what the sandbox and the uid switch cost, against an older TiHub, in one run.

    python benchmarks/bench_job_start.py [--base cec0ae8] [--runs 30] [--out results/job-start.json]

Times ``LocalBackend.launch`` of a one-instance job whose command prints a line, from the call until that line is
in the instance's log: directories, the supervisor's start, bubblewrap, (now) dropexec becoming the owner's uid,
the shell. That is the part of a job's start the isolation changed; the scheduler and the API are the same code
on both sides and are left out (their figures are in docs/benchmarks.md).

``--base``: a commit of this repository to compare with (default cec0ae8, the last one before per-user uids and
sandboxes); it is checked out in a temporary git worktree, and both are driven by the same driver in a
subprocess each (its own interpreter and imports), alternating base, current, base, current... so that the
machine's noise falls on both. Reports p50/p95 per side and the ratio of the medians (target: <= 1.2).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from benchplatform import loadavg, machine_info  # noqa: E402

# runs in a subprocess with PYTHONPATH=<the checkout under test>; prints the milliseconds of each launch
DRIVER = r"""
import asyncio, inspect, json, os, sys, time
from ti_hub.backends.base import InstanceSpec, LaunchSpec
from ti_hub.backends.local import LocalBackend

async def main(root, runs):
    b = LocalBackend(root_dir=root, devices={"demo-gpu": 1})
    kw = {"uid": 900999} if "uid" in inspect.signature(LaunchSpec).parameters else {}
    out = []
    for i in range(runs):
        spec = LaunchSpec(i + 1, "bench", f"j{i}", "single", None, "echo started", "", {},
                          (InstanceSpec(0, "worker", 0, "local", (0,), 1.0, 512, {}),), **kw)
        t0 = time.perf_counter()
        state = await b.launch(spec)
        log = state["instances"][0]["log"]
        while True:
            try:
                with open(log, "rb") as f:
                    if b"started" in f.read():
                        break
            except OSError:
                pass
            await asyncio.sleep(0.001)
        out.append((time.perf_counter() - t0) * 1000)
        await b.stop(i + 1, state, grace_seconds=1)
        await b.cleanup(i + 1, state)
    print(json.dumps(out))

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def one_batch(checkout: Path, root: Path, runs: int) -> list[float]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(checkout), "LANG": "C.UTF-8"}
    r = subprocess.run([sys.executable, "-c", DRIVER, str(root), str(runs)], env=env, capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"the driver failed for {checkout}:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="cec0ae8", help="commit to compare with (default %(default)s)")
    ap.add_argument("--runs", type=int, default=30, help="launches per side (default %(default)s)")
    ap.add_argument("--batch", type=int, default=5, help="launches per alternation (default %(default)s)")
    ap.add_argument("--out", default=str(HERE / "results" / "job-start.json"))
    args = ap.parse_args()
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="ti-bench-start-") as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(base), args.base],
                       check=True)
        try:
            times: dict[str, list[float]] = {"base": [], "current": []}
            for i in range(0, args.runs, args.batch):
                n = min(args.batch, args.runs - i)
                for side, checkout in (("base", base), ("current", REPO)):
                    root = Path(tmp) / f"{side}-{i}"
                    times[side] += one_batch(checkout, root, n)
                    print(f"{side:8s} {i + n:3d}/{args.runs}: p50 so far {statistics.median(times[side]):.1f} ms",
                          flush=True)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)], check=False)
    res = {"what": "LocalBackend.launch until the command's first line is in its log", "base": args.base,
           "current": head, "machine": machine_info(), "load_after": loadavg(), "runs": args.runs}
    for side, ms in times.items():
        res[side + "_ms"] = {"n": len(ms), "p50": round(statistics.median(ms), 1), "p95": round(pct(ms, 0.95), 1),
                             "max": round(max(ms), 1), "all": [round(x, 1) for x in ms]}
    res["ratio_p50"] = round(res["current_ms"]["p50"] / res["base_ms"]["p50"], 3)
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(f"\nbase {args.base}: p50 {res['base_ms']['p50']} ms, p95 {res['base_ms']['p95']} ms")
    print(f"current {head}: p50 {res['current_ms']['p50']} ms, p95 {res['current_ms']['p95']} ms")
    print(f"ratio of medians: {res['ratio_p50']} (target <= 1.2)  -> {args.out}")


if __name__ == "__main__":
    main()
