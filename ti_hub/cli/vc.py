"""`ti vc ...`: virtual clusters (SPEC RES2): list, show, create, rename, change, delete, assign machines, access,
and the current VC (`ti vc use`)."""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import quote

from .client import ApiError
from .common import add_json, command, confirm, examples, group
from .config import UsageError, make_client
from .output import out, print_json, table


def _caps(vc: dict[str, Any]) -> str:
    return ", ".join(f"{t} {n}" for t, n in sorted((vc.get("caps") or {}).items())) or "-"


def _access(vc: dict[str, Any]) -> str:
    if vc.get("open"):
        return "all"
    return ", ".join(f"{a['kind']}:{a['name']}" for a in vc.get("access") or []) or "nobody"


def _machines(vc: dict[str, Any]) -> str:
    parts = []
    for x in vc.get("machines") or []:
        label = x["node"] if x["device"] < 0 else f"{x['node']}/{x['device_type']}/{x['device']}"
        parts.append(label + (" (draining)" if x.get("draining") else ""))
    return ", ".join(parts) or ("the rest" if vc.get("name") == "default" else "-")


VC_COLUMNS = [("NAME", "name"), ("MACHINES", _machines), ("CAPS", _caps), ("ACCESS", _access),
              ("HELD", lambda vc: ", ".join(f"{t} {n}" for t, n in sorted((vc.get("held") or {}).items())) or "-"),
              ("STATE", lambda vc: "draining" if vc.get("draining") else "open"),
              ("COHORT", lambda vc: (vc.get("cohort") or "-") + ("" if vc.get("lend", True) else " (lends no)")),
              ("MINE", lambda vc: "yes" if vc.get("usable") else "no"), ("DESCRIPTION", "description")]


def _path(name: str, tail: str = "") -> str:
    return f"/vcs/{quote(name, safe='')}{tail}"


def _show(args: argparse.Namespace, vc: dict[str, Any], said: str = "") -> int:
    if args.json:
        print_json(vc)
        return 0
    if said:
        out(said)
    table([vc], VC_COLUMNS)
    return 0


def parse_caps(values: list[str] | None) -> dict[str, int | None]:
    caps: dict[str, int | None] = {}
    for item in values or []:
        dtype, sep, n = item.partition("=")
        if not sep or not dtype:
            raise UsageError(f"--cap {item!r}: write TYPE=N (N empty removes the cap)")
        try:
            caps[dtype] = int(n) if n else None
        except ValueError:
            raise UsageError(f"--cap {item!r}: N must be a whole number") from None
    return caps


def cmd_list(args: argparse.Namespace) -> int:
    items = list(make_client(args).paginate("/vcs"))
    if args.json:
        print_json(items)
    else:
        table(items, VC_COLUMNS, empty="(no virtual clusters)")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    return _show(args, make_client(args).get(_path(args.vc)))


def cmd_create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.vc}
    if args.description is not None:
        body["description"] = args.description
    caps = parse_caps(args.cap)
    if caps:
        body["caps"] = caps
    return _show(args, make_client(args).post("/vcs", body), f"created virtual cluster {args.vc}")


def cmd_rename(args: argparse.Namespace) -> int:
    vc = make_client(args).patch(_path(args.vc), {"name": args.new_name})
    return _show(args, vc, f"renamed virtual cluster {args.vc} to {args.new_name} (its plans and jobs follow)")


