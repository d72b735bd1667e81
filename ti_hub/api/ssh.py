"""/ssh/command (anyone: the command to copy), /ssh/keys/{user} and /ssh/targets/{user} (the SSH gateway)."""

from __future__ import annotations

from ..domain import validation as v
from ..domain.errors import NotFound
from ..ops import sshaccess
from ..ssh.logins import ssh_command
from ..ssh.settings import TiSSHGateway
from .base import APIHandler


def request_host(host_header: str) -> str:
    """The host of a Host header without its port (ssh takes an IPv6 address bare), or "" when it is not a plain
    name or address (it ends up in a command users copy)."""
    host = (host_header or "").strip()
    if host.startswith("["):
        name = host[1:host.find("]")] if "]" in host else ""
    else:
        name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return name if name and all(ch.isalnum() or ch in ".-_:" for ch in name) else ""


class SSHCommandHandler(APIHandler):
    async def get(self):
        args = self.args()
        v.check_fields(args, ("name", "instance"))
        gw = TiSSHGateway(config=self.ti.config)
        if not gw.port:
            raise NotFound("the SSH gateway is turned off on this TiHub")
        name = v.name(args["name"]) if args.get("name") else None
        instance = v.parse_int(args["instance"], "instance", 0, 99_999) if args.get("instance") else None
        host, port = gw.shown_host(seen=request_host(self.request.host)), gw.shown_port()
        login = self.actor.name + (f"+{name}" if name else "") + (f".{instance}" if instance is not None else "")
        self.send({"command": ssh_command(self.actor.name, name, host, port, instance), "login": login,
                   "host": host, "port": port})


class SSHKeysHandler(APIHandler):
    async def get(self, user: str):
        self.send(await self.op(sshaccess.keys_of, self.actor, user))


class SSHTargetsHandler(APIHandler):
    async def get(self, user: str):
        self.send(await self.op(sshaccess.targets_of, self.actor, user, self.args().get("name") or None))
