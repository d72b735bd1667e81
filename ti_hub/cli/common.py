"""Helpers shared by the command modules: parsers, name-to-id look-ups, input files."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from .client import ApiError, TiClient
from .config import Aborted, UsageError

JOB_HELP = "the job: its id, your job's name, or OWNER/NAME for another user's (as its id would reach it)"

Handler = Callable[[argparse.Namespace], "int | None"]


class Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)


def examples(*lines: str) -> str:
    return "examples:\n" + "\n".join("  " + line for line in lines)


def add_global_options(parser: argparse.ArgumentParser, suppress: bool = False, timeout: bool = True) -> None:
    """--url/--token/--timeout, accepted before or after the command (`suppress` for subcommands)."""
    d = {"default": argparse.SUPPRESS} if suppress else {"default": None}
    g = parser.add_argument_group("connection")
    g.add_argument("--url", metavar="URL", help="TiHub URL (hub base or API base; env TI_API_URL)", **d)
    g.add_argument("--token", metavar="TOKEN", help="API token (env TI_TOKEN; prefer `ti login`)", **d)
    if timeout:
        g.add_argument("--timeout", metavar="S", type=float, help="seconds to wait for each answer (default 30)", **d)


def command(sub: Any, name: str, handler: Handler, help: str, epilog: str = "",
            description: str | None = None, timeout_option: bool = True, **kw: Any) -> argparse.ArgumentParser:
    """A leaf command: its own --help with examples, the connection options, and its handler."""
    p = sub.add_parser(name, help=help, description=description or help, epilog=epilog,
                       formatter_class=Formatter, **kw)
    add_global_options(p, suppress=True, timeout=timeout_option)
    p.set_defaults(func=handler)
    return p


def group(sub: Any, name: str, help: str, epilog: str = "", **kw: Any) -> Any:
    """A command with subcommands (`ti job ...`); without one it prints its help."""
    p = sub.add_parser(name, help=help, description=help, epilog=epilog, formatter_class=Formatter, **kw)
    p.set_defaults(func=lambda args, _p=p: _usage(_p))
    return p.add_subparsers(title="commands", metavar="COMMAND")


def _usage(p: argparse.ArgumentParser) -> int:
    p.print_help(sys.stderr)
    return 2


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the raw JSON the server answered")


def wrap(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


# -- input --------------------------------------------------------------------------------
def read_json_file(path: str, what: str = "file") -> Any:
    try:
        if path == "-":
            return json.load(sys.stdin)
        with open(Path(path).expanduser(), encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise UsageError(f"cannot read {what} {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise UsageError(f"{what} {path} is not valid JSON: {e}") from None


def confirm(question: str, yes: bool) -> None:
    """Asks on a terminal; elsewhere --yes is required."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"{question} — add --yes to confirm when not on a terminal")
    answer = input(f"{question} [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        raise Aborted("aborted")


# -- names to ids -------------------------------------------------------------------------
def me(client: TiClient) -> str | None:
    try:
        return (client.get("/me") or {}).get("name")
    except ApiError:
        return None


def resolve_id(client: TiClient, path: str, ref: str, what: str,
               items: Iterable[Mapping[str, Any]] | None = None) -> Any:
    """The id of a resource addressed by id, NAME or OWNER/NAME (only ids in its URL).

    All-digit references are ids. A name that matches several (mine and one shared with me)
    resolves to mine; still ambiguous, it is refused with the ids to use.
    """
    ref = str(ref)
    if ref.isascii() and ref.isdigit():
        return int(ref)
    owner = None
    name = ref
    if "/" in ref:
        owner, name = ref.split("/", 1)
    rows = list(items if items is not None else client.paginate(path))
    hits = [r for r in rows if r.get("name") == name and (owner is None or r.get("owner") == owner)]
    if len(hits) > 1 and owner is None:
        mine = me(client)
        own = [r for r in hits if r.get("owner") in (None, mine)]
        if len(own) == 1:
            hits = own
    if not hits:
        raise ApiError(404, "not_found", f"no {what} named {ref!r}", None)
    if len(hits) > 1:
        ids = ", ".join(f"{r.get('id')} ({r.get('owner', '?')})" for r in hits)
        raise ApiError(409, "ambiguous", f"several {what}s are named {ref!r}; use an id: {ids}", None)
    return hits[0].get("id")


def items_of(doc: Any) -> list[Any]:
    if isinstance(doc, list):
        return doc
    if isinstance(doc, Mapping) and isinstance(doc.get("items"), list):
        return doc["items"]
    return []
