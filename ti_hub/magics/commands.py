"""The `ti` CLI's commands run inside a kernel: the same parsers and handlers, errors as one line.

Nothing here imports IPython: the magics (magics.py) are a thin shell over `run` and `submit_parser`.
Settings come from ti_hub.cli.config exactly as for `ti` in a workspace terminal: TI_API_URL and the
workspace's JUPYTERHUB_API_TOKEN (or TI_TOKEN, or the file written by `ti login`).
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from ..cli import submit as cli_submit
from ..cli.client import ApiError, TiConnectionError
from ..cli.common import Formatter, examples
from ..cli.config import Aborted, NotLoggedIn, UsageError

# the commands behind the line magics: %ti_jobs ARGS is `ti job list ARGS`, and so on
MAGIC_COMMANDS = {
    "ti": (),
    "ti_jobs": ("job", "list"),
    "ti_logs": ("job", "logs"),
    "ti_kill": ("job", "kill"),
    "ti_queue": ("queue",),
    "ti_quota": ("quota",),
    "ti_tensorboard": ("job", "tensorboard"),
    "ti_vc": ("vc", "use"),
    "ti_renew": ("workspace", "renew"),
}


class MagicError(Exception):
    """A command that cannot be acted on or that the API refused: one line for the user, no traceback."""


class HelpShown(Exception):
    """--help was printed; nothing else to do."""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser that never exits the kernel: errors become MagicError, --help HelpShown."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        raise MagicError(message)

    def exit(self, status: int = 0, message: str | None = None):
        if status:
            raise MagicError((message or "invalid arguments").strip())
        raise HelpShown()


_PARSERS: dict[str, argparse.ArgumentParser] = {}


def cli_parser() -> argparse.ArgumentParser:
    """The `ti` command tree, built once per kernel."""
    if "ti" not in _PARSERS:
        from ..cli.main import build_parser

        _PARSERS["ti"] = build_parser(OneLineParser, prog="%ti")
    return _PARSERS["ti"]


def submit_parser() -> argparse.ArgumentParser:
    """`ti job submit`'s options, plus the cell magic's own: --python and --no-monitor."""
    if "submit" not in _PARSERS:
        root = OneLineParser(prog="%%ti_submit", formatter_class=Formatter)
        sub = root.add_subparsers(dest="_command")
        cli_submit.register(sub)
        p = sub.choices["submit"]
        p.prog = "%%ti_submit"
        p.description = ("Submit the cell as a training job. Without --python the cell is the job's command, "
                         "a shell script run by /bin/sh -c like every job command; with --python it is Python "
                         "code run by `python3 -u -c`. Returns a live monitor unless --no-monitor, -f or --wait.")
        p.epilog = examples(
            "%%ti_submit --name mnist --plan demo-gpu-1 --image pytorch-gpu --env EPOCHS=3",
            "python3 /home/me/train.py --epochs $EPOCHS",
            "",
            "%%ti_submit --name ddp --kind distributed --workers 2 --plan cpu-small --image python-cpu --python",
            "import os; print('rank', os.environ['RANK'])",
            "",
            "%%ti_submit --name quick --plan cpu-small --image python-cpu -f      # the log in the cell",
            "echo hi; sleep 1",
        )
        for action in p._actions:  # the command is the cell, never words after `--`
            if action.dest == "command":
                action.help = argparse.SUPPRESS
        p.add_argument("--python", action="store_true", help="the cell is Python code (run by python3 -u -c)")
        p.add_argument("--no-monitor", dest="no_monitor", action="store_true",
                       help="print the submitted job and return nothing (no widget)")
        _PARSERS["submit"] = root
    return _PARSERS["submit"]


def split_line(line: str) -> list[str]:
    try:
        return shlex.split(line or "")
    except ValueError as e:  # an unclosed quote
        raise MagicError(f"cannot read the options: {e}") from None


def parse(magic: str, line: str) -> argparse.Namespace:
    """The parsed command line of a line magic (MagicError or HelpShown otherwise)."""
    argv = [*MAGIC_COMMANDS[magic], *split_line(line)]
    if not argv:
        cli_parser().print_help()
        raise HelpShown()
    return cli_parser().parse_args(argv)


def parse_submit(line: str) -> argparse.Namespace:
    return submit_parser().parse_args(["submit", *split_line(line)])


def error_line(e: BaseException) -> str:
    """One line saying what went wrong, in the API's words and with the field it names."""
    if isinstance(e, ApiError):
        msg = e.detail
        if e.field:
            msg += f" (field: {e.field})"
        quota = [f"{k} {e.extra[k]}" for k in ("resource", "requested", "used", "limit")
                 if e.extra.get(k) is not None]
        if quota:
            msg += "; " + ", ".join(quota)
        if e.status == 401:
            msg += "; the token was refused (TI_API_URL and JUPYTERHUB_API_TOKEN or TI_TOKEN)"
        return msg
    if isinstance(e, argparse.ArgumentTypeError):
        return str(e)
    if isinstance(e, (TiConnectionError, NotLoggedIn, UsageError, Aborted, MagicError)):
        return str(e)
    return f"{type(e).__name__}: {e}"


EXPECTED = (ApiError, TiConnectionError, NotLoggedIn, UsageError, Aborted, MagicError)


def run(magic: str, line: str) -> int | None:
    """Runs the `ti` command behind a line magic; MagicError (one line) for every expected failure."""
    try:
        args = parse(magic, line)
    except HelpShown:
        return None
    if getattr(args, "func", None) is None:  # a group without its subcommand: argparse printed nothing
        raise MagicError(f"{' '.join(['%' + magic, *split_line(line)])}: which command? (add --help)")
    return call(args.func, args)


def call(func: Any, *args: Any) -> Any:
    try:
        return func(*args)
    except EXPECTED as e:
        raise MagicError(error_line(e)) from None
    except KeyboardInterrupt:
        print("(interrupted)")
        return None

