"""Pure: what an SSH login name asks for, which workspace or job it reaches, and the command users copy.

Login names (the ``user`` of ``ssh user@host``):

- ``alice``               alice's default workspace: the one named ``default`` if it runs, else her only running one;
- ``alice+dev-box``       alice's workspace ``dev-box``, or her SSH-enabled job ``dev-box`` (instance 0);
- ``alice+train-1.3``     instance 3 of alice's SSH-enabled job ``train-1``.

The last ``+`` separates the account from the target (workspace and job names cannot contain ``+``), and a
trailing ``.N`` is an instance number (names cannot contain ``.`` either).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from ..domain.validation import NAME_RE, NAME_RULE, is_digits

MAX_INSTANCE = 100_000
USER_RE = re.compile(r"[^\s/+\x00-\x1f\x7f]{1,255}\Z")
DEFAULT = "default"
RUNNING = "running"


class LoginError(ValueError):
    """A login name that names nothing valid (the client is told only 'permission denied')."""


class TargetError(Exception):
    """The login is fine, but there is nothing to connect to; ``message`` is shown to the user."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Login:
    user: str
    target: str | None = None  # a workspace or job name; None: the default workspace
    instance: int | None = None  # a job instance; None: 0

    @property
    def label(self) -> str:
        out = self.user + (f"+{self.target}" if self.target else "")
        return out + (f".{self.instance}" if self.instance is not None else "")


def parse_login(username: str) -> Login:
    user, plus, rest = username.rpartition("+")
    if not plus:
        user, rest = username, ""
    if not USER_RE.match(user):
        raise LoginError(f"{username!r}: not a valid account name")
    if not plus:
        return Login(user)
    name, dot, index = rest.partition(".")
    if not NAME_RE.match(name):
        raise LoginError(f"{username!r}: the workspace or job name must be {NAME_RULE}")
    if not dot:
        return Login(user, name)
    if not is_digits(index) or len(index) > 6 or int(index) >= MAX_INSTANCE:
        raise LoginError(f"{username!r}: the instance after '.' must be a number")
    return Login(user, name, int(index))


@dataclass(frozen=True)
class Hints:
    """What messages may point to: the hub (to start workspaces) and the gateway (the command to retry)."""

    hub_url: str = ""
    host: str = "HOST"
    port: int = 22


def ssh_command(user: str, target: str | None, host: str, port: int, instance: int | None = None) -> str:
    login = Login(user, target, instance).label
    port_part = f"-p {int(port)} " if int(port) != 22 else ""
    return f"ssh {port_part}{shlex.quote(login + '@' + host)}"


def spawn_url(hints: Hints, user: str, name: str) -> str:
    base = hints.hub_url.rstrip("/") or "the hub"
    server = "" if name == DEFAULT else f"/{name}"
    return f"{base}/hub/spawn/{user}{server}"


def _stopped(doc: dict[str, Any], login: Login, hints: Hints) -> TargetError:
    name, status = doc["name"], doc["status"]
    if doc["kind"] == "workspace":
        if status in ("queued", "scheduling"):
            return TargetError(f"workspace {name!r} is {status} ({doc.get('reason') or 'starting'}); "
                               "try again when it runs")
        return TargetError(f"workspace {name!r} is {status}: start it at {spawn_url(hints, login.user, name)} "
                           f"(or from {hints.hub_url.rstrip('/') or 'the hub'}/hub/home), then run "
                           f"{ssh_command(login.user, login.target, hints.host, hints.port)} again")
    return TargetError(f"job {name!r} is {status}: SSH reaches running jobs only")


def choose(login: Login, docs: list[dict[str, Any]], hints: Hints) -> dict[str, Any]:
    """The workspace or job this login reaches, from the owner's candidates (``docs``: name, kind, status,
    ssh, instances); TargetError with a message for the user when there is none."""
    if login.target is None:
        return _ssh_enabled(_default_workspace(login, [d for d in docs if d["kind"] == "workspace"], hints))
    doc = next((d for d in docs if d["name"] == login.target), None)
    if doc is None:
        raise TargetError(f"you have no workspace or job named {login.target!r}")
    if doc["kind"] == "workspace":
        if login.instance not in (None, 0):
            raise TargetError(f"workspace {doc['name']!r} has one instance: drop the '.{login.instance}'")
        _ssh_enabled(doc)
    elif not doc.get("ssh"):
        raise TargetError(f"job {doc['name']!r} does not enable SSH: turn it on with `ti job ssh {doc['name']} --on` "
                          "(or submit it with --endpoint ssh)")
    if doc["status"] != RUNNING:
        raise _stopped(doc, login, hints)
    instances = int(doc.get("instances") or 1)
    if (login.instance or 0) >= instances:
        raise TargetError(f"job {doc['name']!r} has instances 0-{instances - 1}")
    return doc


def _ssh_enabled(doc: dict[str, Any]) -> dict[str, Any]:
    """A workspace started without 'SSH access' (WS3) is not reachable; it is on unless its owner turned it off."""
    if doc["kind"] == "workspace" and not doc.get("ssh", True):
        raise TargetError(f"workspace {doc['name']!r} was started without SSH access: stop it and start it again "
                          "with 'SSH access' ticked")
    return doc


def _default_workspace(login: Login, workspaces: list[dict[str, Any]], hints: Hints) -> dict[str, Any]:
    running = sorted((d for d in workspaces if d["status"] == RUNNING), key=lambda d: d["name"])
    named = next((d for d in workspaces if d["name"] == DEFAULT), None)
    if named is not None and named["status"] == RUNNING:
        return named
    if len(running) == 1:
        return running[0]
    if running:
        names = ", ".join(d["name"] for d in running)
        raise TargetError(f"you have {len(running)} running workspaces ({names}); choose one: "
                          f"{ssh_command(login.user, running[0]['name'], hints.host, hints.port)}")
    if named is not None:
        raise _stopped(named, login, hints)
    base = hints.hub_url.rstrip("/") or "the hub"
    raise TargetError(f"you have no running workspace: start one at {base}/hub/home, then connect with "
                      f"{ssh_command(login.user, 'NAME', hints.host, hints.port)}")
