"""`ti role ...`: TiHub's own roles and who holds them (admins: custom:ti:users:manage).

The hub cannot change role assignments while it runs, so TiHub keeps its own roles and grants: a change counts
at the very next request, with no restart (docs/admin-guide.md "Roles").
"""

from __future__ import annotations

import argparse
from typing import Any

from .client import quote
from .common import add_json, command, examples, group
from .config import UsageError, make_client
from .output import out, print_json, table

PREFIX = "custom:ti:"
ROLE_COLUMNS = [("ROLE", "name"), ("PRESET", lambda r: "yes" if r.get("preset") else ""),
                ("PERMISSIONS", lambda r: ", ".join(p.removeprefix(PREFIX) for p in r.get("permissions") or ())
                 or "-"),
                ("USERS", lambda r: ", ".join(r.get("users") or ()) or "-"),
                ("GROUPS", lambda r: ", ".join(r.get("groups") or ()) or "-"),
                ("DESCRIPTION", "description")]
GRANT_COLUMNS = [("ID", "id"), ("ROLE", "role"), ("KIND", "kind"), ("WHO", "principal"), ("SINCE", "created_at")]


def _permissions(values: list[str] | None) -> list[str]:
    """Comma- or space-separated, short (jobs:submit) or whole (custom:ti:jobs:submit); 'none' for none."""
    out_: list[str] = []
    for v in values or ():
        out_ += [p for p in v.replace(",", " ").split() if p and p != "none"]
    return out_


def cmd_list(args: argparse.Namespace) -> int:
    items = list(make_client(args).paginate("/roles"))
    if args.json:
        print_json(items)
    else:
        table(items, ROLE_COLUMNS, empty="(no roles)")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    r = make_client(args).get(f"/roles/{quote(args.role)}")
    if args.json:
        print_json(r)
        return 0
    out(f"role:        {r['name']}{' (preset)' if r['preset'] else ''}")
    out(f"description: {r['description'] or '-'}")
    out("permissions: " + (", ".join(r["permissions"]) or "none"))
    out("users:       " + (", ".join(r["users"]) or "-"))
    out("groups:      " + (", ".join(r["groups"]) or "-"))
    return 0


def cmd_create(args: argparse.Namespace) -> int:
    body = {"name": args.role, "permissions": _permissions(args.permissions)}
    if args.description is not None:
        body["description"] = args.description
    r = make_client(args).post("/roles", body)
    if args.json:
        print_json(r)
    else:
        out(f"created role {r['name']}: " + (", ".join(r["permissions"]) or "no permissions"))
    return 0


def cmd_change(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {}
    if args.permissions is not None:
        body["permissions"] = _permissions(args.permissions)
    if args.description is not None:
        body["description"] = args.description
    if not body:
        raise UsageError("say what to change: --permissions and/or --description")
    r = make_client(args).patch(f"/roles/{quote(args.role)}", body)
    if args.json:
        print_json(r)
    else:
        out(f"changed role {r['name']}: " + (", ".join(r["permissions"]) or "no permissions"))
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    make_client(args).delete(f"/roles/{quote(args.role)}")
    out(f"deleted role {args.role} and its grants")
    return 0


def _rows(args: argparse.Namespace) -> list[dict[str, str]]:
    rows = [{"role": args.role, "user": u} for u in args.user or ()]
    rows += [{"role": args.role, "group": g} for g in args.group or ()]
    if not rows:
        raise UsageError("name at least one --user or --group")
    return rows


def cmd_grant(args: argparse.Namespace) -> int:
    r = make_client(args).post("/grants", {"grants": _rows(args)})
    if args.json:
        print_json(r["items"])
    else:
        for g in r["items"]:
            out(f"{g['kind']} {g['principal']} holds role {g['role']} (grant {g['id']})")
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    r = make_client(args).post("/grants/revoke", {"grants": _rows(args)})
    if args.json:
        print_json(r["items"])
    else:
        for g in r["items"]:
            out(f"{g['kind']} {g['principal']} no longer holds role {g['role']}")
    return 0


def cmd_grants(args: argparse.Namespace) -> int:
    params = {k: getattr(args, k) for k in ("role", "user", "group") if getattr(args, k)}
    items = list(make_client(args).paginate("/grants", params))
    if args.json:
        print_json(items)
    else:
        table(items, GRANT_COLUMNS, empty="(no grants)")
    return 0


def _who(p: argparse.ArgumentParser) -> None:
    p.add_argument("role", metavar="ROLE", help="the role's name")
    p.add_argument("--user", action="append", metavar="USER", help="a hub user (repeat for several)")
    p.add_argument("--group", action="append", metavar="GROUP", help="a hub group: all its members (repeat)")
    add_json(p)


def register(root: Any) -> None:
    sub = group(root, "role", "TiHub's roles and who holds them: changes count at once (admins only)", examples(
        "ti role list", "ti role create reviewer --permissions vc:view,cluster:view",
        "ti role grant reviewer --group interns", "ti role grants --role reviewer"))
    p = command(sub, "list", cmd_list, "every role with its permissions and who holds it",
                examples("ti role list", "ti role list --json"))
    add_json(p)
    p = command(sub, "show", cmd_show, "one role: its permissions, users and groups", examples("ti role show user"))
    p.add_argument("role", metavar="ROLE", help="the role's name")
    add_json(p)
    perms = ("the permissions, comma-separated, short (jobs:submit) or whole (custom:ti:jobs:submit): "
             "jobs:submit, vc:manage, vc:view, jobs:view-all, jobs:manage-all, cluster:view, users:manage; "
             "'none' for none")
    p = command(sub, "create", cmd_create, "create a custom role from the seven permissions", examples(
        "ti role create reviewer --permissions vc:view,cluster:view,jobs:view-all",
        "ti role create observer --permissions none --description 'sees nothing, runs nothing'"))
    p.add_argument("role", metavar="ROLE", help="the new role's name (4-63 letters, digits, '-', '_')")
    p.add_argument("--permissions", action="append", required=True, metavar="LIST", help=perms)
    p.add_argument("--description", metavar="TEXT", help="what the role is for")
    add_json(p)
    p = command(sub, "change", cmd_change, "change a custom role (presets cannot change); counts at once",
                examples("ti role change reviewer --permissions vc:view", "ti role change reviewer --description x"))
    p.add_argument("role", metavar="ROLE", help="the role's name")
    p.add_argument("--permissions", action="append", metavar="LIST", help=perms + " (replaces them all)")
    p.add_argument("--description", metavar="TEXT", help="what the role is for")
    add_json(p)
    p = command(sub, "delete", cmd_delete, "delete a custom role and its grants", examples("ti role delete reviewer"))
    p.add_argument("role", metavar="ROLE", help="the role's name")
    p = command(sub, "grant", cmd_grant, "give a role to users and groups, all or nothing; counts at once",
                examples("ti role grant ti-admin --user alice", "ti role grant reviewer --group interns --user bob"))
    _who(p)
    p = command(sub, "revoke", cmd_revoke, "take a role back from users and groups, all or nothing "
                                           "(never from the last system admin)",
                examples("ti role revoke reviewer --user bob", "ti role revoke reviewer --group interns"))
    _who(p)
    p = command(sub, "grants", cmd_grants, "who holds which role", examples(
        "ti role grants", "ti role grants --role ti-admin", "ti role grants --user alice --json"))
    p.add_argument("--role", metavar="ROLE", help="only grants of this role")
    p.add_argument("--user", metavar="USER", help="only grants to this user (directly)")
    p.add_argument("--group", metavar="GROUP", help="only grants to this group")
    add_json(p)
