"""The platform's own ports, before `ti-hub start` starts anything: nobody else holds them, and the loopback family
the platform does not serve cannot be taken either.

Jobs keep running across restarts. A job that binds the hub's, the proxy API's or the SSH gateway's port while
the platform is down would be sent the proxy's token, or the admin's password, by the next start; so `ti-hub
start` refuses to start while any of its ports is held, naming the holder (pid, uid, command). The platform
listens on 127.0.0.1; a client that resolves ``localhost`` to ``::1`` first would reach whoever listens on
``[::1]`` with the same port, so for the platform's lifetime the launcher holds each port's IPv6 counterpart
bound but not listening: nobody else can bind it, and a connection there is refused at once (clients then try
127.0.0.1).
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from ..backends.local.sockets import all_listeners, socket_inodes

V6_OF = {"127.0.0.1": "::1", "0.0.0.0": "::"}  # the IPv6 counterpart the launcher holds for a v4 address


@dataclass(frozen=True)
class Holder:
    pid: int | None
    uid: int
    command: str

    def __str__(self) -> str:
        who = f"pid {self.pid}" if self.pid else "a process this user cannot see"
        return f"{who} (uid {self.uid}{': ' + self.command if self.command else ''})"


def holders(port: int) -> list[Holder]:
    """Who listens on ``port``: each socket's owner uid and, where /proc shows it, the process holding it."""
    inodes = {x.inode: x.uid for x in all_listeners(port)}
    found: dict[int, Holder] = {}
    if inodes:
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                for ino in (socket_inodes(entry.name) & inodes.keys()) - found.keys():
                    found[ino] = Holder(int(entry.name), inodes[ino], _command(int(entry.name)))
    return [found.get(ino, Holder(None, uid, "")) for ino, uid in inodes.items()]


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()[:120]
    except OSError:
        return ""


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def _try_bind(address: str, port: int) -> socket.socket | None:
    """A socket bound to (address, port), or None when someone else holds it. Raises OSError when the address
    does not exist here (no IPv6)."""
    s = socket.socket(_family(address), socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a connection in TIME_WAIT is no holder
        if s.family == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        s.bind((address, port))
        return s
    except OSError as e:
        s.close()
        if e.errno == errno.EADDRINUSE:
            return None
        raise


def claim(ports: Iterable[tuple[str, str, int]]) -> tuple[list[socket.socket], list[str]]:
    """For each (what, v4 address, port): check that the port is free on that address and hold its IPv6
    counterpart. Returns the held sockets (keep them open while the platform runs) and the problems found,
    one plain sentence each; with problems, nothing is held."""
    held: list[socket.socket] = []
    problems: list[str] = []
    for what, address, port in ports:
        if not port:
            continue
        for addr, keep in ((address, False), (V6_OF.get(address), True)):
            if addr is None:
                continue
            try:
                s = _try_bind(addr, port)
            except OSError:
                continue  # this machine has no such address (IPv6 off): nobody can take it either
            if s is None:
                who = "; ".join(str(h) for h in holders(port)) or "another process"
                problems.append(f"port {port} ({what}) is held on {addr} by {who}: stop it, or give TiHub another "
                                "port")
            elif keep:
                held.append(s)
            else:
                s.close()
    if problems:
        for s in held:
            s.close()
        return [], problems
    return held, problems
