"""`ti job ...`: list, show, logs, kill/pause/resume, clone, wait (submit lives in submit.py)."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Mapping
from typing import Any

from . import endpoints, submit
from .client import quote
from .common import JOB_HELP, add_json, command, examples, group
from .config import make_client
from .output import cell, details, err, fmt_duration, out, parse_time, pick, print_json, table
from .watch import follow_logs, progress, queue_position, watch_job

STATUSES = ("created", "queued", "scheduling", "running", "pausing", "paused", "killing",
            "killed", "completed", "failed", "error", "stopped")


def plan_of(job: Mapping[str, Any]) -> Any:
    plan = pick(job, "plan", "plan_name", "spec.plan", "plan_id")
    if isinstance(plan, Mapping):
        plan = plan.get("name") or plan.get("id")
    return plan


def plan_names(client: Any) -> dict[Any, str]:
    """Plan id -> name, so that listings show the names users pick plans by (jobs keep only the id).
    Empty when the plans cannot be read: the ids are shown then."""
    try:
        page = client.get("/plans", params={"limit": 500}) or {}
    except Exception:  # a listing must not fail for its decoration
        return {}
    items = page.get("items", []) if isinstance(page, Mapping) else page
    return {p["id"]: p["name"] for p in items if isinstance(p, Mapping) and "id" in p and "name" in p}


def with_plan_names(items: list, names: Mapping[Any, str]) -> list:
    return [{**j, "plan": names[j["plan_id"]]} if isinstance(j, Mapping) and j.get("plan_id") in names
            and not j.get("plan") else j for j in items]


def instances_of(job: Mapping[str, Any]) -> Any:
    if job.get("instances") is not None and not isinstance(job.get("instances"), list):
        return job["instances"]
    if job.get("workers") is None:
        return None
    return int(job.get("workers") or 0) + int(job.get("ps") or 0)


def runtime_of(job: Mapping[str, Any]) -> str:
    start = parse_time(job.get("started_at"))
    if start is None:
        return ""
    end = parse_time(job.get("finished_at")) or dt.datetime.now(dt.timezone.utc)
    return fmt_duration(max(0, (end - start).total_seconds()))


def status_of(job: Mapping[str, Any]) -> str:
    status = str(job.get("status") or "")
    if status == "queued":
        pos = queue_position(job)
        return f"queued ({pos.replace('position ', '#')})" if pos else status
    return status


def job_columns(with_owner: bool) -> list:
    cols: list = [("ID", "id"), ("NAME", "name")]
    if with_owner:
        cols.append(("OWNER", "owner"))
    cols += [
        ("KIND", "kind"),
        ("STATUS", status_of),
        ("PLAN", plan_of),
        ("INST", instances_of),
        ("CREATED", "created_at"),
        ("RUNTIME", runtime_of),
    ]
    return cols


# -- handlers -----------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    client = make_client(args)
    params = {"status": args.status, "kind": args.kind, "name": args.name, "owner": args.owner,
              "all": 1 if args.all else None, "limit": args.limit, "offset": args.offset}
    page = client.get("/jobs", params=params) or {}
    items = page.get("items", []) if isinstance(page, Mapping) else list(page)
    if args.json:
        print_json(items)
        return 0
    table(with_plan_names(items, plan_names(client) if items else {}), job_columns(bool(args.all or args.owner)),
          empty="(no jobs)")
    total = page.get("total") if isinstance(page, Mapping) else None
    offset = args.offset or 0
    if total is not None and offset + len(items) < total:
        err(f"(showing {offset + 1}-{offset + len(items)} of {total}; see more with --limit/--offset)")
    return 0


SHOW_ORDER = ("id", "name", "display_name", "owner", "kind", "strategy", "status", "reason", "queue",
              "plan", "plan_id", "pool", "image", "command", "workers", "ps", "instances", "device_type", "devices_per_instance",
              "cpu_per_instance", "memory_mib_per_instance", "shm_mib", "env", "secret_env_names", "volumes", "ports",
              "endpoints", "credential", "preemptible", "priority", "estimated_duration", "on_overrun", "exit_code", "description",
              "created_at", "queued_at", "started_at", "finished_at")


def fmt_volume(v: Any) -> str:
    if not isinstance(v, Mapping):
        return cell(v)
    text = f"{pick(v, 'volume', 'name', 'volume_id', default='?')}:{v.get('mount_path', '?')}"
    return text + (":ro" if v.get("read_only") else "")


def show_job(job: Mapping[str, Any]) -> None:
    flat = dict(job)
    spec = flat.pop("spec", None)
    events = flat.pop("events", None)
    if isinstance(spec, Mapping):  # fields kept only in the submission document
        for k, v in spec.items():
            flat.setdefault(k, v)
    if flat.get("queue") is not None:
        flat["queue"] = queue_position(flat, with_queue=True)
    if isinstance(flat.get("plan"), Mapping):
        flat["plan"] = plan_of(flat)
    if isinstance(flat.get("env"), Mapping):
        flat["env"] = " ".join(f"{k}={v}" for k, v in flat["env"].items())
    if isinstance(flat.get("volumes"), list):
        flat["volumes"] = " ".join(fmt_volume(v) for v in flat["volumes"])
    if flat.get("estimated_duration") is not None:
        flat["estimated_duration"] = fmt_duration(flat["estimated_duration"])
    if flat.get("started_at"):
        flat["runtime"] = runtime_of(flat)
    details(flat, SHOW_ORDER + ("runtime",), skip=("backend_state", "endpoint_urls", "tensorboards", "ports_added"))
    if isinstance(events, list) and events:
        out("\nevents:")
        table(events, [("AT", "at"), ("STATUS", "status"), ("MESSAGE", "message")])


def cmd_show(args: argparse.Namespace) -> int:
    client = make_client(args)
    job = client.get(f"/jobs/{quote(args.job)}")
    if args.json:
        print_json(job)
    else:
        show_job(with_plan_names([job], plan_names(client))[0])
        links = endpoints.endpoint_lines(client, job)
        if links:
            out("\nendpoints:")
            width = max(len(w) for w, _ in links)
            for what, url in links:  # whole URLs (a table would clip them)
                out(f"  {what.ljust(width)}  {url}")
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    follow_logs(make_client(args), args.job, instance=args.instance, tail=args.tail, follow=args.follow,
                raw=args.raw)
    return 0


def _action(verb: str):
    def handler(args: argparse.Namespace) -> int:
        job = make_client(args).post(f"/jobs/{quote(args.job)}/{verb}")
        if args.json:
            print_json(job)
        elif isinstance(job, Mapping) and job.get("status"):
            out(f"{job.get('name', args.job)}: {progress(job)}")
        else:
            out(f"{args.job}: {verb} requested")
        return 0

    return handler


def cmd_clone(args: argparse.Namespace) -> int:
    job = make_client(args).post(f"/jobs/{quote(args.job)}/clone", {"name": args.name})
    if args.json:
        print_json(job)
    else:
        out(f"cloned {args.job} into job {job.get('id', '?')} {job.get('name', args.name)} "
            f"({job.get('status', 'created')})")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    make_client(args).delete(f"/jobs/{quote(args.job)}")
    out(f"{args.job}: draft deleted")
    return 0


def cmd_support(args: argparse.Namespace) -> int:
    alert = make_client(args).post(f"/jobs/{quote(args.job)}/support", {"message": args.message})
    if args.json:
        print_json(alert)
    else:
        out(f"support request {alert.get('id', '?')} sent to the admins about job {args.job}, with its state and "
            f"the last lines of its log; their answer: `ti alert list --all`")
    return 0


def cmd_wait(args: argparse.Namespace) -> int:
    return watch_job(make_client(args), args.job, timeout=args.wait_timeout)


# -- parsers ------------------------------------------------------------------------------
def register(root: Any) -> None:
    sub = group(root, "job", "submit and manage training jobs", examples(
        "ti job submit --name mnist --plan demo-gpu-1 --image pytorch-gpu -- python train.py",
        "ti job list --status running",
        "ti job logs mnist -f",
        "ti job wait mnist && echo done",
    ))
    submit.register(sub)

    p = command(sub, "list", cmd_list, "list jobs (mine; --all for everyone's)", examples(
        "ti job list", "ti job list --status queued,running --kind distributed",
        "ti job list --all --limit 200", "ti job list --json | jq '.[].name'",
    ), aliases=["ls"])
    p.add_argument("--status", metavar="STATUS[,STATUS]",
                   help=f"only jobs in these states: {', '.join(STATUSES)}")
    p.add_argument("--kind", choices=["single", "distributed", "workspace"], help="only this kind")
    p.add_argument("--name", metavar="TEXT", help="only jobs whose name contains TEXT")
    p.add_argument("--owner", help="only this user's jobs (needs jobs:view-all: their waiting jobs, as summaries)")
    p.add_argument("--all", action="store_true",
                   help="everyone's jobs (needs jobs:view-all: others' waiting jobs, as summaries; all with "
                        "jobs:manage-all)")
    p.add_argument("--limit", type=int, metavar="N", help="at most N jobs (1-500, default 50)")
    p.add_argument("--offset", type=int, metavar="N", help="skip the first N jobs")
    add_json(p)

    p = command(sub, "show", cmd_show, "show a job's details", examples("ti job show mnist", "ti job show 42 --json"))
    p.add_argument("job", metavar="JOB", help=JOB_HELP)
    add_json(p)

    p = command(sub, "logs", cmd_logs, "print a job's log", examples(
        "ti job logs mnist", "ti job logs mnist -f", "ti job logs ddp-train --instance 1 --tail 100",
        "ti job logs mnist --raw > mnist.log",
    ), description="print a job's log, without escape sequences and control characters other than newline\n"
                   "and tab: the job's owner wrote them, and they could retitle or clear your terminal\n"
                   "(--raw keeps them)")
    p.add_argument("job", metavar="JOB", help=JOB_HELP)
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new output until the job ends")
    p.add_argument("--instance", type=int, metavar="N", help="which instance of a distributed job (default 0)")
    p.add_argument("--tail", type=int, metavar="N", help="start with only the last N lines")
    p.add_argument("--raw", action="store_true",
                   help="print the log byte for byte, control sequences included (for piping to a file)")

    for verb, what in (("start", "start a draft (ti job submit --draft): checked again, then queued"),
                       ("kill", "stop a job for good"),
                       ("stop", "stop a job gracefully: SIGTERM, then SIGKILL after the hub's grace (ends stopped)"),
                       ("pause", "pause a running job (frees its devices)"),
                       ("resume", "resume a paused job")):
        p = command(sub, verb, _action(verb), what, examples(f"ti job {verb} mnist", f"ti job {verb} 42"))
        p.add_argument("job", metavar="JOB", help=JOB_HELP)
        add_json(p)

    p = command(sub, "delete", cmd_delete, "delete a draft (its name is free again)",
                examples("ti job delete mnist-draft"))
    p.add_argument("job", metavar="JOB", help=JOB_HELP)

    p = command(sub, "support", cmd_support, "ask the admins for help about a finished job of mine", examples(
        'ti job support mnist -m "it fails with CUDA out of memory on every node"'),
        description="ask the admins for help about a finished job of mine: the message goes with the job's\n"
                    "state, exit reason, plan, image and the last 50 lines of its log (secret values\n"
                    "scrubbed), as an alert the admins answer; the answer shows in `ti alert list --all`")
    p.add_argument("job", metavar="JOB", help=JOB_HELP)
    p.add_argument("-m", "--message", required=True, metavar="TEXT", help="what to ask the admins")
    add_json(p)

    p = command(sub, "clone", cmd_clone, "submit a copy of a job under a new name",
                examples("ti job clone mnist --name mnist-2"))
    p.add_argument("job", metavar="JOB", help=JOB_HELP)
    p.add_argument("--name", required=True, help="the new job's name")
    add_json(p)

    endpoints.register(sub)

    p = command(sub, "wait", cmd_wait, "wait until a job ends, printing its state changes", examples(
        "ti job wait mnist", "ti job wait 42 --timeout 2h || echo 'not completed'",
    ) + "\n\nexit codes: 0 completed; 4 failed, killed or error; 5 still running after --timeout",
                timeout_option=False)
    p.add_argument("job", metavar="JOB", help=JOB_HELP)
    p.add_argument("--timeout", dest="wait_timeout", type=submit.duration, metavar="DURATION",
                   help="give up after this long (seconds, or 30m, 2h)")
