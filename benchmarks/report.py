"""Medians over runs, verdicts against the issue's targets, and the printed table."""

from __future__ import annotations

import statistics

API = "/services/ti/api/v1"
TARGETS = {"list_rps": 500, "list_p99_ms": 50, "submit_p99_ms": 100, "cold_start_s": 5}


def med(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 2) if values else None


def summarize_runs(runs: list[dict], cls: str | None = None) -> dict:
    pick = [(r["by_class"].get(cls) if cls else r["total"]) for r in runs]
    pick = [p for p in pick if p]
    return {k: med([p[k] for p in pick]) for k in ("rps", "p50_ms", "p95_ms", "p99_ms", "max_ms")} | {
        "errors": sum(p["errors"] for p in pick), "dropped": sum(p.get("dropped", 0) for p in pick),
        "runs": len(pick)}


def verdicts(res: dict) -> dict:
    v = {}
    lst = res.get("load", {}).get("list", {}).get("direct")
    if lst:
        v["list_rps"] = {"value": lst["total"]["rps"], "target": f">= {TARGETS['list_rps']}",
                         "pass": (lst["total"]["rps"] or 0) >= TARGETS["list_rps"]}
        v["list_p99_ms_closed_loop"] = {"value": lst["total"]["p99_ms"], "target": f"<= {TARGETS['list_p99_ms']}",
                                        "pass": (lst["total"]["p99_ms"] or 1e9) <= TARGETS["list_p99_ms"]}
    paced = res.get("load", {}).get("list_paced", {}).get(str(TARGETS["list_rps"]))
    if paced:
        ok = (paced["total"]["p99_ms"] or 1e9) <= TARGETS["list_p99_ms"] and not paced["total"]["dropped"] \
            and (paced["total"]["rps"] or 0) >= 0.98 * TARGETS["list_rps"]
        v["list_p99_ms_at_500_rps"] = {"value": paced["total"]["p99_ms"], "achieved_rps": paced["total"]["rps"],
                                       "target": f"<= {TARGETS['list_p99_ms']} while serving 500 req/s",
                                       "pass": ok}
    sub = res.get("load", {}).get("submit", {}).get("direct")
    if sub:
        v["submit_p99_ms_closed_loop"] = {"value": sub["total"]["p99_ms"], "target": f"<= {TARGETS['submit_p99_ms']}",
                                          "pass": (sub["total"]["p99_ms"] or 1e9) <= TARGETS["submit_p99_ms"]}
    for rate, d in res.get("load", {}).get("submit_paced", {}).items():
        t = d["total"]
        v[f"submit_p99_ms_at_{rate}_per_s"] = {
            "value": t["p99_ms"], "achieved_rps": t["rps"], "target": f"<= {TARGETS['submit_p99_ms']}",
            "pass": (t["p99_ms"] or 1e9) <= TARGETS["submit_p99_ms"] and not t["dropped"]
            and (t["rps"] or 0) >= 0.98 * float(rate)}
    cold = res.get("cold_start")
    if cold:
        worst = max(cold[m]["median_s"] for m in cold)
        v["cold_start_s"] = {"value": worst, "target": f"<= {TARGETS['cold_start_s']}",
                             "pass": worst <= TARGETS["cold_start_s"]}
    return v


def table(res: dict) -> str:
    rows = [("measure", "via", "req/s", "p50 ms", "p95 ms", "p99 ms", "err/drop")]
    load = res.get("load", {})
    if load.get("floor"):
        s = load["floor"]["total"]
        rows.append((f"GET {API}/ (floor)", "direct", s["rps"], s["p50_ms"], s["p95_ms"], s["p99_ms"],
                     f"{s['errors']}/{s['dropped']}"))
    for via in ("direct", "proxy"):
        for cls in ("total", "user", "admin_all"):
            s = load.get("list", {}).get(via, {}).get(cls)
            if s:
                rows.append((f"GET /jobs ({cls})", via, s["rps"], s["p50_ms"], s["p95_ms"], s["p99_ms"],
                             f"{s['errors']}/{s['dropped']}"))
    for rate, d in load.get("list_paced", {}).items():
        for cls in ("total", "user", "admin_all"):
            s = d.get(cls)
            if s:
                rows.append((f"GET /jobs ({cls})", f"@{rate}/s", s["rps"], s["p50_ms"], s["p95_ms"], s["p99_ms"],
                             f"{s['errors']}/{s['dropped']}"))
    for via in ("direct", "proxy"):
        s = load.get("submit", {}).get(via, {}).get("total")
        if s:
            rows.append(("POST /jobs", via, s["rps"], s["p50_ms"], s["p95_ms"], s["p99_ms"],
                         f"{s['errors']}/{s['dropped']}"))
    for rate, d in load.get("submit_paced", {}).items():
        s = d["total"]
        rows.append(("POST /jobs", f"@{rate}/s", s["rps"], s["p50_ms"], s["p95_ms"], s["p99_ms"],
                     f"{s['errors']}/{s['dropped']}"))
    lines = ["  ".join(f"{str(c):>28s}" if i == 0 else f"{str(c):>9s}" for i, c in enumerate(r)) for r in rows]
    for mode, c in res.get("cold_start", {}).items():
        lines.append(f"cold start ({mode}): median {c['median_s']} s over {len(c['runs'])} runs "
                     f"(ti-hub's own figure {c['median_self_reported_s']} s)")
    for k, v in res.get("verdicts", {}).items():
        extra = f", achieved {v['achieved_rps']} req/s" if "achieved_rps" in v else ""
        lines.append(f"{k}: {v['value']}{extra} (target {v['target']}) -> {'PASS' if v['pass'] else 'FAIL'}")
    return "\n".join(lines)
