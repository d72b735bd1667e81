"""Issue 30, finding 2: whoever takes the platform's ports while it restarts gets nothing from the next start.

Jobs keep running across `ti-hub start` restarts; they now have networks of their own
(tests/e2e/test_job_network.py), but any other process of the machine can still loop bind() on the hub's API port
and take it as soon as the platform stops. The next start used to fail with a bare bind error, or send the proxy's
persistent token to whoever held the proxy API's port; now it refuses to start, naming the holder (pid, uid,
command), and the proxy's token is new at every start. The
IPv6 loopback counterparts of the platform's ports are held by the launcher, so no job listens there for clients
that resolve ``localhost`` to ``::1``.
"""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys

import pytest

from hubproc import start_hub, stop_in_background, terminate_group

pytestmark = pytest.mark.e2e

SQUAT = """
import os, socket, sys, time
if os.geteuid() == 0:
    os.setgid(65534); os.setuid(65534)  # not the platform's user: a job's would be another uid again
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
print("waiting", flush=True)
end = time.monotonic() + 120
while time.monotonic() < end:
    try:
        s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); break
    except OSError:
        time.sleep(0.01)
print("holding", flush=True)
time.sleep(120)
"""


def has_ipv6() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def test_a_port_taken_during_a_restart_is_refused_naming_its_holder(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    proc, hub, ports = start_hub(data)
    squat = None
    try:
        token1 = (data / "proxy_token").read_text()
        if has_ipv6():  # the launcher holds [::1] on the platform's ports: bound, never listening
            for port in (ports["port"], ports["hub"], ports["proxy"], ports["service"]):
                with socket.socket(socket.AF_INET6) as s:
                    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                    with pytest.raises(OSError) as e:
                        s.bind(("::1", port))
                    assert e.value.errno == errno.EADDRINUSE, port
                with socket.socket(socket.AF_INET6) as s:
                    assert s.connect_ex(("::1", port)) == errno.ECONNREFUSED, port
        # a process of another user on this machine, waiting for the hub's API port to come free (a job no
        # longer can: it has a network of its own, tests/e2e/test_job_network.py)
        squat = subprocess.Popen([sys.executable, "-c", SQUAT, str(ports["hub"])], stdout=subprocess.PIPE, text=True)
        assert squat.stdout.readline().strip() == "waiting"
        terminate_group(proc)  # the platform stops; its jobs run on, in sessions of their own
        assert squat.stdout.readline().strip() == "holding"  # it took the port as the platform stopped
        with pytest.raises(RuntimeError):
            start_hub(data, ports=ports)
        said = (tmp_path / "data.log").read_text()
        line = next(x for x in said.splitlines() if f"port {ports['hub']}" in x)
        assert "the hub's API" in line and "held on 127.0.0.1 by pid" in line and "uid" in line, line
        assert "not started; nothing was changed" in said
        assert (data / "proxy_token").read_text() == token1  # a refused start sends and changes nothing
        # the holder it names is that process: stopped, the platform starts again, with a new token
        assert int(line.split("by pid ")[1].split()[0]) == squat.pid
        assert f"uid {65534 if os.geteuid() == 0 else os.geteuid()}" in line
        squat.kill()
        squat.wait()
        proc, hub, ports = start_hub(data, ports=ports)
        assert (data / "proxy_token").read_text() != token1
    finally:
        if squat is not None and squat.poll() is None:
            squat.kill()
        stop_in_background(proc)  # nothing checks this last stop
