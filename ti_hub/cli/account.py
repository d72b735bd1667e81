"""`ti login`, `ti logout`, `ti me`, `ti account show|set` (my profile), `ti key ...` (SSH public keys) and
`ti ssh-command`."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path
from typing import Any

from .client import TiClient
from .common import add_json, command, examples, group, resolve_id
from .config import UsageError, config_path, make_client, remove_config, resolve, write_config
from .output import details, err, out, print_json, table


# -- login --------------------------------------------------------------------------------
def cmd_login(args: argparse.Namespace) -> int:
    url = getattr(args, "url", None) or os.environ.get("TI_API_URL")
    if not url:
        raise UsageError("give the TiHub URL: ti login --url http://HUB:8000 --token TOKEN")
    token = getattr(args, "token", None)
    if args.token_stdin:
        token = sys.stdin.readline().strip()
    elif not token:
        if not sys.stdin.isatty():
            raise UsageError("give --token TOKEN or pipe it with --token-stdin")
        token = getpass.getpass("API token (from the hub's Token page): ").strip()
    if not token:
        raise UsageError("the token is empty")
    settings = resolve(url, token, getattr(args, "timeout", None))
    client = TiClient(settings.url or url, token, settings.timeout)
    who = client.get("/me") or {}
    path = write_config(client.url, token)
    out(f"Logged in to {client.url} as {who.get('name', '?')}")
    err(f"(saved in {path}, readable only by you)")
    return 0


def cmd_logout(args: argparse.Namespace) -> int:
    if remove_config():
        out(f"Logged out (removed {config_path()})")
    else:
        out("Not logged in")
    return 0


def cmd_me(args: argparse.Namespace) -> int:
    client = make_client(args)
    who = client.get("/me") or {}
    if args.json:
        print_json(who)
        return 0
    details({**who, "url": client.url}, ("name", "admin", "groups", "permissions", "url"))
    return 0


# -- my profile (issue 31) ----------------------------------------------------------------
PROFILE_ORDER = ("name", "nickname", "email", "email_verified", "phone")


def show_profile(doc: dict[str, Any]) -> None:
    email = doc.get("email") or "(none)"
    if doc.get("email"):
        email += " (verified)" if doc.get("email_verified") else " (not verified: no alert notices go there yet)"
    for label, value in (("name", doc.get("name", "?")), ("nickname", doc.get("nickname") or "(none)"),
                         ("email", email), ("phone", doc.get("phone") or "(none)")):
        out(f"{label + ':':<10} {value}")


def cmd_account_show(args: argparse.Namespace) -> int:
    doc = make_client(args).get("/me") or {}
    if args.json:
        print_json({k: doc.get(k) for k in PROFILE_ORDER})
    else:
        show_profile(doc)
    return 0


def cmd_account_set(args: argparse.Namespace) -> int:
    body = {k: getattr(args, k) for k in ("nickname", "email", "phone") if getattr(args, k) is not None}
    if not body:
        raise UsageError("nothing to change: give --nickname, --email or --phone (an empty value clears one)")
    doc = make_client(args).patch("/me", body) or {}
    if args.json:
        print_json({k: doc.get(k) for k in (*PROFILE_ORDER, "verification")})
        return 0
    show_profile(doc)
    v = doc.get("verification")
    if v:
        (out if v.get("status") == "sent" else err)(f"{'note' if v.get('status') == 'sent' else 'warning'}: "
                                                    f"{v.get('detail', '')}")
    return 0


# -- SSH keys -----------------------------------------------------------------------------
def read_key(path: str | None) -> str:
    if path and path != "-":
        try:
            key = Path(path).expanduser().read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    else:
        if sys.stdin.isatty():
            raise UsageError("give --file ~/.ssh/id_ed25519.pub, or pipe the public key on stdin")
        key = sys.stdin.read()
    key = key.strip()
    if "PRIVATE KEY" in key:
        raise UsageError("that is a private key: give the public one (the .pub file)")
    if not key:
        raise UsageError("the key is empty")
    return key


def cmd_key_list(args: argparse.Namespace) -> int:
    items = list(make_client(args).paginate("/keys"))
    if args.json:
        print_json(items)
    else:
        table(items, [("ID", "id"), ("NAME", "name"), ("FINGERPRINT", "fingerprint"), ("CREATED", "created_at")],
              empty="(no SSH keys)")
    return 0


def cmd_key_add(args: argparse.Namespace) -> int:
    client = make_client(args)
    key = read_key(args.file)
    doc = client.post("/keys", {"name": args.name, "key": key})
    if args.json:
        print_json(doc)
    else:
        out(f"added SSH key {doc.get('id', '?')} {doc.get('name', args.name)} {doc.get('fingerprint', '')}".rstrip())
    return 0


def cmd_key_delete(args: argparse.Namespace) -> int:
    client = make_client(args)
    client.delete(f"/keys/{resolve_id(client, '/keys', args.key, 'SSH key')}")
    out(f"deleted SSH key {args.key}")
    return 0


def cmd_ssh_command(args: argparse.Namespace) -> int:
    params = {k: v for k, v in (("name", args.target), ("instance", args.instance)) if v is not None}
    doc = make_client(args).get("/ssh/command", params=params) or {}
    if args.json:
        print_json(doc)
    else:
        out(doc.get("command", ""))
    return 0


def register(root: Any) -> None:
    p = command(root, "login", cmd_login, "save the TiHub URL and an API token for later commands", examples(
        "ti login --url http://127.0.0.1:8000 --token 0123abcd...",
        "ti login --url https://hub.example.com --token-stdin < token.txt",
    ) + "\n\nThe token is checked with the server, then saved in ~/.config/ti/config.json (or $TI_CONFIG),\n"
        "readable only by you. Get one from the hub's Token page. Without --token it is asked for.")
    p.add_argument("--token-stdin", action="store_true", help="read the token from stdin")

    command(root, "logout", cmd_logout, "forget the saved URL and token", examples("ti logout"))

    p = command(root, "me", cmd_me, "who the token belongs to, and its permissions", examples("ti me", "ti me --json"))
    add_json(p)

    sub = group(root, "account", "my profile: nickname, email (where alert notices go) and phone", examples(
        "ti account show", "ti account set --email me@example.org"))
    p = command(sub, "show", cmd_account_show, "show my nickname, email (verified or not) and phone", examples(
        "ti account show", "ti account show --json"))
    add_json(p)
    p = command(sub, "set", cmd_account_set, "set my nickname, email or phone", examples(
        "ti account set --email me@example.org --nickname Ada --phone '+1 555 0100'",
        "ti account set --phone ''",
    ) + "\n\nA new email is unverified until you open the link TiHub mails to it (signed in as you); alert\n"
        "notices go only to a verified email. Setting the same unverified email again mails a new link.\n"
        "An empty value clears a field.")
    p.add_argument("--nickname", metavar="TEXT", help="how TiHub shows your name (at most 63 characters)")
    p.add_argument("--email", metavar="ADDRESS", help="where alert notices go, once verified")
    p.add_argument("--phone", metavar="NUMBER", help="digits, spaces and '-', optionally starting with '+'")
    add_json(p)

    sub = group(root, "key", "SSH public keys (for ssh endpoints)", examples(
        "ti key add laptop --file ~/.ssh/id_ed25519.pub", "ti key list"))
    p = command(sub, "list", cmd_key_list, "list my SSH public keys", examples("ti key list"))
    add_json(p)
    p = command(sub, "add", cmd_key_add, "register an SSH public key", examples(
        "ti key add laptop --file ~/.ssh/id_ed25519.pub", "cat id_rsa.pub | ti key add desktop"))
    p.add_argument("name", metavar="NAME")
    p.add_argument("--file", metavar="PATH", help="the public key file (default: read stdin)")
    add_json(p)
    p = command(sub, "delete", cmd_key_delete, "remove an SSH public key", examples("ti key delete laptop"),
                aliases=["rm"])
    p.add_argument("key", metavar="NAME|ID")

    p = command(root, "ssh-command", cmd_ssh_command, "print the ssh command that opens a workspace or job",
                examples("ti ssh-command", "ti ssh-command dev-box", "ti ssh-command train-1 --instance 2",
                         "$(ti ssh-command dev-box) nvidia-smi")
                + "\n\nWithout a name: your default workspace ('default' if it runs, else your only running one).\n"
                  "Jobs are reachable when submitted with --endpoint ssh. Register a key first: ti key add.")
    p.add_argument("target", nargs="?", metavar="WORKSPACE|JOB", help="a workspace, or a job with an ssh endpoint")
    p.add_argument("--instance", type=int, metavar="N", help="a job's instance (default 0)")
    add_json(p)
