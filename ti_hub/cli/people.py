"""`ti user ...` and `ti group ...`: people and groups (admins: custom:ti:users:manage)."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path
from typing import Any

from .client import ApiError, quote
from .common import add_json, command, examples, group
from .config import UsageError, make_client
from .output import details, out, print_json, table

USER_COLUMNS = [("NAME", "name"), ("NICKNAME", "nickname"), ("EMAIL", "email"), ("PHONE", "phone"),
                ("ENABLED", lambda u: "yes" if u.get("enabled") else "no"),
                ("ADMIN", lambda u: "yes" if u.get("admin") else ""),
                ("GROUPS", lambda u: ",".join(u.get("groups") or ()))]
GROUP_COLUMNS = [("NAME", "name"), ("DESCRIPTION", "description"), ("MEMBERS", lambda g: len(g.get("users") or ())),
                 ("USERS", lambda g: ",".join(g.get("users") or ())),
                 ("ROLES", lambda g: ",".join(g.get("roles") or ()))]
ROW_COLUMNS = [("ROW", "row"), ("NAME", "name"), ("STATUS", "status"), ("FIELD", "field"), ("DETAIL", "detail")]


def _profile(args: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(args, k) for k in ("nickname", "email", "phone") if getattr(args, k, None) is not None}


def _show_user(args: argparse.Namespace, user: dict[str, Any], said: str = "") -> None:
    if args.json:
        print_json(user)
        return
    if said:
        out(said)
    details(user, ["name", "nickname", "email", "phone", "enabled", "admin", "groups", "roles", "last_activity"])


def read_new_password(args: argparse.Namespace) -> str:
    """From stdin with --password-stdin, else asked twice without echo; never a flag (it would be in the
    shell's history and the process list)."""
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif sys.stdin.isatty():
        password = getpass.getpass(f"Password for {args.name}: ")
        if getpass.getpass("Again: ") != password:
            raise UsageError("the passwords differ")
    else:
        raise UsageError("no terminal to ask for the password: pipe it with --password-stdin")
    if not password:
        raise UsageError("the password is empty")
    return password


# -- users ------------------------------------------------------------------------------------------------
def cmd_user_list(args: argparse.Namespace) -> int:
    items = list(make_client(args).paginate("/users"))
    if args.json:
        print_json(items)
    else:
        table(items, USER_COLUMNS, empty="(no users)")
    return 0


def cmd_user_show(args: argparse.Namespace) -> int:
    _show_user(args, make_client(args).get(f"/users/{quote(args.name)}"))
    return 0


def cmd_user_create(args: argparse.Namespace) -> int:
    client = make_client(args)  # before asking: no prompt when not logged in
    body = {"name": args.name, "password": read_new_password(args), **_profile(args)}
    if args.group:
        body["groups"] = args.group
    _show_user(args, client.post("/users", body), f"created user {args.name}: they can log in now")
    return 0


def cmd_user_import(args: argparse.Namespace) -> int:
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {args.file}: {getattr(e, 'strerror', None) or e}") from None
    try:
        report = make_client(args).post("/user-imports", {"csv": text})
    except ApiError as e:
        rows = e.extra.get("rows") if isinstance(e.extra, dict) else None
        if rows:  # the per-row report of a refused file, then the error
            if args.json:
                print_json({"created": 0, "rows": rows})
            else:
                table(rows, ROW_COLUMNS)
        raise
    if args.json:
        print_json(report)
    else:
        table(report["rows"], ROW_COLUMNS)
        out(f"created {report['created']} user(s)")
    return 0


def cmd_user_change(args: argparse.Namespace) -> int:
    body = _profile(args)
    if args.admin is not None:
        body["admin"] = args.admin
    if not body:
        raise UsageError("nothing to change: give --nickname, --email, --phone, --admin or --no-admin")
    _show_user(args, make_client(args).patch(f"/users/{quote(args.name)}", body), f"changed user {args.name}")
    return 0


def _enable(args: argparse.Namespace, action: str) -> int:
    user = make_client(args).post(f"/users/{quote(args.name)}/{action}")
    said = f"{action}d user {args.name}"
    revoked = user.get("revoked") if isinstance(user, dict) else None
    if revoked:
        said += f"; revoked {revoked_words(revoked)}"
    _show_user(args, user, said)
    return 0


def revoked_words(revoked: dict[str, Any]) -> str:
    """What a disable revoked, in words (the answer's ``revoked``)."""
    text = f"{revoked.get('tokens', 0)} token(s)"
    if revoked.get("servers_stopped"):
        text += f", stopped server(s) {', '.join(revoked['servers_stopped'])}"
    if revoked.get("jobs_stopped"):
        text += f", stopped job(s) and workspace(s) {', '.join(map(str, revoked['jobs_stopped']))}"
    if revoked.get("servers_starting"):
        text += (f"; server(s) {', '.join(revoked['servers_starting'])} were starting: stop them at "
                 "/hub/admin")
    return text


def cmd_user_disable(args: argparse.Namespace) -> int:
    return _enable(args, "disable")


def cmd_user_enable(args: argparse.Namespace) -> int:
    return _enable(args, "enable")


def cmd_user_delete(args: argparse.Namespace) -> int:
    make_client(args).delete(f"/users/{quote(args.name)}")
    out(f"deleted user {args.name}")
    return 0


# -- groups -----------------------------------------------------------------------------------------------
def _show_group(args: argparse.Namespace, g: dict[str, Any], said: str) -> None:
    if args.json:
        print_json(g)
    else:
        out(said)
        details(g, ["name", "description", "users", "roles"])


def cmd_group_list(args: argparse.Namespace) -> int:
    items = list(make_client(args).paginate("/groups"))
    if args.json:
        print_json(items)
    else:
        table(items, GROUP_COLUMNS, empty="(no groups)")
    return 0


def cmd_group_create(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name}
    if args.description:
        body["description"] = args.description
    if args.users:
        body["users"] = args.users
    _show_group(args, make_client(args).post("/groups", body), f"created group {args.name}")
    return 0


def cmd_group_rename(args: argparse.Namespace) -> int:
    g = make_client(args).patch(f"/groups/{quote(args.name)}", {"name": args.new_name})
    _show_group(args, g, f"renamed group {args.name} to {args.new_name}")
    return 0


def cmd_group_describe(args: argparse.Namespace) -> int:
    g = make_client(args).patch(f"/groups/{quote(args.name)}", {"description": args.description})
    _show_group(args, g, f"described group {args.name}")
    return 0


def cmd_group_delete(args: argparse.Namespace) -> int:
    make_client(args).delete(f"/groups/{quote(args.name)}")
    out(f"deleted group {args.name}")
    return 0


def _members(args: argparse.Namespace, action: str) -> int:
    g = make_client(args).post(f"/groups/{quote(args.name)}/{action}", {"users": args.users})
    _show_group(args, g, f"{'added to' if action == 'add' else 'removed from'} group {args.name}: "
                         f"{', '.join(args.users)}")
    return 0


def cmd_group_add(args: argparse.Namespace) -> int:
    return _members(args, "add")


def cmd_group_remove(args: argparse.Namespace) -> int:
    return _members(args, "remove")


def _profile_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nickname", metavar="TEXT", help="what to call them (at most 63 characters)")
    p.add_argument("--email", metavar="ADDRESS", help="their email address (empty to clear)")
    p.add_argument("--phone", metavar="NUMBER", help="digits, spaces and '-', optionally starting with '+'")


def register(root: Any) -> None:
    sub = group(root, "user", "people: create, import, change, disable, delete users (admins: users:manage)",
                examples("ti user list", "ti user create alice --email alice@example.org --group team-a",
                         "ti user import people.csv", "ti user disable alice"))
    p = command(sub, "list", cmd_user_list, "list users with their profiles",
                examples("ti user list", "ti user list --json"), aliases=["ls"])
    add_json(p)
    p = command(sub, "show", cmd_user_show, "one user's profile, groups and roles", examples("ti user show alice"))
    p.add_argument("name", metavar="USER")
    add_json(p)
    p = command(sub, "create", cmd_user_create, "create a user who can log in at once", examples(
        "ti user create alice --nickname Alice --email alice@example.org --group team-a",
        "echo \"$PASSWORD\" | ti user create bob --password-stdin") +
        "\n\nThe password is asked twice without echo, or read from stdin with --password-stdin.")
    p.add_argument("name", metavar="USER", help="lowercase letters, digits, '.', '-' and '_'")
    p.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    _profile_options(p)
    p.add_argument("--group", action="append", metavar="GROUP", help="add to this existing group (repeatable)")
    add_json(p)
    p = command(sub, "import", cmd_user_import, "create users from a CSV file, all or nothing", examples(
        "ti user import people.csv", "ti user import - < people.csv") + wrap_csv_help())
    p.add_argument("file", metavar="FILE.csv", help="the file, or - for stdin")
    add_json(p)
    p = command(sub, "change", cmd_user_change, "change a user's profile, or make them an admin or not",
                examples("ti user change alice --nickname Al --phone '+1 555 0100'", "ti user change bob --admin"))
    p.add_argument("name", metavar="USER")
    _profile_options(p)
    p.add_argument("--admin", action=argparse.BooleanOptionalAction, default=None,
                   help="make a system admin (group ti-admins), or --no-admin to demote (never the last one)")
    add_json(p)
    for name, fn, text in (("disable", cmd_user_disable, "refuse a user's login and API calls (never the last "
                                                        "admin's); their data stays"),
                           ("enable", cmd_user_enable, "let a disabled user in again")):
        p = command(sub, name, fn, text, examples(f"ti user {name} alice"))
        p.add_argument("name", metavar="USER")
        add_json(p)
    p = command(sub, "delete", cmd_user_delete, "delete a user without jobs or workspaces in progress",
                examples("ti user delete alice"), aliases=["rm"])
    p.add_argument("name", metavar="USER")

    sub = group(root, "group", "groups of users: create, rename, delete, add and remove members (admins)",
                examples("ti group create team-a --description 'Team A' --users alice bob",
                         "ti group add team-a carol dave", "ti group rename team-a team-alpha"))
    p = command(sub, "list", cmd_group_list, "list groups with their members",
                examples("ti group list", "ti group list --json"), aliases=["ls"])
    add_json(p)
    p = command(sub, "create", cmd_group_create, "create a group",
                examples("ti group create team-a --description 'Team A' --users alice bob"))
    p.add_argument("name", metavar="GROUP")
    p.add_argument("--description", metavar="TEXT")
    p.add_argument("--users", nargs="+", metavar="USER", help="its first members")
    add_json(p)
    p = command(sub, "rename", cmd_group_rename, "rename a group: members, description, volume shares and team "
                "templates follow", examples("ti group rename team-a team-alpha"))
    p.add_argument("name", metavar="GROUP")
    p.add_argument("new_name", metavar="NEW_NAME")
    add_json(p)
    p = command(sub, "describe", cmd_group_describe, "set a group's description",
                examples("ti group describe team-a 'Team A: vision'"))
    p.add_argument("name", metavar="GROUP")
    p.add_argument("description", metavar="TEXT")
    add_json(p)
    p = command(sub, "delete", cmd_group_delete, "delete a group (its members stay)",
                examples("ti group delete team-a"), aliases=["rm"])
    p.add_argument("name", metavar="GROUP")
    for name, fn, text in (("add", cmd_group_add, "add users to a group, all or nothing"),
                           ("remove", cmd_group_remove, "remove users from a group, all or nothing")):
        p = command(sub, name, fn, text, examples(f"ti group {name} team-a alice bob"))
        p.add_argument("name", metavar="GROUP")
        p.add_argument("users", nargs="+", metavar="USER")
        add_json(p)


def wrap_csv_help() -> str:
    return ("\n\nThe file: a header line, then one line per user. Columns: name,password (required), nickname, "
            "email, phone, groups (names separated by ';').\nA file with any refused row creates nobody: the "
            "report names each row (its line in the file), the field and the rule.")
