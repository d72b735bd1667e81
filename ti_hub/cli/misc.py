"""`ti queue`, `ti quota`, `ti plan list` and `ti template ...`."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from .client import quote
from .common import add_json, command, examples, group, read_json_file, resolve_id
from .config import UsageError, make_client
from .jobs import plan_of
from .output import cell, details, fmt_mib, fmt_time, out, pick, print_json, render_any, table

# -- queue --------------------------------------------------------------------------------


def _jobs_in(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, Mapping):
        for key in ("jobs", "items", "queued"):
            if isinstance(value.get(key), list):
                return value[key]
    return []


def queue_rows(doc: Any) -> list[dict[str, Any]]:
    """Queued jobs from /queue, whether a list, a page, or jobs grouped per queue."""
    rows: list[dict[str, Any]] = []

    def add(jobs: list[Any], queue: Any = None) -> None:
        for j in jobs:
            if isinstance(j, Mapping):
                rows.append({**j, "_queue": queue} if queue is not None else dict(j))

    if isinstance(doc, list):
        add(doc)
    elif isinstance(doc, Mapping):
        if isinstance(doc.get("items"), list) and not isinstance(doc.get("queues"), (list, dict)):
            add(doc["items"])
        else:
            queues = doc.get("queues", doc)
            if isinstance(queues, Mapping):
                for name, value in queues.items():
                    if isinstance(value, (list, Mapping)):
                        add(_jobs_in(value), name)
            elif isinstance(queues, list):
                for q in queues:
                    if isinstance(q, Mapping):
                        add(_jobs_in(q), pick(q, "name", "queue", "pool"))
    return rows


def _queue_name(r: Mapping[str, Any]) -> str:
    q = r.get("queue")
    if isinstance(q, Mapping):
        q = pick(q, "name", "queue", "pool")
    return cell(r.get("_queue") if r.get("_queue") is not None else (q if isinstance(q, str) else pick(r, "pool")))


def _position(r: Mapping[str, Any]) -> str:
    q = r.get("queue")
    if isinstance(q, Mapping) and q.get("position") is not None:
        return cell(q["position"])
    return cell(pick(r, "position", "queue_position"))


def _estimate(r: Mapping[str, Any]) -> str:
    q = r.get("queue")
    return fmt_time(q["estimated_start"]) if isinstance(q, Mapping) and q.get("estimated_start") else "?"


QUEUE_COLUMNS = [("QUEUE", _queue_name), ("POS", _position), ("ID", "id"), ("NAME", "name"), ("OWNER", "owner"),
                 ("PRIO", "priority"), ("PLAN", plan_of), ("EST. START", _estimate), ("REASON", "reason")]


def cmd_queue(args: argparse.Namespace) -> int:
    client = make_client(args)
    doc = client.get("/queue", params={"all": 1 if args.all else None, "vc": getattr(args, "vc", None)})
    if args.json:
        print_json(doc)
        return 0
    rows = queue_rows(doc)
    if rows:  # jobs carry their plan's id: show its name (a queued job's plan can run, so it is listed)
        names = {p["id"]: p["name"] for p in client.paginate("/plans", {"vc": "*"})}
        rows = [{**r, "plan_name": names.get(r.get("plan_id"), r.get("plan_id"))} for r in rows]
    table(rows, QUEUE_COLUMNS, empty="(the queue is empty)")
    return 0


def cmd_quota(args: argparse.Namespace) -> int:
    doc = make_client(args).get("/quota")
    if args.json:
        print_json(doc)
    else:
        render_any(doc, prefer=("kind", "device_type", "devices", "cpu", "memory_mib", "capacity_gib"))
    return 0


# -- plans --------------------------------------------------------------------------------
def _devices(p: Mapping[str, Any]) -> str:
    dtype, count = p.get("device_type"), p.get("device_count")
    if not dtype or dtype == "cpu" or not count:
        return "-"
    return f"{count}x {dtype}"


PLAN_COLUMNS = [("ID", "id"), ("NAME", "name"), ("KINDS", "kinds"), ("DEVICES", _devices), ("CPU", "cpu"),
                ("MEMORY", lambda p: fmt_mib(p.get("memory_mib"))), ("SHM", lambda p: fmt_mib(p.get("shm_mib"))),
                ("RDMA", "rdma"), ("POOL", "pool"), ("DESCRIPTION", "description")]


def cmd_plan_list(args: argparse.Namespace) -> int:
    items = list(make_client(args).paginate("/plans", {"kind": args.kind, "vc": args.vc}))
    if args.json:
        print_json(items)
    else:
        table(items, PLAN_COLUMNS, empty="(no plans can run on this cluster)")
    return 0


# -- templates ----------------------------------------------------------------------------
SPEC_FIELDS = ("kind", "strategy", "workers", "ps", "plan", "image", "command", "env", "volumes", "ports",
               "endpoints", "credential", "preemptible", "estimated_duration", "description")


def spec_from_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """The submission fields of a job (its `spec` first, then its top-level fields), minus its name.

    Empty values are left out, and so are the fields its kind does not take (workers of a single job).
    """
    src = job.get("spec") if isinstance(job.get("spec"), Mapping) else {}
    spec: dict[str, Any] = {}
    for field in SPEC_FIELDS:
        value = src.get(field) if src.get(field) is not None else job.get(field)
        if field == "plan":
            value = src.get("plan") or plan_of(job)
        if value is not None and value != "" and value != [] and value != {}:
            spec[field] = value
    if spec.get("kind") != "distributed":
        for field in ("strategy", "workers", "ps"):
            spec.pop(field, None)
    elif spec.get("strategy") != "ps":
        spec.pop("ps", None)
    if isinstance(spec.get("volumes"), list):
        spec["volumes"] = [
            {"volume": pick(m, "volume", "volume_id", "name"), "mount_path": m.get("mount_path"),
             "read_only": bool(m.get("read_only"))} if isinstance(m, Mapping) else m
            for m in spec["volumes"]
        ]
    return spec


def cmd_template_list(args: argparse.Namespace) -> int:
    items = list(make_client(args).paginate("/templates"))
    if args.json:
        print_json(items)
    else:
        table(items, [("ID", "id"), ("NAME", "name"), ("SCOPE", "scope"), ("GROUP", "group"), ("OWNER", "owner"),
                      ("CREATED", "created_at")], empty="(no templates)")
    return 0


def cmd_template_save(args: argparse.Namespace) -> int:
    if args.scope == "team" and not args.group:
        raise UsageError("a team template needs --group GROUP")
    client = make_client(args)
    if args.from_job:
        spec = spec_from_job(client.get(f"/jobs/{quote(args.from_job)}"))
    else:
        spec = read_json_file(args.from_file, "template spec")
        if isinstance(spec, Mapping) and isinstance(spec.get("spec"), Mapping):
            spec = spec["spec"]  # a template document as `ti template show --json` prints it
        if not isinstance(spec, Mapping):
            raise UsageError(f"template spec {args.from_file} must be a JSON object")
    body: dict[str, Any] = {"name": args.name, "scope": args.scope, "spec": dict(spec)}
    if args.group:
        body["group"] = args.group
    doc = client.post("/templates", body)
    if args.json:
        print_json(doc)
    else:
        out(f"saved template {doc.get('id', '?')} {doc.get('name', args.name)} ({args.scope}"
            f"{' ' + args.group if args.group else ''})")
    return 0


def cmd_template_show(args: argparse.Namespace) -> int:
    client = make_client(args)
    doc = client.get(f"/templates/{resolve_id(client, '/templates', args.template, 'template')}")
    if args.json:
        print_json(doc)
        return 0
    details({k: v for k, v in doc.items() if k != "spec"}, ("id", "name", "scope", "group", "owner", "created_at"))
    if doc.get("spec") is not None:
        out("spec:")
        out(json.dumps(doc["spec"], indent=2))
    return 0


def cmd_template_delete(args: argparse.Namespace) -> int:
    client = make_client(args)
    client.delete(f"/templates/{resolve_id(client, '/templates', args.template, 'template')}")
    out(f"deleted template {args.template}")
    return 0


def register(root: Any) -> None:
    p = command(root, "quota", cmd_quota, "my compute and storage quota, with usage", examples("ti quota"))
    add_json(p)

    sub = group(root, "plan", "resource plans (what each instance of a job gets)",
                examples("ti plan list --kind distributed"))
    p = command(sub, "list", cmd_plan_list, "plans that can run on this cluster", examples(
        "ti plan list", "ti plan list --kind single --json"), aliases=["ls"])
    p.add_argument("--kind", choices=["single", "distributed", "workspace"], help="only plans for this kind")
    p.add_argument("--vc", metavar="VC", help="plans of this virtual cluster, * for all (default: my current one)")
    add_json(p)

    sub = group(root, "template", "saved job configurations, for me or a team", examples(
        "ti template save ddp-base --scope user --from-job mnist-ddp",
        "ti job submit --template ddp-base --name run-9 -- python train.py",
    ))
    p = command(sub, "list", cmd_template_list, "list the templates I can use", examples("ti template list"),
                aliases=["ls"])
    add_json(p)
    p = command(sub, "save", cmd_template_save, "save a template from a job or a JSON file", examples(
        "ti template save ddp-base --scope user --from-job mnist-ddp",
        "ti template save lab-default --scope team --group lab --from-file spec.json",
    ))
    p.add_argument("name", metavar="NAME")
    p.add_argument("--scope", choices=["user", "team"], default="user", help="user (default) or team")
    p.add_argument("--group", metavar="GROUP", help="scope team: the group that may use it")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--from-job", metavar="JOB", help="copy the configuration of this job (ID or NAME)")
    src.add_argument("--from-file", metavar="SPEC.json", help="a JSON object of submission fields (- for stdin)")
    add_json(p)
    p = command(sub, "show", cmd_template_show, "a template and its fields", examples("ti template show ddp-base"))
    p.add_argument("template", metavar="NAME|ID")
    add_json(p)
    p = command(sub, "delete", cmd_template_delete, "delete a template", examples("ti template delete ddp-base"),
                aliases=["rm"])
    p.add_argument("template", metavar="NAME|ID")
