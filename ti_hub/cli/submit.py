"""`ti job submit`: flags to the submission document of POST /jobs (docs/api.md)."""

from __future__ import annotations

import argparse
import os
import re
import shlex
from typing import Any

from ..domain import guidance
from .common import add_json, command, examples, read_json_file, wrap
from .config import UsageError, make_client
from .output import out, print_json
from .watch import watch_job

_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(value: str) -> int:
    """Seconds from "3600", "90s", "30m", "2h", "1h30m" or "1d"."""
    v = value.strip().lower()
    if v.isascii() and v.isdigit():
        return int(v)
    pos, total = 0, 0.0
    for m in _DURATION_RE.finditer(v):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not v or pos != len(v):
        raise argparse.ArgumentTypeError(f"{value!r} is not a duration (seconds, or like 30m, 2h, 1h30m)")
    return int(round(total))


def env_pair(value: str) -> tuple[str, str]:
    key, sep, val = value.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{value!r} is not KEY=VALUE")
    return key, val


def secret_env_pair(value: str) -> tuple[str, str]:
    """NAME=VALUE, or NAME alone: the value of NAME in this shell's environment, so that it never shows in the
    command line (shell history, `ps`)."""
    key, sep, val = value.partition("=")
    if not key:
        raise argparse.ArgumentTypeError(f"{value!r} is not NAME or NAME=VALUE")
    if not sep:
        if key not in os.environ:
            raise argparse.ArgumentTypeError(f"{key} is not set in this environment (give NAME=VALUE, or export it)")
        val = os.environ[key]
    return key, val


def volume_ref(value: Any) -> Any:
    return int(value) if isinstance(value, str) and value.isascii() and value.isdigit() else value


def volume_mount(value: str) -> dict[str, Any]:
    """NAME:/mnt/path[:ro|:rw] (NAME may be OWNER/NAME or an id)."""
    parts = value.split(":")
    if len(parts) == 3 and parts[2] in ("ro", "rw"):
        ro = parts[2] == "ro"
        parts = parts[:2]
    else:
        ro = False
    if len(parts) != 2 or not parts[0] or not parts[1].startswith("/"):
        raise argparse.ArgumentTypeError(f"{value!r} is not VOLUME:/mount/path[:ro]")
    return {"volume": volume_ref(parts[0]), "mount_path": parts[1], "read_only": ro}


def port_list(value: str) -> list[int]:
    ports = []
    for p in value.split(","):
        p = p.strip()
        if not p:
            continue
        if not (p.isascii() and p.isdigit()) or len(p) > 5:
            raise argparse.ArgumentTypeError(f"{p!r} is not a port number")
        ports.append(int(p))
    return ports


ENDPOINTS = ("ssh", "tensorboard", "jupyter")  # as the API takes them (ops/jobspec.py; not imported: the CLI stays light)


