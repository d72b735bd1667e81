"""`ti volume ...`: named volumes, their shares and their files."""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from typing import Any

from ..domain import guidance
from .client import ApiError, TiClient
from .common import add_json, command, confirm, examples, group, items_of, resolve_id
from .config import make_client
from .output import cell, details, err, fmt_bytes, out, pick, print_json, table


def vol_id(client: TiClient, ref: str) -> Any:
    return resolve_id(client, "/volumes", ref, "volume")


def size_of(v: Mapping[str, Any]) -> str:
    cap = pick(v, "capacity_gib")
    if cap is None:
        return ""
    over = " OVER" if v.get("over_capacity") else ""  # jobs cannot mount it read-write (docs/user-guide.md)
    if v.get("used_bytes") is not None:
        return f"{fmt_bytes(v['used_bytes'])}/{cell(cap)}G{over}"
    used = pick(v, "used_gib")
    return (f"{cell(used)}/{cell(cap)}G" if used is not None else f"{cell(cap)}G") + over


def share_grantee(s: Mapping[str, Any]) -> tuple[str, str]:
    kind = s.get("grantee_kind") or s.get("kind")
    if kind and s.get("grantee") is not None:
        return str(kind), str(s["grantee"])
    if s.get("user"):
        return "user", str(s["user"])
    if s.get("group"):
        return "group", str(s["group"])
    return "?", str(s.get("grantee", "?"))


def shares_of(v: Mapping[str, Any]) -> str:
    shares = v.get("shares")
    if not isinstance(shares, list):
        return cell(pick(v, "mode", "share_mode"))  # a volume shared with me: my access
    return ",".join(f"{share_grantee(s)[0][0]}:{share_grantee(s)[1]}:{s.get('mode', '')}" for s in shares)


def state_of(v: Mapping[str, Any]) -> str:
    """"ready", "copying 45%", "failed": a dataset's snapshot in one cell."""
    state = str(v.get("state") or "ready")
    copy = v.get("copy") or {}
    if state == "copying" and copy.get("total_bytes"):
        return f"copying {100 * int(copy.get('done_bytes') or 0) // max(1, int(copy['total_bytes']))}%"
    return state


VOLUME_COLUMNS = [("ID", "id"), ("NAME", "name"), ("OWNER", "owner"), ("KIND", "kind"), ("STATE", state_of),
                  ("SIZE", size_of),
                  ("ACCESS", "access"), ("SHARES", shares_of), ("CREATED", "created_at"), ("DESCRIPTION", "description")]


def cmd_list(args: argparse.Namespace) -> int:
    items = list(make_client(args).paginate("/volumes"))
    if args.json:
        print_json(items)
    else:
        table(items, VOLUME_COLUMNS, empty="(no volumes)")
    return 0


def cmd_create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name, "kind": args.kind, "capacity_gib": args.size}
    if args.source is not None:
        body["source"] = int(args.source) if args.source.isascii() and args.source.isdigit() else args.source
    if args.description is not None:
        body["description"] = args.description
    if args.cluster is not None:
        body["cluster"] = args.cluster
    client = make_client(args)
    vol = client.post("/volumes", body)
    if not args.json:
        out(f"created volume {vol.get('id', '?')} {vol.get('name', args.name)} ({vol.get('kind', args.kind)}, "
            f"{vol.get('capacity_gib', args.size)} GiB)")
    if vol.get("state") == "copying" and not args.no_wait:
        vol = wait_for_copy(client, vol, quiet=args.json)
    if args.json:
        print_json(vol)
    return 1 if vol.get("state") == "failed" else 0


def wait_for_copy(client: TiClient, vol: Mapping[str, Any], quiet: bool = False, every: float = 1.0
                  ) -> Mapping[str, Any]:
    """Follow a dataset's snapshot until it is ready or failed, saying how far it is (on stderr)."""
    said = ""
    while vol.get("state") == "copying":
        line = state_of(vol)
        copy = vol.get("copy") or {}
        if copy.get("total_bytes"):
            line += f" ({fmt_bytes(copy.get('done_bytes') or 0)} of {fmt_bytes(copy['total_bytes'])})"
        if line != said and not quiet:
            err(f"{vol.get('name')}: {line}")
            said = line
        time.sleep(every)
        vol = client.get(f"/volumes/{vol['id']}")
    if not quiet:
        err(f"{vol.get('name')}: {vol.get('state')}" + (f": {vol['state_reason']}" if vol.get("state_reason") else ""))
    return vol


