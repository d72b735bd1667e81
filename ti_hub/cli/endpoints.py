"""`ti job tensorboard`, `ti job port`, `ti job ssh` and `ti job metrics`: a running job's endpoints (JOB6,
docs/user-guide.md "Endpoints") and resource use."""

from __future__ import annotations

import argparse
import urllib.parse
from collections.abc import Mapping
from typing import Any

from ..backends.metrics import size
from .client import TiClient, quote
from .common import JOB_HELP, add_json, command, examples
from .config import make_client
from .output import err, out, print_json, table


def absolute(client: TiClient, path: str) -> str:
    """The API answers paths on the hub (they hold the hub's base URL): the hub's origin makes them links."""
    parts = urllib.parse.urlsplit(client.url)
    return f"{parts.scheme}://{parts.netloc}{path}"


def endpoint_lines(client: TiClient, job: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(what, URL) for `ti job show`: each open port (instance 0) and each running TensorBoard."""
    rows = [(f"port {p}", absolute(client, url)) for p, url in (job.get("endpoint_urls") or {}).items()]
    rows += [(f"tensorboard {t.get('logdir')}", absolute(client, t["url"])) for t in job.get("tensorboards") or []]
    return rows


def cmd_tensorboard(args: argparse.Namespace) -> int:
    client = make_client(args)
    path = f"/jobs/{quote(args.job)}/tensorboard"
    if args.stop:
        done = client.delete(path, params={"logdir": args.logdir})
        out(f"stopped {done.get('stopped', 0)} TensorBoard(s) of {args.job}")
        return 0
    if not args.logdir:
        items = (client.get(path) or {}).get("items", [])
        if args.json:
            print_json(items)
        elif not items:
            out("(no TensorBoard running; start one with --logdir PATH)")
        for t in [] if args.json else items:
            out(f"{t['logdir']}  {absolute(client, t['url'])}")
        return 0
    tb = client.post(path, {"logdir": args.logdir})
    if args.json:
        print_json({**tb, "url": absolute(client, tb["url"])})
    else:
        out(absolute(client, tb["url"]))
    return 0


def cmd_port(args: argparse.Namespace) -> int:
    client = make_client(args)
    job = client.post(f"/jobs/{quote(args.job)}/ports", {"port": args.port})
    if args.json:
        print_json(job)
        return 0
    url = (job.get("endpoint_urls") or {}).get(str(args.port))
    out(absolute(client, url) if url else f"port {args.port} added to {args.job}")
    return 0


def cmd_ssh(args: argparse.Namespace) -> int:
    client = make_client(args)
    job = client.post(f"/jobs/{quote(args.job)}/ssh", {"enabled": args.on})
    if args.json:
        print_json(job)
    elif args.on:
        out(f"SSH is on for {job['name']}; `ti ssh-command {job['name']}` prints the ssh command")
    else:
        out(f"SSH is off for {job['name']} (sessions already open go on)")
    return 0


def _gpus(m: Mapping[str, Any]) -> str:
    gpus = m.get("gpus")
    if gpus is None:
        return "-"
    return " ".join(f"{g['index']}:{g.get('utilization_percent', '?')}%/{g.get('memory_used_mib', '?')}MiB"
                    for g in gpus) or "-"


def _io(t: Mapping[str, Any] | None, one: str, other: str) -> str:
    """``1.2 MiB/s / 0 B/s (8.0 MiB / 12 B)``: rates now, totals so far."""
    if not t:
        return "-"
    return (f"{size(t[one + '_per_s'])}/s / {size(t[other + '_per_s'])}/s "
            f"({size(t[one])} / {size(t[other])})")


def cmd_metrics(args: argparse.Namespace) -> int:
    doc = make_client(args).get(f"/jobs/{quote(args.job)}/metrics") or {}
    if args.json:
        print_json(doc)
        return 0
    if doc.get("note"):
        err(doc["note"])
    table(doc.get("instances") or [], [
        ("INST", "instance"),
        ("CPU (cores)", lambda m: "-" if m.get("cpu_cores") is None else f"{m['cpu_cores']:.2f}"),
        ("MEMORY", lambda m: "-" if m.get("memory_bytes") is None else f"{int(m['memory_bytes']) >> 20} MiB"),
        ("GPU (util/memory)", _gpus),
        ("DISK (read/write)", lambda m: _io(m.get("disk"), "read_bytes", "write_bytes")),
        ("NETWORK (in/out)", lambda m: _io(m.get("network"), "rx_bytes", "tx_bytes")),
        ("NOTE", "note"),
    ], empty="(no instance running)")
    return 0


def register(sub: Any) -> None:
    p = command(sub, "tensorboard", cmd_tensorboard,
                "TensorBoard for a log directory of a job's volumes (jobs submitted with --endpoint "
                "tensorboard); prints its URL",
                examples("ti job tensorboard mnist --logdir /mnt/out/tb", "ti job tensorboard mnist",
                         "ti job tensorboard mnist --stop"))
    p.add_argument("job", metavar="JOB", help=JOB_HELP)
    p.add_argument("--logdir", metavar="PATH", help="a directory inside one of the job's volume mounts; without it: "
                                                    "list the job's running TensorBoards")
    p.add_argument("--stop", action="store_true", help="stop the job's TensorBoard (of --logdir, else all)")
    add_json(p)

    p = command(sub, "port", cmd_port, "open one more interactive port (40000-49999) on a running job",
                examples("ti job port mnist 40002"))
    p.add_argument("job", metavar="JOB", help=JOB_HELP)
    p.add_argument("port", type=int, metavar="PORT")
    add_json(p)

    p = command(sub, "ssh", cmd_ssh, "turn SSH on (or off) for a running job of yours",
                examples("ti job ssh mnist --on", "ti job ssh mnist --off"))
    p.add_argument("job", metavar="JOB", help=JOB_HELP)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--on", action="store_true", help="let your keys in (ssh -p PORT USER+JOB@HUB)")
    which.add_argument("--off", action="store_true", help="refuse new logins")
    add_json(p)

    p = command(sub, "metrics", cmd_metrics,
                "a running job's resource use now, per instance: CPU cores busy, memory, GPU utilization and memory, "
                "disk I/O and network (bytes/s now, totals so far)",
                examples("ti job metrics mnist", "ti job metrics ddp-train --json"))
    p.add_argument("job", metavar="JOB", help=JOB_HELP)
    add_json(p)
