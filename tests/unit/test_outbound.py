"""Issue 30: a sandbox's way out (backends/local/outbound.py, portal.py with slirp4netns).

The pure choices, then a real namespace: its outbound traffic reaches an address outside (a veth pair into a
namespace this test makes: nothing leaves the machine), never the host's loopback, its own addresses or a denied
range; slirp4netns ends with the portal, and the host's own pinned namespaces (/run/netns, a shared mount) are
untouched by its sandbox.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

import netkit
from ti_hub.backends.local import devices, netns, outbound, portal, procs

FIB = textwrap.dedent("""\
    Main:
      +-- 0.0.0.0/0 3 0 5
         |-- 0.0.0.0
            /0 universe UNICAST
         +-- 127.0.0.0/8 2 0 2
            +-- 127.0.0.0/31 1 0 0
               |-- 127.0.0.0
                  /8 host LOCAL
               |-- 127.0.0.1
                  /32 host LOCAL
         |-- 192.0.2.0
            /24 link UNICAST
         |-- 192.0.2.2
            /32 host LOCAL
         |-- 198.18.0.1
            /32 host LOCAL
    Local:
      +-- 0.0.0.0/0 3 0 5
         |-- 192.0.2.2
            /32 host LOCAL
    """)


def test_the_hosts_own_addresses_are_read_from_the_fib(tmp_path):
    f = tmp_path / "fib_trie"
    f.write_text(FIB)
    assert portal.host_addresses(str(f)) == ["192.0.2.2", "198.18.0.1"]


def test_the_choice_of_a_way_out():
    assert outbound.decide("off", ["10.0.0.0/8"], lambda _: "/usr/bin/slirp4netns")[0] is None
    cfg, said = outbound.decide("auto", ["169.254.0.0/16"], lambda _: "/usr/bin/slirp4netns")
    assert cfg == {"slirp": "/usr/bin/slirp4netns", "deny": ["169.254.0.0/16"]} and "169.254.0.0/16" in said
    cfg, said = outbound.decide("auto", [], lambda _: None)
    assert cfg is None and "apt-get install slirp4netns" in said
    with pytest.raises(RuntimeError, match="not installed"):
        outbound.decide("slirp4netns", [], lambda _: None)


def test_denied_ranges_are_checked():
    assert outbound.check_deny(["10.1.2.3", "172.16.0.0/12"]) == ["10.1.2.3/32", "172.16.0.0/12"]
    with pytest.raises(ValueError, match="'nope' is not an IPv4"):
        outbound.check_deny(["nope"])
    with pytest.raises(ValueError, match="only IPv4"):
        outbound.check_deny(["fd00::/8"])


def test_a_sandbox_sees_only_the_gpus_its_work_holds(tmp_path):
    for name in ("nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1", "nvidia2", "nvidia3"):
        (tmp_path / name).touch()
    known = {0: {"minor": 0, "uuid": "GPU-a"}, 1: {"minor": 3, "uuid": "GPU-b"}, 2: {"minor": 1, "uuid": "GPU-c"}}
    nodes, visible = devices.binding([1, 2], known, str(tmp_path))
    assert [inside for _, inside in nodes] == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia3", "/dev/nvidia1"]
    assert visible == "GPU-b,GPU-c"  # by UUID: CUDA finds them whatever numbering the sandbox's nodes give
    assert devices.binding([], known, str(tmp_path)) == ((), "")  # no GPU held: no GPU node at all
    nodes, visible = devices.binding([2], {}, str(tmp_path))  # configured devices: index = node number
    assert nodes[-1] == (str(tmp_path / "nvidia2"), "/dev/nvidia2") and visible == "2"


PROBE = """
import json, socket, sys
out = {}
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=3) as c:
            out[target] = c.recv(100).decode() or "connected"
    except OSError as e:
        out[target] = type(e).__name__
print(json.dumps(out))
"""
@pytest.fixture
def outside():
    if os.geteuid() != 0 or not shutil.which("slirp4netns") or not shutil.which("ip"):
        pytest.skip("needs root, slirp4netns and iproute2 (as in CI)")
    with netkit.outside_namespace() as found:
        yield found


def test_a_sandbox_reaches_out_but_never_back_into_the_host(tmp_path, outside):
    os.chmod(tmp_path, 0o700)
    cfg, _ = outbound.decide("slirp4netns", ["203.0.113.0/24"])
    name, port = outside
    net = netns.start(str(tmp_path / "net"), sys.executable, [], outbound=cfg)
    try:
        targets = [f"198.18.0.2:{port}",  # outside: reached
                   f"10.0.2.2:{port}",  # the gateway, which would lead to the host's loopback
                   f"198.18.0.1:{port}", f"127.0.0.1:{port}",  # the host's own address; the sandbox's loopback
                   f"203.0.113.9:{port}"]  # a denied range
        probe = subprocess.run([sys.executable, "-c", PROBE, *targets], capture_output=True, text=True, timeout=60,
                               preexec_fn=lambda: netns.join(net["netns"]))
        seen = json.loads(probe.stdout)
        assert seen[f"198.18.0.2:{port}"] == "OUTSIDE", seen
        assert "HOST" not in seen.values(), seen
        # unreachable routes answer at once, not after a timeout
        assert seen[f"198.18.0.1:{port}"] == seen[f"203.0.113.9:{port}"] == "OSError", seen
        slirp = procs.descendants(net["pid"], procs.snapshot())
        assert slirp, "slirp4netns runs as the portal's child"
        # its sandbox unmounted nothing of the host's: the test's namespace is still pinned
        with open("/proc/self/mounts") as f:
            assert f"/run/netns/{name}" in f.read()
    finally:
        netns.stop(net)
    deadline = time.monotonic() + 5
    while any(procs.is_alive(pid) for pid in slirp) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(procs.is_alive(pid) for pid in slirp), "slirp4netns ends with the portal"
