"""`ti admin ...`: the operators' commands (the audit log; every user's jobs)."""

from __future__ import annotations

import argparse
import itertools
import json
from typing import Any

from . import alertrules
from .client import quote
from .common import JOB_HELP, add_json, command, examples, group
from .config import make_client
from .jobs import STATUSES, instances_of, runtime_of, status_of
from .output import err, out, print_json, table
from .watch import progress

AUDIT_COLUMNS = [("AT", "at"), ("BY", "actor"), ("ACTION", "action"), ("TARGET", "target"),
                 ("DETAIL", lambda e: json.dumps(e.get("detail") or {}, sort_keys=True, separators=(",", ":")))]


def cmd_audit(args: argparse.Namespace) -> int:
    params = {k: getattr(args, k) for k in ("actor", "action", "target") if getattr(args, k)}
    items = list(itertools.islice(make_client(args).paginate("/audit", params), args.limit))
    if args.json:
        print_json(items)
    else:
        table(items, AUDIT_COLUMNS, empty="(no changes recorded)")
    return 0


JOB_COLUMNS = [("ID", "id"), ("NAME", "name"), ("OWNER", "owner"), ("KIND", "kind"), ("STATUS", status_of),
               ("POOL", "pool"), ("DEVICE", "device_type"), ("DEVS", lambda j: (j.get("devices_per_instance") or 0)
                                                                   * (instances_of(j) or 0)),
               ("CREATED", "created_at"), ("RUNTIME", runtime_of), ("REASON", "reason")]
JOB_ACTIONS = {"kill": "kill now (SIGTERM, SIGKILL 5 s later; a workspace: the hub stops its server)",
               "stop": "stop gracefully (SIGTERM, SIGKILL after the grace; ends stopped)",
               "requeue": "back to its queue keeping its age (a running job is stopped first)",
               "reset": "in error, or stuck scheduling/killing/pausing: to failed (a workspace: stopped),\n"
                        "           its resources released"}


def cmd_jobs(args: argparse.Namespace) -> int:
    """Every user's jobs and workspaces (custom:ti:jobs:manage-all sees them all, in every state)."""
    params = {"all": 1, "owner": args.user, "pool": args.pool, "status": args.status, "kind": args.kind,
              "device_type": args.device_type, "name": args.name, "limit": args.limit, "offset": args.offset}
    page = make_client(args).get("/jobs", params={k: val for k, val in params.items() if val is not None}) or {}
    items = page.get("items", [])
    if args.json:
        print_json(items)
        return 0
    table(items, JOB_COLUMNS, empty="(no jobs or workspaces)")
    total, offset = page.get("total"), args.offset or 0
    if total is not None and offset + len(items) < total:
        err(f"(showing {offset + 1}-{offset + len(items)} of {total}; see more with --limit/--offset)")
    return 0


def cmd_job(args: argparse.Namespace) -> int:
    job = make_client(args).post(f"/jobs/{quote(args.job)}/{args.action}")
    if args.json:
        print_json(job)
    else:
        out(f"{job.get('owner', '?')}/{job.get('name', args.job)} ({job.get('kind', '?')}): {progress(job)}")
    return 0


def register(root: Any) -> None:
    sub = group(root, "admin", "operators: the audit log and every user's work (admins only)", examples(
        "ti admin audit", "ti admin audit --action vc --json", "ti admin jobs --status running",
        "ti admin job stop alice/notebook"))
    p = command(sub, "audit", cmd_audit, "changes operators made, newest first: who, what, when", examples(
        "ti admin audit", "ti admin audit --actor alice", "ti admin audit --action plan.create --json"))
    p.add_argument("--actor", metavar="USER", help="only changes made by USER")
    p.add_argument("--action", metavar="ACTION", help="an action (plan.create) or an object (plan)")
    p.add_argument("--target", metavar="NAME", help="only changes of this object")
    p.add_argument("--limit", type=int, default=100, metavar="N", help="show at most N entries (default 100)")
    add_json(p)

    p = command(sub, "jobs", cmd_jobs, "every user's jobs and workspaces in every state (jobs:manage-all)", examples(
        "ti admin jobs", "ti admin jobs --user alice --status running", "ti admin jobs --kind workspace --json",
        "ti admin jobs --pool default --device-type cpu"))
    p.add_argument("--user", metavar="USER", help="only this user's")
    p.add_argument("--pool", metavar="POOL", help="only those of this pool (virtual cluster)")
    p.add_argument("--status", metavar="STATUS[,STATUS]", help=f"only in these states: {', '.join(STATUSES)}")
    p.add_argument("--kind", metavar="KIND[,KIND]", help="only these kinds: workspace, single, distributed")
    p.add_argument("--device-type", metavar="TYPE", help="only those of this device type (cpu, a100, ...)")
    p.add_argument("--name", metavar="TEXT", help="only those whose name contains TEXT")
    p.add_argument("--limit", type=int, metavar="N", help="at most N (1-500, default 50)")
    p.add_argument("--offset", type=int, metavar="N", help="skip the first N")
    add_json(p)

    p = command(sub, "job", cmd_job, "act on any user's job or workspace; audited", examples(
        "ti admin job kill alice/notebook", "ti admin job stop 42", "ti admin job requeue 42",
        "ti admin job reset 42") + "\n\nactions:\n" + "\n".join(f"  {a:8} {h}" for a, h in JOB_ACTIONS.items()))
    p.add_argument("action", choices=list(JOB_ACTIONS), help="kill, stop, requeue or reset")
    p.add_argument("job", metavar="JOB", help=JOB_HELP)
    add_json(p)
    alertrules.register(sub)
