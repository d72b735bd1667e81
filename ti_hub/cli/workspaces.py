"""`ti workspace`: my workspaces' leases on their devices (WS6; the idle policy: ti_hub/tasks/idlepolicy.py), and
a reset of a stopped one to a fresh state (WS7)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .client import quote
from .common import add_json, command, confirm, examples, group
from .config import UsageError, make_client
from .output import out, print_json

DEFAULT_NAME = "default"  # the TiHub name of a user's default (unnamed) server, as ti_hub/spawner/client.py


def this_workspace() -> str | None:
    """The workspace this command runs in, if any (the hub sets these in every server)."""
    if "JUPYTERHUB_USER" not in os.environ:
        return None
    return os.environ.get("JUPYTERHUB_SERVER_NAME") or DEFAULT_NAME


def cmd_renew(args: argparse.Namespace) -> int:
    name = args.workspace or this_workspace()
    if not name:
        raise UsageError("which workspace? name it (outside a workspace there is no default)")
    client = make_client(args)
    owner = args.user or (client.get("/me") or {}).get("name", "")
    lease = client.post(f"/workspaces/{quote(owner)}/{quote(name)}/lease")
    if args.json:
        print_json(lease)
        return 0
    cleared = " (its idle warning is withdrawn)" if lease.get("cleared_alert") else ""
    out(f"{owner}/{name}: lease renewed at {lease.get('renewed_at')} for {', '.join(lease.get('devices') or [])}"
        f"{cleared}")
    return 0


def cmd_reset(args: argparse.Namespace) -> int:
    confirm(f"Reset workspace {args.workspace} to a fresh state? Its /tmp, local scratch volumes and the records "
            "and log of its past runs are removed; its configuration, volumes and your home stay", args.yes)
    client = make_client(args)
    owner = (client.get("/me") or {}).get("name", "")
    done = client.post(f"/workspaces/{quote(owner)}/{quote(args.workspace)}/reset")
    if args.json:
        print_json(done)
        return 0
    removed = "; ".join(done.get("removed") or []) or "nothing of its own was left"
    out(f"{owner}/{args.workspace}: reset at {done.get('reset_at')} (removed: {removed}); start it as usual")
    return 0


def register(root: Any) -> None:
    sub = group(root, "workspace", "my workspaces: renew the lease on their devices, reset a stopped one", examples(
        "ti workspace renew my-desk", "ti workspace reset my-desk --yes"), aliases=["ws"])
    p = command(sub, "reset", cmd_reset,
                "reset a stopped workspace to a fresh state, keeping its configuration, its volumes and your home "
                "(for a workspace that no longer starts or cannot be entered; see the user guide for what goes)",
                examples("ti workspace reset my-desk", "ti workspace reset my-desk --yes   # without asking"))
    p.add_argument("workspace", metavar="NAME", help="the workspace (stopped)")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    add_json(p)
    p = command(sub, "renew", cmd_renew,
                "renew a running workspace's lease: its devices count as in use from now on (the idle policy "
                "warns about workspaces whose devices sit idle, then stops them unless the lease is renewed)",
                examples("ti workspace renew my-desk", "ti workspace renew            # inside the workspace",
                         "ti workspace renew my-desk --user alice   # admins (jobs:manage-all)"))
    p.add_argument("workspace", metavar="NAME", nargs="?",
                   help="the workspace (default: the one this runs in)")
    p.add_argument("--user", metavar="USER", help="another user's workspace (needs jobs:manage-all)")
    add_json(p)
