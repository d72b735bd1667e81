"""`ti admin alert-rule ...` and `ti admin machine ...`: alert rules (machine rules and the built-in job-overrun,
job-wait and workspace-idle) and cordoned machines (MON2, ADM3; custom:ti:vc:manage)."""

from __future__ import annotations

import argparse
from typing import Any

from ..domain.healthrules import METRICS, OPS
from .client import quote
from .common import add_json, command, examples, group
from .config import make_client
from .output import err, out, print_json, table


def where(rule: dict[str, Any]) -> str:
    return ", ".join(f["machine"] for f in rule.get("firing") or []) or "-"


RULE_COLUMNS = [("ID", "id"), ("NAME", "name"), ("METRIC", "metric"),
                ("CONDITION", lambda r: f"{r['op']} {r['threshold']:g}" + (
                    "" if r.get("cpu_threshold") is None else f", CPU < {r['cpu_threshold']:g}%")),
                ("STEP", lambda r: f"{r['step']}s"), ("INTERVAL", lambda r: f"{r['interval']}s"),
                ("PERCENT", lambda r: "-" if r.get("builtin") else f"{r['percent']:g}%"),
                ("GRACE", lambda r: "-" if r.get("grace") is None else f"{r['grace']}s"), ("SEVERITY", "severity"),
                ("ENABLED", lambda r: "yes" if r["enabled"] else "no"),
                ("OWNERS", lambda r: "yes" if r["notify_owners"] else "no"),
                ("CORDON", lambda r: "yes" if r["cordon"] else "no"), ("FIRING ON", where)]
CORDON_COLUMNS = [("MACHINE", "machine"), ("SINCE", "at"), ("BY", "by"), ("RULE", "rule"), ("REASON", "reason")]


def find_rule(client: Any, ref: str) -> dict[str, Any]:
    rules = (client.get("/alert-rules") or {}).get("items", [])
    for r in rules:
        if r["name"] == ref or str(r["id"]) == ref:
            return r
    raise SystemExit(err(f"no alert rule {ref!r} (ti admin alert-rule list shows them)") or 1)


