"""`ti workspace`: my workspaces' leases on their devices (WS6; the idle policy: ti_hub/service/idlepolicy.py)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .client import quote
from .common import add_json, command, examples, group
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


def register(root: Any) -> None:
    sub = group(root, "workspace", "my workspaces: renew the lease on their devices", examples(
        "ti workspace renew my-desk"), aliases=["ws"])
    p = command(sub, "renew", cmd_renew,
                "renew a running workspace's lease: its devices count as in use from now on (the idle policy "
                "warns about workspaces whose devices sit idle, then stops them unless the lease is renewed)",
                examples("ti workspace renew my-desk", "ti workspace renew            # inside the workspace",
                         "ti workspace renew my-desk --user alice   # admins (jobs:manage-all)"))
    p.add_argument("workspace", metavar="NAME", nargs="?",
                   help="the workspace (default: the one this runs in)")
    p.add_argument("--user", metavar="USER", help="another user's workspace (needs jobs:manage-all)")
    add_json(p)
