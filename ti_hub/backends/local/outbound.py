"""Pure: whether sandboxes that have a network of their own also get a way out, and what they may never reach.

A job's or workspace's namespace (portal.py) has only its loopback. With slirp4netns (Debian ``slirp4netns``) it
also gets user-mode networking out through the host, as pip, dataset downloads and git need: connections leave
from the host's network as the platform's own sockets, the gateway never leads to the host's loopback
(``--disable-host-loopback``), and the host's own addresses and the ``deny`` ranges (cloud metadata services by
default) are unreachable routes inside the namespace.
"""

from __future__ import annotations

import ipaddress
import shutil
from collections.abc import Callable, Sequence
from typing import Any

CHOICES = ("auto", "slirp4netns", "off")
# link-local (the metadata services of most clouds, 169.254.169.254) and Alibaba Cloud's
DEFAULT_DENY = ("169.254.0.0/16", "100.100.100.200/32")


def check_deny(values: Sequence[str]) -> list[str]:
    """Each entry an IPv4 address or network (``10.0.0.0/8``); raises ValueError naming the first that is not."""
    out = []
    for v in values:
        try:
            net = ipaddress.ip_network(str(v), strict=False)
        except ValueError:
            raise ValueError(f"{v!r} is not an IPv4 address or network (e.g. 10.0.0.0/8)") from None
        if net.version != 4:
            raise ValueError(f"{v!r}: only IPv4 ranges apply (sandboxes have no IPv6 out)")
        out.append(str(net))
    return out


def decide(setting: str, deny: Sequence[str], which: Callable[[str], str | None] = shutil.which
           ) -> tuple[dict[str, Any] | None, str]:
    """(the portal's ``outbound`` config or None, the sentence the platform logs when it starts).

    ``auto``: slirp4netns when installed, else none. ``slirp4netns``: required; raises RuntimeError without it
    (each launch fails saying so). ``off``: none."""
    if setting == "off":
        return None, "no outbound network (LocalBackend.outbound_network is off)"
    path = which("slirp4netns")
    if path is None:
        if setting == "slirp4netns":
            raise RuntimeError("LocalBackend.outbound_network is slirp4netns, but slirp4netns is not installed "
                               "(apt-get install slirp4netns)")
        return None, "no outbound network: slirp4netns is not installed (apt-get install slirp4netns to give one)"
    said = ", ".join(deny) if deny else "nothing more"
    return ({"slirp": path, "deny": list(deny)},
            f"outbound network through {path} (never the host's loopback or its own addresses; also unreachable: "
            f"{said})")