def fields_of(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for k in ("name", "description", "metric", "op", "threshold", "step", "interval", "percent", "severity",
              "enabled", "notify_owners", "cordon", "grace", "cpu_threshold"):
        val = getattr(args, k, None)
        if val is not None:
            body[k] = val
    return body


def cmd_list(args: argparse.Namespace) -> int:
    items = (make_client(args).get("/alert-rules") or {}).get("items", [])
    if args.json:
        print_json(items)
    else:
        table(items, RULE_COLUMNS, empty="(no alert rules)")
    return 0


def _show(args: argparse.Namespace, rule: dict[str, Any], said: str) -> int:
    if args.json:
        print_json(rule)
    else:
        out(said)
        table([rule], RULE_COLUMNS)
    return 0


def cmd_create(args: argparse.Namespace) -> int:
    rule = make_client(args).post("/alert-rules", fields_of(args))
    return _show(args, rule, f"created alert rule {rule['name']} (id {rule['id']})")


def cmd_update(args: argparse.Namespace) -> int:
    client = make_client(args)
    old = find_rule(client, args.rule)
    body = fields_of(args)
    if args.new_name:
        body["name"] = args.new_name
    if not body:
        err("nothing to change: give at least one option (ti admin alert-rule update --help)")
        return 2
    rule = client.patch(f"/alert-rules/{old['id']}", body)
    return _show(args, rule, f"changed alert rule {rule['name']}")


def cmd_delete(args: argparse.Namespace) -> int:
    client = make_client(args)
    old = find_rule(client, args.rule)
    client.delete(f"/alert-rules/{old['id']}")
    out(f"deleted alert rule {old['name']} (its open alerts are closed)")
    return 0


def cmd_machines(args: argparse.Namespace) -> int:
    items = (make_client(args).get("/machines/cordoned") or {}).get("items", [])
    if args.json:
        print_json(items)
    else:
        table(items, CORDON_COLUMNS, empty="(no machine is cordoned)")
    return 0


def cmd_cordon(args: argparse.Namespace) -> int:
    client = make_client(args)
    if args.action == "cordon":
        row = client.post(f"/machines/{quote(args.machine)}/cordon", {"reason": args.reason or ""})
    else:
        row = client.post(f"/machines/{quote(args.machine)}/uncordon")
    if args.json:
        print_json(row)
    elif row.get("cordoned"):
        out(f"machine {row['machine']} is cordoned (since {row['at']}, by {row['by']}): no new work is placed there; "
            "running work keeps running")
    else:
        out(f"machine {row['machine']} is schedulable")
    return 0


def rule_options(p: argparse.ArgumentParser, create: bool) -> None:
    if create:
        p.add_argument("name", help="the rule's name (letters, digits, - and _)")
    p.add_argument("--metric", choices=list(METRICS), required=create,
                   help="; ".join(f"{k}: {d}" for k, d in METRICS.items()))
    p.add_argument("--op", choices=list(OPS), required=create, help="how a sample compares with the threshold")
    p.add_argument("--threshold", type=float, required=create, metavar="X",
                   help="the value compared with (percent, degrees C, or an error count; job-overrun and job-wait: "
                        "seconds late; workspace-idle: a GPU utilization percent)")
    p.add_argument("--step", type=int, metavar="S", help="seconds between two evaluations (default 60)")
    p.add_argument("--interval", type=int, metavar="S",
                   help="seconds looked back (default 300; workspace-idle: the idle time before the warning)")
    if not create:
        p.add_argument("--grace", type=int, metavar="S",
                       help="workspace-idle only: seconds from the warning to the reclaim")
        p.add_argument("--cpu-threshold", type=float, metavar="P",
                       help="workspace-idle only: a workspace is idle when it also uses under P %% of its plan's "
                            "CPUs (a workspace without devices is judged by its CPU alone)")
    p.add_argument("--percent", type=float, metavar="P",
                   help="fire when at least P %% of the machine's samples in the interval match (default 100)")
    p.add_argument("--severity", choices=["info", "warning", "critical"], help="default warning")
    p.add_argument("--description", metavar="TEXT", help="what the rule is for")
    p.add_argument("--enabled", action=argparse.BooleanOptionalAction, default=None,
                   help="evaluate the rule (--no-enabled: keep it, fire nowhere)")
    p.add_argument("--notify-owners", action=argparse.BooleanOptionalAction, default=None,
                   help="also alert the owners of the jobs on the machine")
    p.add_argument("--cordon", action=argparse.BooleanOptionalAction, default=None,
                   help="take the machine out of scheduling when the rule fires (unless AlertRules.cordon_dry_run)")
    add_json(p)


def register(sub: Any) -> None:
    rules = group(sub, "alert-rule", "alert rules: machines' ECC errors, GPU temperature, CPU, memory, disk; the "
                  "built-in job-overrun, job-wait and workspace-idle (vc:manage)",
                  examples("ti admin alert-rule list", "ti admin alert-rule update cpu-busy --threshold 95",
                           "ti admin alert-rule update gpu-temperature --no-enabled",
                           "ti admin alert-rule update job-wait --threshold 120",
                           "ti admin alert-rule update workspace-idle --enabled --interval 3600 --grace 1800",
                           "ti admin alert-rule update workspace-idle --cpu-threshold 5"))
    p = command(rules, "list", cmd_list, "alert rules, each with the machines it fires on now", examples(
        "ti admin alert-rule list", "ti admin alert-rule list --json"))
    add_json(p)
    p = command(rules, "create", cmd_create, "define a machine alert rule", examples(
        "ti admin alert-rule create hot-gpu --metric gpu_temperature --op '>' --threshold 80 --percent 50",
        "ti admin alert-rule create ecc-any --metric gpu_ecc --op '>' --threshold 0 --step 15 --interval 60 "
        "--percent 1 --cordon --notify-owners"))
    rule_options(p, create=True)
    p = command(rules, "update", cmd_update, "change, enable or disable an alert rule (built-in ones: threshold, "
                "severity, owners, enabled; workspace-idle also interval, grace and cpu-threshold)", examples(
        "ti admin alert-rule update cpu-busy --threshold 95 --percent 50",
        "ti admin alert-rule update job-overrun --threshold 300 --severity critical",
        "ti admin alert-rule update gpu-ecc-errors --no-cordon", "ti admin alert-rule update 3 --enabled"))
    p.add_argument("rule", metavar="RULE", help="the rule's name or id")
    p.add_argument("--name", dest="new_name", metavar="NAME", help="rename the rule")
    rule_options(p, create=False)
    p = command(rules, "delete", cmd_delete, "delete a machine alert rule and close its alerts (built-in rules "
                "cannot be deleted: disable them)", examples(
        "ti admin alert-rule delete hot-gpu"))
    p.add_argument("rule", metavar="RULE", help="the rule's name or id")

    machines = group(sub, "machine", "take machines out of scheduling and put them back (vc:manage)", examples(
        "ti admin machine list", "ti admin machine cordon host1 --reason 'ECC errors'",
        "ti admin machine uncordon host1"))
    p = command(machines, "list", cmd_machines, "cordoned machines: since when, by whom, why", examples(
        "ti admin machine list", "ti admin machine list --json"))
    add_json(p)
    p = command(machines, "cordon", cmd_cordon, "take a machine out of scheduling; its running work keeps running",
                examples("ti admin machine cordon host1 --reason 'fan failure'"))
    p.set_defaults(action="cordon")
    p.add_argument("machine", metavar="MACHINE", help="the machine (Kubernetes: the node)")
    p.add_argument("--reason", metavar="TEXT", help="why (the Alerts page and the audit log show it)")
    add_json(p)
    p = command(machines, "uncordon", cmd_cordon, "put a machine back into scheduling", examples(
        "ti admin machine uncordon host1"))
    p.set_defaults(action="uncordon")
    p.add_argument("machine", metavar="MACHINE", help="the machine (Kubernetes: the node)")
    add_json(p)