def show_volume(v: Mapping[str, Any]) -> None:
    flat = {k: val for k, val in v.items() if k != "shares"}
    if flat.get("used_bytes") is not None:
        flat["used_bytes"] = fmt_bytes(flat["used_bytes"])
    flat["state"] = state_of(v) + (f": {v['state_reason']}" if v.get("state_reason") else "")
    details(flat, ("id", "name", "owner", "kind", "state", "capacity_gib", "used_bytes", "used_gib", "access", "cluster",
                   "public", "source_volume_id", "mounted_by", "description", "created_at"),
            labels={"used_bytes": "used"})
    shares = v.get("shares")
    if isinstance(shares, list) and shares:
        out("\nshares:")
        rows = [{"id": s.get("id"), "to": share_grantee(s)[0], "name": share_grantee(s)[1], "mode": s.get("mode")}
                for s in shares]
        table(rows, [("ID", "id"), ("TO", "to"), ("NAME", "name"), ("MODE", "mode")])


def cmd_show(args: argparse.Namespace) -> int:
    client = make_client(args)
    v = client.get(f"/volumes/{vol_id(client, args.volume)}")
    if args.json:
        print_json(v)
    else:
        show_volume(v)
    return 0


def cmd_expand(args: argparse.Namespace) -> int:
    client = make_client(args)
    v = client.patch(f"/volumes/{vol_id(client, args.volume)}", {"capacity_gib": args.size})
    if args.json:
        print_json(v)
    else:
        out(f"volume {args.volume}: {(v or {}).get('capacity_gib', args.size)} GiB")
    return 0


def cmd_share(args: argparse.Namespace) -> int:
    client = make_client(args)
    who = {"user": args.user} if args.user else {"group": args.group}
    share = client.post(f"/volumes/{vol_id(client, args.volume)}/shares", {**who, "mode": args.mode})
    if args.json:
        print_json(share)
    else:
        kind, name = next(iter(who.items()))
        out(f"shared {args.volume} with {kind} {name} ({args.mode})")
        said_stopped(share)
    return 0


def said_stopped(answer: Any) -> None:
    """Issue 30: the grantee's work a share taken back (or made read-only) stopped, one line each."""
    for w in (answer or {}).get("stopped") or []:
        out(f"stopped {w.get('kind') if w.get('kind') == 'workspace' else 'job'} {w.get('id')} "
            f"({w.get('owner')}/{w.get('name')}): it mounted the volume without access to it now")


def cmd_unshare(args: argparse.Namespace) -> int:
    client = make_client(args)
    vid = vol_id(client, args.volume)
    if args.share_id is not None:
        share_id = args.share_id
    else:
        kind, name = ("user", args.user) if args.user else ("group", args.group)
        v = client.get(f"/volumes/{vid}")
        hits = [s for s in (v or {}).get("shares") or [] if share_grantee(s) == (kind, name)]
        if not hits:
            raise ApiError(404, "not_found", f"volume {args.volume} is not shared with {kind} {name}")
        share_id = hits[0].get("id")
    answer = client.delete(f"/volumes/{vid}/shares/{share_id}")
    if args.json:
        print_json(answer)
        return 0
    out(f"unshared {args.volume} ({args.user or args.group or f'share {share_id}'})")
    said_stopped(answer)
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    client = make_client(args)
    vid = vol_id(client, args.volume)
    confirm(f"delete volume {args.volume} and all its data?", args.yes)
    client.delete(f"/volumes/{vid}")
    out(f"deleted volume {args.volume}")
    return 0


def _entry_size(e: Mapping[str, Any]) -> str:
    if e.get("type") in ("dir", "directory") or e.get("is_dir") or e.get("dir"):
        return "-"
    return fmt_bytes(pick(e, "size", "size_bytes", "bytes"))


def _entry_name(e: Mapping[str, Any]) -> str:
    name = str(pick(e, "name", "path", default=""))
    is_dir = e.get("type") in ("dir", "directory") or e.get("is_dir") or e.get("dir")
    return name + "/" if is_dir and not name.endswith("/") else name


