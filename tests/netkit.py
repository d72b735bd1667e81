"""An address outside the machine's own, for tests of sandboxes' outbound network, without leaving the machine:
a network namespace this test run makes, reached from the host over a veth pair. 198.18.0.2 (a benchmarking
range, never routed) serves OUTSIDE on a port; the host's end, 198.18.0.1, is an address of the host itself,
where (as on every address of the host, loopback included) a server answers HOST on the same port.

A plain module, not a conftest: test packages with conftests of their own import it by this name.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

SERVE = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(); print("up", flush=True)
while True:
    c, _ = s.accept(); c.sendall(sys.argv[3].encode()); c.close()
"""
OUTSIDE = "198.18.0.2"


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


@contextlib.contextmanager
def outside_namespace() -> Iterator[tuple[str, int]]:
    """(the namespace's name under /run/netns, the port both servers listen on); all removed on exit."""
    name, veth = f"ti-out-{os.getpid()}", f"tio{os.getpid() % 100000}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    subprocess.run(["ip", "link", "del", veth], capture_output=True)
    sh("ip", "netns", "add", name)
    servers = []
    try:
        sh("ip", "link", "add", veth, "type", "veth", "peer", "name", veth + "p")
        sh("ip", "link", "set", veth + "p", "netns", name)
        sh("ip", "addr", "add", "198.18.0.1/30", "dev", veth)
        sh("ip", "link", "set", veth, "up")
        for cmd in (["ip", "addr", "add", f"{OUTSIDE}/30", "dev", veth + "p"], ["ip", "link", "set", veth + "p", "up"],
                    ["ip", "link", "set", "lo", "up"]):
            sh("ip", "netns", "exec", name, *cmd)
        with socket.socket() as free:
            free.bind(("0.0.0.0", 0))
            port = free.getsockname()[1]
        for where, host, text in ((["ip", "netns", "exec", name], OUTSIDE, "OUTSIDE"), ([], "0.0.0.0", "HOST")):
            p = subprocess.Popen([*where, sys.executable, "-c", SERVE, host, str(port), text],
                                 stdout=subprocess.PIPE, text=True)
            servers.append(p)
            if p.stdout.readline().strip() != "up":
                raise RuntimeError(f"the test server on {host}:{port} did not start")
        yield name, port
    finally:
        for p in servers:
            p.kill()
            p.wait()
        subprocess.run(["ip", "link", "del", veth], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
