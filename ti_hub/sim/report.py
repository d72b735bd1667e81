"""The summary table, JSON, and the files of an ``--out`` directory.

    OUT/summary.json            settings and one summary per policy
    OUT/summary.csv             one row per policy (delay and JCT statistics flattened)
    OUT/<policy>/jobs.csv       one row per job: submission, first start, end, wait, JCT, preemptions
    OUT/<policy>/users.csv      per user: jobs, device-hours demanded and received, shares, mean delay
    OUT/<policy>/scores.csv     usage-score timeline: time_s, user, device_type, score

Every file is written to a temporary name and renamed into place, and only after every policy has run: an
error or an interrupt leaves no half-written file.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from dataclasses import asdict
from pathlib import Path

from .engine import SimResult
from .metrics import UserRow

STAT_KEYS = ("mean", "p50", "p95", "p99", "max")


def _clean(v):
    """JSON has no NaN: None instead."""
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v


def to_json(settings: dict, summaries: list[dict]) -> str:
    return json.dumps(_clean({"settings": settings, "policies": summaries}), indent=1)


def flat(summary: dict) -> dict:
    out = {k: v for k, v in summary.items() if not isinstance(v, dict)}
    for group in ("delay_s", "jct_s"):
        for k in STAT_KEYS:
            out[f"{group.removesuffix('_s')}_{k}_s"] = summary[group][k]
    return out


def _csv(header: list[str], rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow(["" if isinstance(x, float) and math.isnan(x) else (f"{x:.12g}" if isinstance(x, float) else x)
                    for x in r])
    return buf.getvalue()


def jobs_csv(res: SimResult) -> str:
    def row(r):
        end = r.end if r.end is not None else math.nan
        start = r.first_start if r.first_start is not None else math.nan
        return [r.job.job_id, r.job.user, r.job.kind, r.job.pool, r.job.device_type, len(r.job.instances),
                r.job.devices, r.job.submit_s, r.job.duration_s, start, end,
                r.waited_s if r.end is not None else math.nan, end - r.job.submit_s, r.preemptions,
                int(r.backfilled), r.rejected]
    return _csv(["job_id", "user", "kind", "pool", "device_type", "instances", "devices", "submit_s", "duration_s",
                 "first_start_s", "end_s", "delay_s", "jct_s", "preemptions", "backfilled", "rejected"],
                (row(r) for r in res.records))


def users_csv(rows: list[UserRow]) -> str:
    fields = list(asdict(rows[0])) if rows else list(UserRow.__dataclass_fields__)
    return _csv(fields, ([getattr(r, f) for f in fields] for r in rows))


def scores_csv(res: SimResult) -> str:
    return _csv(["time_s", "user", "device_type", "score"], res.scores)


def summary_csv(summaries: list[dict]) -> str:
    flats = [flat(s) for s in summaries]
    header = list(flats[0]) if flats else ["policy"]
    return _csv(header, ([f.get(k, "") for k in header] for f in flats))


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_out(out: Path, settings: dict, runs: list[tuple[SimResult, list[UserRow], dict]]) -> list[Path]:
    """Render everything first, then write: a rendering error writes nothing."""
    files: dict[Path, str] = {out / "summary.json": to_json(settings, [s for _, _, s in runs]),
                              out / "summary.csv": summary_csv([s for _, _, s in runs])}
    for res, rows, _ in runs:
        d = out / res.policy.name
        files[d / "jobs.csv"] = jobs_csv(res)
        files[d / "users.csv"] = users_csv(rows)
        files[d / "scores.csv"] = scores_csv(res)
    for path, text in files.items():
        write_atomic(path, text)
    return list(files)


def _h(seconds: float) -> str:
    """A duration for people: s, min, h or days."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def table(summaries: list[dict]) -> str:
    head = ["policy", "delay mean", "p50", "p95", "p99", "max", "JCT mean", "JCT p50", "JCT p99", "util",
            "Jain", "preempt", "backfill", "runtime"]
    lines = []
    for s in summaries:
        d, j = s["delay_s"], s["jct_s"]
        util = "-" if s["utilization"] is None or math.isnan(s["utilization"]) else f"{s['utilization']:.1%}"
        jain = "-" if s["jain_index"] is None or math.isnan(s["jain_index"]) else f"{s['jain_index']:.3f}"
        lines.append([s["policy"], _h(d["mean"]), _h(d["p50"]), _h(d["p95"]), _h(d["p99"]), _h(d["max"]),
                      _h(j["mean"]), _h(j["p50"]), _h(j["p99"]), util, jain, str(s["preemptions"]),
                      str(s["backfilled"]), f"{s.get('runtime_s', math.nan):.1f} s"])
    widths = [max(len(r[i]) for r in [head, *lines]) for i in range(len(head))]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([fmt(head), *(fmt(r) for r in lines)])
