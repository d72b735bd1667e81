"""`ti image ...` (public images) and `ti credential ...` (private registry logins)."""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from .common import add_json, command, examples, group, resolve_id
from .config import UsageError, make_client
from .output import fmt_bytes, fmt_time, out, pick, print_json, table

# IMG3: VERSION, SIZE and CREATED are the registry's (REGISTRY says why they are missing when it could not be read)
IMAGE_COLUMNS = [("ID", "id"), ("NAME", "name"), ("ADDRESS", "address"), ("VERSION", "version"),
                 ("ACCEL", "accelerator"), ("SIZE", lambda i: fmt_bytes(i.get("size_bytes"))),
                 ("CREATED", lambda i: fmt_time(i.get("image_created"))),
                 ("REGISTRY", lambda i: str(i.get("registry") or "")), ("DESCRIPTION", "description")]
CREDENTIAL_COLUMNS = [("ID", "id"), ("NAME", "name"),
                      ("REGISTRY", lambda c: str(pick(c, "registry", "server", default=""))),
                      ("USERNAME", "username"), ("CREATED", "created_at")]


# -- images -------------------------------------------------------------------------------
def cmd_image_list(args: argparse.Namespace) -> int:
    items = list(make_client(args).paginate("/images"))
    if args.json:
        print_json(items)
    else:
        table(items, IMAGE_COLUMNS, empty="(no public images)")
    return 0


def cmd_image_add(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"name": args.name, "address": args.address}
    for field in ("accelerator", "description"):
        if getattr(args, field) is not None:
            body[field] = getattr(args, field)
    image = make_client(args).post("/images", body)
    if args.json:
        print_json(image)
    else:
        out(f"added public image {image.get('id', '?')} {image.get('name', args.name)} "
            f"({image.get('address', args.address)})")
    return 0


def cmd_image_delete(args: argparse.Namespace) -> int:
    client = make_client(args)
    client.delete(f"/images/{resolve_id(client, '/images', args.image, 'image')}")
    out(f"deleted public image {args.image}")
    return 0


# -- credentials --------------------------------------------------------------------------
def read_password(args: argparse.Namespace) -> str:
    """From stdin with --password-stdin, else a prompt that does not echo; never a flag."""
    if args.password_stdin:
        password = sys.stdin.read()
        if password.endswith("\n"):
            password = password[:-1]
        if password.endswith("\r"):
            password = password[:-1]
    elif sys.stdin.isatty():
        password = getpass.getpass(f"Password for {args.username}@{args.registry}: ")
    else:
        raise UsageError("no terminal to ask for the password: pipe it with --password-stdin")
    if not password:
        raise UsageError("the password is empty")
    return password


def cmd_credential_list(args: argparse.Namespace) -> int:
    items = list(make_client(args).paginate("/credentials"))
    if args.json:
        print_json(items)
    else:
        table(items, CREDENTIAL_COLUMNS, empty="(no registry credentials)")
    return 0


def cmd_credential_add(args: argparse.Namespace) -> int:
    client = make_client(args)  # before asking: no prompt when not logged in
    password = read_password(args)
    body = {"name": args.name, "registry": args.registry, "username": args.username, "password": password}
    cred = client.post("/credentials", body)
    cred = {k: v for k, v in (cred or {}).items() if k != "password"}
    if args.json:
        print_json(cred)
    else:
        out(f"added credential {cred.get('id', '?')} {cred.get('name', args.name)} "
            f"({args.username}@{args.registry})")
    return 0


def cmd_credential_delete(args: argparse.Namespace) -> int:
    client = make_client(args)
    client.delete(f"/credentials/{resolve_id(client, '/credentials', args.credential, 'credential')}")
    out(f"deleted credential {args.credential}")
    return 0


def register(root: Any) -> None:
    sub = group(root, "image", "public images curated by admins", examples(
        "ti image list",
        "ti image add pytorch --address pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime --accelerator gpu",
    ))
    p = command(sub, "list", cmd_image_list, "list public images", examples("ti image list", "ti image list --json")
                + "\n\nVERSION (the tag), SIZE and CREATED are read from each image's registry, with your saved "
                  "credential for it (ti credential add); REGISTRY says 'ok', or why they are missing.")
    add_json(p)
    p = command(sub, "add", cmd_image_add, "admin: add a public image (needs vc:manage)", examples(
        "ti image add pytorch --address docker.io/pytorch/pytorch:2.3.0 --accelerator gpu")
        + "\n\nThe version, size and creation time are read from the registry, never typed in.")
    p.add_argument("name", metavar="NAME", help="the short name users give to --image")
    p.add_argument("--address", required=True, metavar="IMAGE", help="the image address (registry/repo:tag)")
    p.add_argument("--accelerator", choices=["cpu", "gpu"], help="what it is built for (default cpu)")
    p.add_argument("--description", metavar="TEXT")
    add_json(p)
    p = command(sub, "delete", cmd_image_delete, "admin: remove a public image", examples("ti image delete pytorch"),
                aliases=["rm"])
    p.add_argument("image", metavar="NAME|ID")

    sub = group(root, "credential", "private registry credentials (passwords are never shown)", examples(
        "ti credential add my-registry --registry registry.example.com --username alice",
        "echo \"$PASSWORD\" | ti credential add ci-bot --registry ghcr.io --username bot --password-stdin",
        "ti job submit --image registry.example.com/me/train:1 --credential my-registry ...",
    ))
    p = command(sub, "list", cmd_credential_list, "list my registry credentials", examples("ti credential list"))
    add_json(p)
    p = command(sub, "add", cmd_credential_add, "save a registry login", examples(
        "ti credential add my-registry --registry registry.example.com --username alice",
        "ti credential add ci-bot --registry ghcr.io --username bot --password-stdin < token.txt",
    ) + "\n\nThe password is asked without echo, or read from stdin with --password-stdin; there is no flag for it.")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--registry", required=True, metavar="HOST", help="registry host, e.g. registry.example.com")
    p.add_argument("--username", required=True, metavar="USER")
    p.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    add_json(p)
    p = command(sub, "delete", cmd_credential_delete, "remove a registry credential",
                examples("ti credential delete my-registry"), aliases=["rm"])
    p.add_argument("credential", metavar="NAME|ID")
