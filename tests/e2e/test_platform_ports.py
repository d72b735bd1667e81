"""Issue 30, finding 2: a job that takes the platform's ports while it restarts gets nothing from the next start.

Jobs keep running across `ti-hub start` restarts and (until they get network namespaces of their own) share the
host's network. A job looping bind() on the hub's API port takes it as soon as the platform stops. The next start
used to fail with a bare bind error, or send the proxy's persistent token to whoever held the proxy API's port;
now it refuses to start, naming the holder (pid, uid, command), and the proxy's token is new at every start. The
IPv6 loopback counterparts of the platform's ports are held by the launcher, so no job listens there for clients
that resolve ``localhost`` to ``::1``.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from hubproc import ADMIN, ADMIN_PASSWORD, start_hub, stop_hub, terminate_group
from tihub_client import wait

pytestmark = pytest.mark.e2e

SQUAT = """python3 - <<'PY'
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
print("waiting", flush=True)
end = time.monotonic() + 300
while time.monotonic() < end:
    try:
        s.bind(("127.0.0.1", {port})); s.listen(); break
    except OSError:
        time.sleep(0.01)
print("holding", flush=True)
time.sleep(300)
PY"""


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
        hub.admin = hub.login(ADMIN, ADMIN_PASSWORD)
        hub.admin.ok("POST", "/plans", json={"name": "port-tiny", "kinds": ["single"], "device_type": "cpu",
                                             "device_count": 0, "cpu": 0.1, "memory_mib": 256})
        job = hub.admin.ok("POST", "/jobs", json={"name": "squat", "plan": "port-tiny", "image": "python-cpu",
                                                  "command": SQUAT.format(port=ports["hub"])})
        hub.admin.wait_job(job["id"], states=("running",), timeout=90)
        log = data / "jobs" / str(job["id"]) / "logs" / "instance-0.log"
        wait(lambda: log.exists() and "waiting" in log.read_text(), 60, "the squatting job")
        terminate_group(proc)  # the platform stops; its jobs run on, in sessions of their own
        wait(lambda: "holding" in log.read_text(), 30, "the job to take the hub's port")
        with pytest.raises(RuntimeError):
            start_hub(data, ports=ports)
        said = (tmp_path / "data.log").read_text()
        line = next(x for x in said.splitlines() if f"port {ports['hub']}" in x)
        assert "the hub's API" in line and "held on 127.0.0.1 by pid" in line and "uid" in line, line
        assert "not started; nothing was changed" in said
        assert (data / "proxy_token").read_text() == token1  # a refused start sends and changes nothing
        # the holder it names is the job's process: stopped, the platform starts again, with a new token
        pid = int(line.split("by pid ")[1].split()[0])
        assert "python3" in Path(f"/proc/{pid}/cmdline").read_text()
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
        proc, hub, ports = start_hub(data, ports=ports)
        assert (data / "proxy_token").read_text() != token1
    finally:
        stop_hub(proc)