def cmd_change(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {}
    if args.description is not None:
        body["description"] = args.description
    if args.cap:
        body["caps"] = parse_caps(args.cap)
    if args.draining is not None:
        body["draining"] = args.draining == "on"
    if args.open is not None:
        body["open"] = args.open == "yes"
    if args.cohort is not None:
        body["cohort"] = args.cohort or None
    if args.lend is not None:
        body["lend"] = args.lend == "yes"
    if not body:
        raise UsageError("nothing to change: give --description, --cap, --draining, --open, --cohort or --lend")
    if args.drain:
        body["drain"] = True
    return _show(args, make_client(args).patch(_path(args.vc), body), f"changed virtual cluster {args.vc}")


def cmd_delete(args: argparse.Namespace) -> int:
    client = make_client(args)
    try:
        client.delete(_path(args.vc))
    except ApiError as e:
        jobs = e.extra.get("jobs") or []
        if not args.with_jobs or e.status != 409 or not jobs:
            raise
        # the plain delete's 409 names the jobs: list them all, then ask
        out(f"virtual cluster {args.vc} has {len(jobs)} unfinished job(s):")
        table(jobs, [("ID", "id"), ("NAME", "name"), ("OWNER", "owner"), ("KIND", "kind"), ("STATUS", "status")])
        confirm(f"stop these {len(jobs)} job(s) and delete virtual cluster {args.vc}?", args.yes)
        client.timeout = max(client.timeout, 120.0)  # the service waits for the stops (their grace) first
        client.delete(_path(args.vc), params={"with_jobs": "true"})
        out(f"stopped {len(jobs)} job(s) and deleted virtual cluster {args.vc}")
        return 0
    out(f"deleted virtual cluster {args.vc}")
    return 0


def cmd_assign(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"node": args.node}
    if args.device_type:
        body["device_type"] = args.device_type
    if args.devices:
        try:
            body["devices"] = [int(d) for d in args.devices.split(",") if d.strip()]
        except ValueError:
            raise UsageError("--devices: a comma-separated list of device indices, e.g. 0,1") from None
    if args.remove:
        body["remove"] = True
    if args.drain:
        body["drain"] = True
    vc = make_client(args).post(_path(args.vc, "/machines"), body)
    moved = "; ".join(f"{x['machine']}: {x['from']} -> {x['to']}{' once its work ends' if x['draining'] else ''}"
                      for x in vc.get("moved") or []) or "nothing to move"
    return _show(args, vc, moved)


def cmd_access(args: argparse.Namespace) -> int:
    if bool(args.user) == bool(args.group):
        raise UsageError("give exactly one of --user or --group")
    body: dict[str, Any] = {"user": args.user} if args.user else {"group": args.group}
    if args.remove:
        body["remove"] = True
    if args.drain:
        body["drain"] = True
    who = f"user {args.user}" if args.user else f"group {args.group}"
    vc = make_client(args).post(_path(args.vc, "/access"), body)
    return _show(args, vc, f"{'revoked' if args.remove else 'granted'} {who} {'from' if args.remove else 'in'} "
                           f"{args.vc}")


def cmd_use(args: argparse.Namespace) -> int:
    client = make_client(args)
    doc = client.put("/me/vc", {"vc": args.vc}) if args.vc else client.get("/me/vc")
    if args.json:
        print_json(doc)
    else:
        out(f"current virtual cluster: {doc['vc']} (you may use: {', '.join(doc['usable'])})")
    return 0


def register(root: Any) -> None:
    sub = group(root, "vc", "virtual clusters: machines, per-user caps, who may use them; my current one", examples(
        "ti vc list", "ti vc use team-a", "ti vc create team-a --cap demo-gpu=1",
        "ti vc assign team-a --node host1 --device-type demo-gpu --devices 0,1",
        "ti vc access team-a --group lab"))
    p = command(sub, "list", cmd_list, "virtual clusters, their machines, caps and access", examples(
        "ti vc list", "ti vc list --json"), aliases=["ls"])
    add_json(p)
    p = command(sub, "show", cmd_show, "one virtual cluster", examples("ti vc show team-a"))
    p.add_argument("vc", metavar="VC")
    add_json(p)
    p = command(sub, "use", cmd_use, "show or choose my current virtual cluster (plans and the queue list it)",
                examples("ti vc use", "ti vc use team-a"))
    p.add_argument("vc", metavar="VC", nargs="?", help="the VC to work in (omit: show the current one)")
    add_json(p)
    cap_help = "TYPE=N: one user holds at most N devices of TYPE here at once (TYPE= removes it); repeatable"
    drain_help = ("apply it although running work holds what changes: that work finishes, nothing new is "
                  "admitted there")
    p = command(sub, "create", cmd_create, "admin: create a virtual cluster (needs vc:manage)", examples(
        "ti vc create team-a --description 'Team A' --cap demo-gpu=2"))
    p.add_argument("vc", metavar="VC")
    p.add_argument("--description", metavar="TEXT")
    p.add_argument("--cap", action="append", metavar="TYPE=N", help=cap_help)
    add_json(p)
    p = command(sub, "rename", cmd_rename, "admin: rename a virtual cluster; its plans and jobs follow", examples(
        "ti vc rename team-a team-alpha"))
    p.add_argument("vc", metavar="VC")
    p.add_argument("new_name", metavar="NEW_NAME")
    add_json(p)
    p = command(sub, "change", cmd_change, "admin: describe, cap, drain, open or restrict a virtual cluster",
                examples("ti vc change team-a --cap demo-gpu=1", "ti vc change team-a --cap demo-gpu=1 --drain",
                         "ti vc change team-a --draining on", "ti vc change team-a --open yes",
                         "ti vc change team-a --cohort labs   # lend idle devices within the cohort labs",
                         "ti vc change team-a --lend no", "ti vc change team-a --cohort ''   # no cohort"))
    p.add_argument("vc", metavar="VC")
    p.add_argument("--description", metavar="TEXT")
    p.add_argument("--cap", action="append", metavar="TYPE=N", help=cap_help)
    p.add_argument("--draining", choices=["on", "off"], help="on: running work finishes, nothing new is admitted")
    p.add_argument("--open", choices=["yes", "no"], help="yes: open to all; no: only to its users and groups")
    p.add_argument("--cohort", metavar="NAME", help="VCs of one cohort lend each other idle devices (a borrowed "
                   "job is preempted and requeued when the lender's own jobs need them); '' leaves the cohort")
    p.add_argument("--lend", choices=["yes", "no"], help="no: keep this VC's idle devices to itself (default yes)")
    p.add_argument("--drain", action="store_true", help=drain_help)
    add_json(p)
    p = command(sub, "delete", cmd_delete, "admin: delete an empty virtual cluster (no machines, jobs or plans), "
                "or with --with-jobs one whose jobs are stopped first (its plans go too, its machines back to default)",
                examples("ti vc delete team-a", "ti vc delete team-a --with-jobs   # lists the jobs, asks",
                         "ti vc delete team-a --with-jobs --yes"), aliases=["rm"])
    p.add_argument("vc", metavar="VC")
    p.add_argument("--with-jobs", action="store_true", help="stop every unfinished job of the VC (listed, then "
                   "asked unless --yes), then delete it with its plans")
    p.add_argument("--yes", action="store_true", help="with --with-jobs: do not ask")
    p = command(sub, "assign", cmd_assign, "admin: give machines to a virtual cluster, or back to default",
                examples("ti vc assign team-a --node host1 --device-type demo-gpu --devices 0,1",
                         "ti vc assign team-a --node host1 --device-type demo-gpu --devices 1 --remove --drain",
                         "ti vc assign team-a --node gpu-node-7   # Kubernetes: the whole node"))
    p.add_argument("vc", metavar="VC")
    p.add_argument("--node", required=True, metavar="MACHINE", help="the machine (`ti cluster` lists them)")
    p.add_argument("--device-type", metavar="TYPE", help="embedded platform: the device type")
    p.add_argument("--devices", metavar="I,J", help="embedded platform: device indices (default: all of the type)")
    p.add_argument("--remove", action="store_true", help="give them back to default")
    p.add_argument("--drain", action="store_true", help=drain_help)
    add_json(p)
    p = command(sub, "access", cmd_access, "admin: grant or revoke a user's or a group's access", examples(
        "ti vc access team-a --group lab", "ti vc access team-a --user alice --remove --drain"))
    p.add_argument("vc", metavar="VC")
    p.add_argument("--user", metavar="USER")
    p.add_argument("--group", metavar="GROUP")
    p.add_argument("--remove", action="store_true", help="revoke instead of grant")
    p.add_argument("--drain", action="store_true", help=drain_help)
    add_json(p)
