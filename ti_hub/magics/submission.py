"""What a %%ti_submit cell or the submit form becomes: the body of POST /jobs (pure, no I/O).

The cell is the job's command:

- by default it is a shell script, sent as it is: every job command runs with `/bin/sh -c` (local and
  Kubernetes backends alike), so a cell of several lines runs line after line, exactly as
  `ti job submit -- '...'` or the Jobs panel's command field would run it, and `ti job show` shows what
  was written;
- with --python it is Python code, run by `python3 -u -c '<cell>'` (-u: unbuffered, so print() reaches the
  live log at once instead of at exit).

The job does not run in the notebook's directory or kernel: it sees the image, its volumes and its env.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import textwrap
from collections.abc import Mapping
from typing import Any

from ..cli import submit as cli_submit
from .commands import MagicError

PYTHON = "python3 -u -c"


def cell_command(cell: str | None, python: bool = False) -> str | None:
    """The job's command for a cell; None for an empty cell."""
    text = textwrap.dedent(cell or "").strip("\n")
    if not text.strip():
        return None
    text = "\n".join(line.rstrip() for line in text.splitlines())
    if python:
        return f"{PYTHON} {shlex.quote(text + chr(10))}"
    return text


def default_name(now: dt.datetime | None = None) -> str:
    """A name for a job submitted without --name: nb-MMDD-HHMMSS (valid and unique enough per user)."""
    now = now or dt.datetime.now()
    return now.strftime("nb-%m%d-%H%M%S")


def magic_submission(args: argparse.Namespace, cell: str | None, now: dt.datetime | None = None) -> dict[str, Any]:
    """The POST /jobs body of %%ti_submit: the CLI's flags (cli.submit.build_submission) and the cell."""
    if args.command:
        raise MagicError("write the job's command in the cell, not after `--` on the line")
    command = cell_command(cell, python=args.python)
    args.command = [command] if command else []
    body = cli_submit.build_submission(args)
    if not body.get("command") and not body.get("template"):
        raise MagicError("the cell is empty: write the job's command in the cell (or give --template)")
    body.setdefault("name", default_name(now))
    return body


# -- the submit form ----------------------------------------------------------------------------
def _lines(text: str | None) -> list[str]:
    return [t.strip() for t in (text or "").splitlines() if t.strip() and not t.strip().startswith("#")]


def _parsed(kind: Any, value: str, field: str) -> Any:
    try:
        return kind(value)
    except argparse.ArgumentTypeError as e:
        raise MagicError(f"{e} (field: {field})") from None


def form_submission(values: Mapping[str, Any]) -> dict[str, Any]:
    """The POST /jobs body of the submit form's values (text fields as a person types them).

    values: name, kind, strategy, workers, ps, plan, image, command, python (bool), env ("KEY=VALUE" lines),
    volumes ("NAME:/mnt/path[:ro]" lines), ports ("40001, 40002"), estimated_duration ("90m"), description.
    Empty fields are left out: the API names what is missing.
    """
    body: dict[str, Any] = {}
    for key in ("name", "plan", "image", "description"):
        v = str(values.get(key) or "").strip()
        if v:
            body[key] = v
    kind = values.get("kind") or "single"
    body["kind"] = kind
    if kind == "distributed":
        strategy = values.get("strategy") or "allreduce"
        body["strategy"] = strategy
        if values.get("workers") not in (None, ""):
            body["workers"] = int(values["workers"])
        if strategy == "ps" and values.get("ps") not in (None, ""):
            body["ps"] = int(values["ps"])
    command = cell_command(values.get("command"), python=bool(values.get("python")))
    if command:
        body["command"] = command
    env = dict(_parsed(cli_submit.env_pair, line, "env") for line in _lines(values.get("env")))
    if env:
        body["env"] = env
    volumes = [_parsed(cli_submit.volume_mount, line, "volumes") for line in _lines(values.get("volumes"))]
    if volumes:
        body["volumes"] = volumes
    ports = _parsed(cli_submit.port_list, str(values.get("ports") or ""), "ports")
    if ports:
        body["ports"] = ports
    duration = str(values.get("estimated_duration") or "").strip()
    if duration:
        body["estimated_duration"] = _parsed(cli_submit.duration, duration, "estimated_duration")
    return body
