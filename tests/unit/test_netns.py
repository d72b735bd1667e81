"""backends/local/portal.py and netns.py: a sandbox's own network and the platform's only doors into it
(issue 30, findings 2 and 3). Real namespaces: root only, as in CI."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from ti_hub.backends.local import netns, procs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (as in CI)")

INSIDE = """
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
print("up", flush=True)
c, _ = s.accept(); c.sendall(b"inside:" + c.recv(10)); c.close()
"""
PROBE = """
import socket, sys
for port in map(int, sys.argv[1:]):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close(); print(port, "open")
    except OSError as e:
        print(port, type(e).__name__)
"""


def test_the_platform_reaches_in_and_the_sandbox_reaches_only_what_is_relayed_out(tmp_path):
    os.chmod(tmp_path, 0o700)
    hub = socket.socket()
    hub.bind(("127.0.0.1", 0))
    hub.listen()
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen()
    hub_port, other_port = hub.getsockname()[1], other.getsockname()[1]
    net = netns.start(str(tmp_path / "net"), sys.executable, [5555], [(7777, hub_port)])
    server = None
    try:
        server = subprocess.Popen([sys.executable, "-c", INSIDE, "5555"], stdout=subprocess.PIPE, text=True,
                                  preexec_fn=lambda: netns.join(net["netns"]))
        assert server.stdout.readline().strip() == "up"
        with socket.create_connection(("127.0.0.1", netns.host_port(net, 5555)), timeout=5) as c:
            c.sendall(b"ping")
            assert c.recv(100) == b"inside:ping"
        probe = subprocess.run([sys.executable, "-c", PROBE, str(hub_port), str(other_port), "7777"],
                               capture_output=True, text=True, preexec_fn=lambda: netns.join(net["netns"]))
        assert probe.stdout.split("\n")[:3] == [f"{hub_port} ConnectionRefusedError",
                                                f"{other_port} ConnectionRefusedError", "7777 open"], probe
        hub.settimeout(5)
        hub.accept()[0].close()  # the relayed connection arrived at the host's port
        extra = netns.host_port(net, 6000)  # a port opened later gets its own relay
        assert extra not in (0, netns.host_port(net, 5555)) and netns.host_port(net, 6000) == extra
        # a socket made in the namespace of a process inside is inside too
        s = netns.socket_of(net["pid"])  # the portal lives inside
        assert s is not None and s.connect_ex(("127.0.0.1", hub_port)) != 0
        s.close()
    finally:
        if server is not None:
            server.kill()
            server.wait()
        netns.stop(net)
    assert not os.path.exists(net["netns"]) and not procs.is_alive(net["pid"], net["start_time"])


def test_a_portal_ends_and_unpins_its_namespace_once_nothing_runs_in_it(tmp_path):
    os.chmod(tmp_path, 0o700)
    net = netns.start(str(tmp_path / "net"), sys.executable, [])
    member = subprocess.Popen(["sleep", "5"], preexec_fn=lambda: netns.join(net["netns"]))
    time.sleep(3)
    assert procs.is_alive(net["pid"], net["start_time"])  # someone runs inside: it stays
    member.wait()
    deadline = time.monotonic() + 20  # it looks every 2 s
    while procs.is_alive(net["pid"], net["start_time"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not procs.is_alive(net["pid"], net["start_time"])
    with open("/proc/self/mounts") as f:
        assert net["netns"] not in f.read()  # unpinned: the namespace is gone with its last process
    netns.stop(net)
