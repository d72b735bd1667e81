"""`ti alert list`: the alerts naming me (a job of mine past its duration or waiting past its estimate, an idle
workspace), every alert for admins (MON2-3)."""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from .common import add_json, command, examples, group
from .config import make_client
from .output import out, print_json, table

COLUMNS = [("ID", "id"), ("FIRED", "fired_at"), ("SEVERITY", "severity"), ("STATE", lambda a: "open" if a.get("open")
                                                                          else "cleared"),
           ("JOB", lambda a: a.get("job_id") or ""), ("MACHINE", "machine"), ("SUBJECT", "subject"),
           ("ANSWER", lambda a: a.get("answer") or "")]


def cmd_list(args: argparse.Namespace) -> int:
    params = {"open": "false" if args.all else "true"}
    items = list(itertools.islice(make_client(args).paginate("/alerts", params), args.limit))
    if args.json:
        print_json(items)
    else:
        table(items, COLUMNS, empty="(no alerts)" if args.all else "(no open alerts)")
    return 0


def cmd_answer(args: argparse.Namespace) -> int:
    alert = make_client(args).post(f"/alerts/{args.alert}/answer", {"answer": args.message})
    if args.json:
        print_json(alert)
    else:
        out(f"answered support request {alert.get('id', args.alert)}; it is closed and its owner sees the answer")
    return 0


def register(root: Any) -> None:
    sub = group(root, "alert", "alerts about my jobs and workspaces (admins: every alert)", examples(
        "ti alert list", "ti alert list --all --json"))
    p = command(sub, "list", cmd_list, "open alerts naming me, newest first (admins: every open alert)", examples(
        "ti alert list", "ti alert list --all", "ti alert list --json | jq '.[].subject'"
    ) + "\n\nAn alert opens when its condition starts (a job runs past its declared duration, waits past its\n"
        "estimated start, a workspace's devices sit idle, a machine runs hot) and clears when it ends; while\n"
        "open, its notices (email, webhook) repeat at the interval the admins set.", aliases=["ls"])
    p.add_argument("--all", action="store_true", help="cleared alerts too, not only open ones")
    p.add_argument("--limit", type=int, default=100, metavar="N", help="show at most N alerts (default 100)")
    add_json(p)

    p = command(sub, "answer", cmd_answer, "answer a support request (admins); it closes it", examples(
        'ti alert answer 12 -m "the node ran out of memory: use plan gpu-large"'))
    p.add_argument("alert", type=int, metavar="ID", help="the support request's alert id (ti alert list)")
    p.add_argument("-m", "--message", required=True, metavar="TEXT", help="the answer its owner reads")
    add_json(p)
