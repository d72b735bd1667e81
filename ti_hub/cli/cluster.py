"""`ti cluster ...`: cluster status (SPEC MON1): per virtual cluster, user and machine, devices used, free, idle
and unmeasured now, booked and idle device-hours over the past days, machines' addresses and what runs there."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from .common import Formatter, add_global_options, command, examples
from .config import make_client
from .output import err, out, print_json, table

HOURS = [("BOOKED H", "booked_hours"), ("IDLE H", "idle_hours"), ("IDLE %", lambda r: _pct(r.get("idle_percent"))),
         ("UNMEASURED H", "unmeasured_hours")]
NOW = [("USED", "used"), ("IDLE NOW", "idle"), ("UNMEASURED", "unmeasured")]
VC_COLUMNS = [("VC", "vc"), ("DEVICE TYPE", "device_type"), ("TOTAL", "total"), *NOW[:1], ("FREE", "free"),
              *NOW[1:], *HOURS]
USER_COLUMNS = [("USER", "user"), *NOW, *HOURS]
NODE_COLUMNS = [("MACHINE", "machine"), ("ADDRESS", "address"), ("VCS", "pools"), ("TOTAL", "total"), *NOW[:1],
                ("FREE", "free"), *NOW[1:], *HOURS[:3], ("RUNNING", lambda r: _runs(r.get("running") or []))]


def _pct(value: Any) -> str:
    return "" if value is None else f"{value:g}"


def _runs(runs: list[Mapping[str, Any]]) -> str:
    def one(r: Mapping[str, Any]) -> str:
        who = f"{r['owner']}/{r['name']}" if r.get("owner") else "(another user's)"
        devs = f"[{','.join(str(d) for d in r.get('devices') or [])}]" if r.get("devices") else ""
        return f"{who}{devs}"
    return " ".join(one(r) for r in runs)


def _fetch(args: argparse.Namespace) -> dict[str, Any]:
    params = {"days": args.days} if getattr(args, "days", None) is not None else None
    return make_client(args).get("/cluster/usage", params=params) or {}


def _note(doc: Mapping[str, Any]) -> None:
    measured = "measured" if doc.get("measuring") else "NOT measured now (no recent health sample)"
    err(f"(idle: under {doc.get('idle_threshold', 0):g} % utilization, {measured}; unmeasured devices have no "
        f"reading and are not counted idle; hours: the past {doc.get('days')} days)")


def _show(args: argparse.Namespace, key: str | None) -> int:
    doc = _fetch(args)
    if getattr(args, "json", False):
        print_json(doc if key is None else doc.get(key, []))
        return 0
    sections = [("vcs", "virtual clusters:", VC_COLUMNS, "(no devices)"),
                ("users", "users:", USER_COLUMNS, "(nobody holds devices, nor did in the window)"),
                ("nodes", "machines:", NODE_COLUMNS, "(no machines)")]
    for name, title, columns, empty in sections:
        if key is None or key == ("machines" if name == "nodes" else name):
            if key is None:
                out(title)
            table(doc.get("machines" if name == "nodes" else name, []), columns, empty=empty)
    _note(doc)
    return 0


def cmd_cluster(args: argparse.Namespace) -> int:
    return _show(args, None)


def _options(p: argparse.ArgumentParser, sub: bool) -> None:
    d = {"default": argparse.SUPPRESS} if sub else {}
    p.add_argument("--days", type=int, metavar="N", help="booked/idle device-hours over the past N days "
                                                          "(default 30)", **d)
    p.add_argument("--json", action="store_true", help="print the raw JSON the server answered", **d)


def register(root: Any) -> None:
    p = root.add_parser(
        "cluster", help="cluster status: devices used, free and idle per VC, user and machine; device-hours",
        description="Cluster status: per virtual cluster, user and machine, devices used, free, idle (allocated but "
                    "under the idle utilization threshold) and unmeasured (no reading) now; booked and idle "
                    "device-hours over the past days; each machine's address and what runs on it. Other users' "
                    "rows and job names need jobs:view-all.", formatter_class=Formatter,
        epilog=examples("ti cluster", "ti cluster users --days 7", "ti cluster nodes", "ti cluster vcs --json"))
    add_global_options(p, suppress=True)
    _options(p, sub=False)
    p.set_defaults(func=cmd_cluster)
    sub = p.add_subparsers(title="commands", metavar="COMMAND")
    for name, key, help in (("vcs", "vcs", "per virtual cluster and device type"),
                            ("users", "users", "per user (others: jobs:view-all)"),
                            ("nodes", "machines", "per machine: address, devices, what runs there")):
        c = command(sub, name, lambda a, _k=key: _show(a, _k), f"cluster status {help}",
                    examples(f"ti cluster {name}", f"ti cluster {name} --days 7 --json"))
        _options(c, sub=True)