def endpoint_list(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    for n in names:
        if n not in ENDPOINTS:
            raise argparse.ArgumentTypeError(f"{n!r} is not one of {', '.join(ENDPOINTS)}")
    return names


def _merge_unique(current: Any, extra: list[Any]) -> list[Any]:
    out = list(current or [])
    for item in extra:
        if item not in out:
            out.append(item)
    return out


def build_submission(args: argparse.Namespace) -> dict[str, Any]:
    """The POST /jobs body: --from-file first, then every flag given (unset flags are left out)."""
    body: dict[str, Any] = {}
    if args.from_file:
        spec = read_json_file(args.from_file, "job spec")
        if not isinstance(spec, dict):
            raise UsageError(f"job spec {args.from_file} must be a JSON object")
        body.update(spec)
    for field in ("name", "kind", "strategy", "workers", "ps", "image", "credential", "template",
                  "description", "preemptible", "estimated_duration", "on_overrun"):
        value = getattr(args, field)
        if value is not None:
            body[field] = value
    if args.plan is not None:
        body["plan"] = int(args.plan) if args.plan.isascii() and args.plan.isdigit() else args.plan
    if args.command:
        body["command"] = args.command[0] if len(args.command) == 1 else shlex.join(args.command)
    if args.env:
        env = dict(body.get("env") or {})
        env.update(dict(args.env))
        body["env"] = env
    if args.secret_env:
        secret = dict(body.get("secret_env") or {})
        secret.update(dict(args.secret_env))
        body["secret_env"] = secret
    if args.volume:
        mounts = {m["mount_path"] for m in args.volume}
        kept = [v for v in body.get("volumes") or [] if not (isinstance(v, dict) and v.get("mount_path") in mounts)]
        body["volumes"] = kept + args.volume
    if args.port:
        body["ports"] = _merge_unique(body.get("ports"), [p for group in args.port for p in group])
    if args.endpoint:
        body["endpoints"] = _merge_unique(body.get("endpoints"), [e for group in args.endpoint for e in group])
    if args.draft:
        body["draft"] = True
    return body


def report_submitted(args: argparse.Namespace, job: dict, body: dict):
    """Say what was submitted (the job as JSON with --json); returns how to refer to the job."""
    if args.json:
        print_json(job)
    elif body.get("draft"):
        out(f"saved draft {job.get('id', '?')} {job.get('name', body.get('name', ''))}: start it with "
            f"`ti job start {job.get('id', '?')}`, or delete it with `ti job delete {job.get('id', '?')}`")
    else:
        out(f"submitted job {job.get('id', '?')} {job.get('name', body.get('name', ''))} "
            f"({job.get('status', 'created')})")
        for warning in job.get("warnings") or []:  # e.g. the image is not public, or not run at all here
            out(f"note: {warning}")
    return job.get("id") or job.get("name") or body.get("name")


def cmd_submit(args: argparse.Namespace) -> int:
    body = build_submission(args)
    if not body.get("command") and not body.get("template"):
        raise UsageError("no command: give it after `--` (ti job submit --name N --plan P -- python train.py)")
    if args.draft and (args.wait or args.follow):
        raise UsageError("--draft saves the job without starting it: nothing to --wait for or --follow")
    client = make_client(args)
    job = client.post("/jobs", body)
    ref = report_submitted(args, job, body)
    if not (args.wait or args.follow):
        return 0
    return watch_job(client, ref, job, follow=args.follow, timeout=args.timeout_wait)


JOB_GUIDE = guidance.table("which kind of job (--kind, --strategy):", guidance.JOB_KINDS)  # DEV7
SUBMIT_EPILOG = wrap("""
    The command comes last, after `--`; several words are joined as a shell command line.
    --from-file reads a submission document (the JSON of POST /jobs); flags given here win.
    """) + "\n\n" + JOB_GUIDE + "\n\n" + examples(
    "ti job submit --name mnist --plan demo-gpu-1 --image pytorch-gpu -- python train.py --lr 0.1",
    "ti job submit --name ddp-train --kind distributed --workers 2 --plan demo-gpu-1 --image pytorch-gpu \\",
    "    --volume data:/mnt/data:ro --env EPOCHS=3 --port 40001 --endpoint tensorboard -- torchrun train.py",
    "ti job submit --from-file spec.json --name run-7 --wait",
    "ti job submit --template my-template --name run-8 -f",
    "ti job submit --name long --plan cpu-small --image python-cpu --estimated-duration 2h --preemptible -- ./run.sh",
    "WANDB_API_KEY=... ti job submit --name logged --plan cpu-small --image python-cpu --secret-env WANDB_API_KEY -- python train.py",
)


def register(sub: Any) -> None:
    p = command(sub, "submit", cmd_submit, "submit a training job", SUBMIT_EPILOG)
    p.add_argument("--name", help="job name: 4-63 of letters, digits, - and _ (unique per user)")
    p.add_argument("--kind", choices=["single", "distributed"], help="single (default) or distributed "
                   "(which suits what: below)")
    p.add_argument("--strategy", choices=["allreduce", "ps"], help="distributed: allreduce (default) or ps")
    p.add_argument("--workers", type=int, metavar="N", help="distributed: number of workers (at most 64)")
    p.add_argument("--ps", type=int, metavar="N", help="strategy ps: number of parameter servers")
    p.add_argument("--plan", metavar="PLAN", help="plan name or id (per-instance resources; see `ti plan list`)")
    p.add_argument("--image", metavar="IMAGE",
                   help="a public image name (`ti image list`) or an image address; the embedded platform (`ti-hub "
                        "start`) records it but does not run images: the job runs with that machine's own system "
                        "and Python")
    p.add_argument("--env", action="append", type=env_pair, metavar="KEY=VALUE",
                   help="environment variable (repeatable)")
    p.add_argument("--secret-env", action="append", type=secret_env_pair, metavar="NAME[=VALUE]",
                   help="secret environment variable (repeatable): stored encrypted, shown to nobody afterwards "
                        "(the job lists its name only); NAME alone takes the value from this shell's environment")
    p.add_argument("--volume", action="append", type=volume_mount, metavar="VOL:/mnt/PATH[:ro]",
                   help="mount a volume (NAME, OWNER/NAME or id; repeatable)")
    p.add_argument("--port", action="append", type=port_list, metavar="PORT[,PORT]",
                   help="interactive port 40000-49999 (repeatable or a comma list)")
    p.add_argument("--endpoint", action="append", type=endpoint_list, metavar="NAME[,NAME]",
                   help="ssh, tensorboard or jupyter (repeatable or a comma list); none unless asked: without "
                        "tensorboard, `ti job tensorboard` refuses the job; jupyter: a Jupyter server beside "
                        "instance 0's command, at the job's jupyter_url")
    p.add_argument("--credential", metavar="NAME",
                   help="registry credential for a private image (`ti credential list`)")
    p.add_argument("--preemptible", action=argparse.BooleanOptionalAction, default=None,
                   help="may be preempted by higher-priority work")
    p.add_argument("--estimated-duration", type=duration, metavar="DURATION",
                   help="expected run time: seconds, or 30m, 2h, 1h30m")
    p.add_argument("--on-overrun", choices=("alert", "stop"), default=None,
                   help="past --estimated-duration: alert (the default: an alert in its history, by email, in "
                        "`ti alert list`) or stop it")
    p.add_argument("--template", metavar="NAME", help="apply this template first; the fields given here win")
    p.add_argument("--description", metavar="TEXT", help="free text")
    p.add_argument("--from-file", metavar="SPEC.json",
                   help="read the submission document from a JSON file (- for stdin)")
    p.add_argument("--draft", action="store_true",
                   help="save the job without starting it (checked as a submission, no quota used); "
                        "`ti job start` queues it later")
    p.add_argument("--wait", action="store_true", help="wait until the job ends; exit 0 if completed, 4 otherwise")
    p.add_argument("--wait-timeout", dest="timeout_wait", type=duration, metavar="DURATION",
                   help="with --wait: give up after this long (exit 5)")
    p.add_argument("-f", "--follow", action="store_true", help="stream the job's log until it ends")
    add_json(p)
    p.add_argument("command", nargs="*", metavar="-- COMMAND", help="the command to run, after `--`")