def cmd_ls(args: argparse.Namespace) -> int:
    client = make_client(args)
    doc = client.get(f"/volumes/{vol_id(client, args.volume)}/files", params={"path": args.path})
    if args.json:
        print_json(doc)
        return 0
    entries = items_of(doc)
    if not entries and isinstance(doc, Mapping):
        entries = doc.get("entries") or doc.get("files") or []
        if not entries and doc.get("type") == "file":  # PATH is a file: show it alone
            entries = [{**doc, "name": doc.get("path") or args.path}]
    table(entries, [("NAME", _entry_name), ("SIZE", _entry_size), ("MODIFIED", lambda e: cell(
        pick(e, "modified", "mtime", "modified_at"), "modified"))], empty="(empty)")
    return 0


def register(root: Any) -> None:
    sub = group(root, "volume", "named storage volumes: create, share, browse", examples(
        "ti volume create data --kind filesystem --size 100",
        "ti volume share data --group lab --mode ro",
        "ti job submit ... --volume data:/mnt/data:ro -- python train.py",
    ))
    p = command(sub, "list", cmd_list, "my volumes and those shared with me",
                examples("ti volume list", "ti volume list --json"))
    add_json(p)

    p = command(sub, "create", cmd_create, "create a volume", guidance.table(
        "which kind of storage (--kind):", guidance.STORAGE_KINDS) + "\n\n" + examples(
        "ti volume create data --kind filesystem --size 100 --description 'ImageNet'",
        "ti volume create data-v1 --kind dataset --size 100 --source data",
        "ti volume create data-v2 --kind dataset --size 100 --source data --no-wait --json",
    ))
    p.add_argument("name", metavar="NAME")
    p.add_argument("--kind", required=True, help="storage kind: block, filesystem, local, bucket or dataset (those "
                   "this cluster offers; which suits what: below)")
    p.add_argument("--size", required=True, type=int, metavar="GIB", help="capacity in GiB")
    p.add_argument("--source", metavar="VOL", help="for a dataset (required there): the volume it is a snapshot "
                   "of (NAME, OWNER/NAME or id; yours or shared with you read-write, ready, not local scratch). The "
                   "copy runs in the background: this command follows it until the dataset is ready")
    p.add_argument("--no-wait", action="store_true", help="return at once while a dataset is still being copied "
                   "(`ti volume show` then says how far it is)")
    p.add_argument("--description", metavar="TEXT")
    p.add_argument("--cluster", metavar="POOL", help="the pool whose machines this storage serves: jobs and "
                   "workspaces that mount it run in that pool, with one of its plans (default: any pool)")
    add_json(p)

    p = command(sub, "show", cmd_show, "a volume's details and shares", examples("ti volume show data",
                                                                                "ti volume show alice/data"))
    p.add_argument("volume", metavar="NAME|ID")
    add_json(p)

    p = command(sub, "expand", cmd_expand, "grow a volume", examples("ti volume expand data --size 200"))
    p.add_argument("volume", metavar="NAME|ID")
    p.add_argument("--size", required=True, type=int, metavar="GIB", help="the new capacity in GiB")
    add_json(p)

    p = command(sub, "share", cmd_share, "give a user or a group access", examples(
        "ti volume share data --user bob", "ti volume share data --group lab --mode rw"))
    p.add_argument("volume", metavar="NAME|ID")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", metavar="USER")
    who.add_argument("--group", metavar="GROUP")
    p.add_argument("--mode", choices=["ro", "rw"], default="ro", help="read-only (default) or read-write")
    add_json(p)

    p = command(sub, "unshare", cmd_unshare, "take a share back: the grantee's work that mounts it stops at once",
                examples("ti volume unshare data --user bob", "ti volume unshare data --share-id 7"))
    p.add_argument("volume", metavar="NAME|ID")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", metavar="USER")
    who.add_argument("--group", metavar="GROUP")
    who.add_argument("--share-id", type=int, metavar="ID", help="the share's id (see `ti volume show`)")
    add_json(p)

    p = command(sub, "delete", cmd_delete, "delete a volume and its data", examples(
        "ti volume delete scratch", "ti volume delete scratch --yes"), aliases=["rm"])
    p.add_argument("volume", metavar="NAME|ID")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")

    p = command(sub, "ls", cmd_ls, "list files in a volume", examples("ti volume ls data", "ti volume ls data models/"))
    p.add_argument("volume", metavar="NAME|ID")
    p.add_argument("path", nargs="?", default=None, metavar="PATH",
                   help="a folder inside the volume (default: its root)")
    add_json(p)
