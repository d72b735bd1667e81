"""`ti queue ...`: the queue in order (the default), reorder, cancel; pin, unpin and priority (admins);
usage scores and the resource panel."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from .client import quote
from .common import Formatter, add_global_options, add_json, command, examples
from .config import make_client
from .misc import QUEUE_COLUMNS, cmd_queue
from .output import out, print_json, table
from .watch import progress, queue_position


def _done(args: argparse.Namespace, job: Any, what: str) -> int:
    if args.json:
        print_json(job)
    elif isinstance(job, Mapping):
        pos = queue_position(job, with_queue=True)
        out(f"{job.get('name', args.job)}: {what}; {pos or progress(job)}")
    return 0


def cmd_move(args: argparse.Namespace) -> int:
    body: dict[str, Any]
    if args.top or args.bottom:
        body = {"to": "top" if args.top else "bottom"}
    elif args.before:
        body = {"before": args.before}
    else:
        body = {"after": args.after}
    job = make_client(args).post(f"/jobs/{quote(args.job)}/move", body)
    return _done(args, job, "moved")


def cmd_pin(args: argparse.Namespace) -> int:
    return _done(args, make_client(args).post(f"/jobs/{quote(args.job)}/pin"), "pinned")


def cmd_unpin(args: argparse.Namespace) -> int:
    return _done(args, make_client(args).post(f"/jobs/{quote(args.job)}/unpin"), "unpinned")


def cmd_priority(args: argparse.Namespace) -> int:
    job = make_client(args).post(f"/jobs/{quote(args.job)}/priority", {"priority": args.priority})
    return _done(args, job, f"priority {args.priority}")


def cmd_cancel(args: argparse.Namespace) -> int:
    job = make_client(args).post(f"/jobs/{quote(args.job)}/cancel")
    if args.json:
        print_json(job)
    else:
        out(f"{job.get('name', args.job)}: {progress(job)}")
    return 0


def cmd_scores(args: argparse.Namespace) -> int:
    params = {"all": 1 if args.all else None, "user": args.user, "device_type": args.device_type}
    items = list(make_client(args).paginate("/queue/scores", params))
    if args.json:
        print_json(items)
    else:
        table(items, [("USER", "user"), ("DEVICE TYPE", "device_type"), ("SCORE", lambda r: f"{r['score']:.4f}"),
                      ("HOLDS NOW", "held_devices"),
                      ("WEIGHTED", lambda r: f"{r['held']:g}")], empty="(no usage yet)")
    return 0


def cmd_panel(args: argparse.Namespace) -> int:
    doc = make_client(args).get("/queue/panel")
    if args.json:
        print_json(doc)
        return 0
    out("mine:")
    table(doc.get("mine", []), [("KIND", "kind"), ("DEVICE TYPE", "device_type"), ("RUNNING", "running"),
                                ("QUEUED", "queued"), ("DEVICES", "devices"), ("GAP", "gap")],
          empty="(nothing running or queued)")
    out("cluster:")
    table(doc.get("cluster", []), [("DEVICE TYPE", "device_type"), ("TOTAL", "total"), ("OCCUPIED", "occupied"),
                                   ("FREE", "free"), ("GAP", "gap")], empty="(no devices)")
    return 0


def register(root: Any) -> None:
    p = root.add_parser(
        "queue", help="the queue: positions, reasons, estimates; reorder, pin, priority, scores",
        description="Queued jobs in queue order (pool/device type/kind), with position, reason and estimated "
                    "start. Subcommands manage the queue.", formatter_class=Formatter,
        epilog=examples("ti queue", "ti queue --all --json", "ti queue move 42 --top",
                        "ti queue pin 42            # admins", "ti queue priority 42 500  # admins",
                        "ti queue scores --all", "ti queue panel"))
    add_global_options(p, suppress=True)
    p.add_argument("--all", action="store_true", help="everyone's queued jobs (needs jobs:view-all)")
    p.add_argument("--vc", metavar="VC", help="one virtual cluster's jobs, * for all (default: my current VC)")
    add_json(p)
    p.set_defaults(func=cmd_queue)
    sub = p.add_subparsers(title="commands", metavar="COMMAND")
    c = command(sub, "list", cmd_queue, "queued jobs in queue order (same as plain `ti queue`)",
                examples("ti queue list --all"), aliases=["ls"])
    c.add_argument("--all", action="store_true", help="everyone's queued jobs (needs jobs:view-all)")
    c.add_argument("--vc", metavar="VC", help="one virtual cluster's jobs, * for all (default: my current VC)")
    add_json(c)
    c = command(sub, "move", cmd_move, "reorder my queued jobs inside their queue (I keep the same slots)",
                examples("ti queue move 42 --top", "ti queue move 42 --before 40"))
    c.add_argument("job", metavar="JOB", help="job id or name")
    where = c.add_mutually_exclusive_group(required=True)
    where.add_argument("--top", action="store_true", help="first of my jobs in its queue")
    where.add_argument("--bottom", action="store_true", help="last of my jobs in its queue")
    where.add_argument("--before", type=int, metavar="ID", help="right before my queued job ID")
    where.add_argument("--after", type=int, metavar="ID", help="right after my queued job ID")
    add_json(c)
    for name, fn, what in (("pin", cmd_pin, "pin a queued job to the front of its queue (admins; a later pin "
                                            "goes first)"),
                           ("unpin", cmd_unpin, "remove a pin (admins)"),
                           ("cancel", cmd_cancel, "cancel a queued job (mine; anyone's for admins)")):
        c = command(sub, name, fn, what, examples(f"ti queue {name} 42"))
        c.add_argument("job", metavar="JOB", help="job id or name")
        add_json(c)
    c = command(sub, "priority", cmd_priority, "set a job's priority, 1-1000, default 100 (admins)",
                examples("ti queue priority 42 500"))
    c.add_argument("job", metavar="JOB", help="job id or name")
    c.add_argument("priority", type=int, metavar="N", help="1-1000; higher goes first and may preempt")
    add_json(c)
    c = command(sub, "scores", cmd_scores, "usage scores (lower goes first); mine, or everyone's with --all",
                examples("ti queue scores", "ti queue scores --all --device-type A100"))
    c.add_argument("--all", action="store_true", help="every user's scores (needs jobs:view-all)")
    c.add_argument("--user", help="one user's scores")
    c.add_argument("--device-type", dest="device_type", help="one device type")
    add_json(c)
    c = command(sub, "panel", cmd_panel, "resource panel: my running/queued/devices/gap; the cluster's",
                examples("ti queue panel --json"))
    add_json(c)


__all__ = ["QUEUE_COLUMNS", "register"]
