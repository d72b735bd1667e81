"""`ti admin ...`: the operators' commands (the audit log; every user's jobs)."""

from __future__ import annotations

import argparse
import itertools
import json
from typing import Any

from .common import add_json, command, examples, group
from .config import make_client
from .output import print_json, table

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


def register(root: Any) -> None:
    sub = group(root, "admin", "operators: the audit log and every user's work (admins only)", examples(
        "ti admin audit", "ti admin audit --action vc --json"))
    p = command(sub, "audit", cmd_audit, "changes operators made, newest first: who, what, when", examples(
        "ti admin audit", "ti admin audit --actor alice", "ti admin audit --action plan.create --json"))
    p.add_argument("--actor", metavar="USER", help="only changes made by USER")
    p.add_argument("--action", metavar="ACTION", help="an action (plan.create) or an object (plan)")
    p.add_argument("--target", metavar="NAME", help="only changes of this object")
    p.add_argument("--limit", type=int, default=100, metavar="N", help="show at most N entries (default 100)")
    add_json(p)
