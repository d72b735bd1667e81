"""JOB6 metrics beside CPU and memory: a real job's disk I/O and network on the embedded platform, through the
API, the CLI, the Prometheus metrics and the notebook monitor's lines. The job writes (and fsyncs) a file of known size, and downloads and
sends known byte counts from and to a server outside the machine's own addresses (tests/netkit.py: a namespace
of this test's, reached through the job's slirp4netns way out)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import netkit
from tihub_client import wait

pytestmark = pytest.mark.e2e

MIB = 1 << 20
# one connection: the server sends DOWN bytes, reads until the client is done sending, says how many it read
SERVE = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(); print("up", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(b"d" * int(sys.argv[3]))
    n = 0
    while (b := c.recv(65536)):
        n += len(b)
    c.sendall(str(n).encode()); c.close()
"""
JOB = """python3 - <<'PY'
import os, socket, time
with open("probe.bin", "wb") as f:
    f.write(os.urandom(8 << 20)); f.flush(); os.fsync(f.fileno())
s = socket.create_connection(("%s", %d), timeout=30)
got = 0
while got < (2 << 20):
    b = s.recv(65536)
    if not b:
        break
    got += len(b)
s.sendall(b"u" * (1 << 20)); s.shutdown(socket.SHUT_WR)
print("got", got, "server read", s.recv(20).decode(), flush=True)
s.close()
t = time.time()
while time.time() - t < 240:  # a steady trickle to disk: a write rate to see
    with open("trickle.bin", "ab") as f:
        f.write(b"t" * 65536); f.flush(); os.fsync(f.fileno())
    time.sleep(0.05)
PY"""


def test_a_jobs_disk_and_network_bytes_show_in_api_cli_and_monitor(hub, new_user, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("jobs get a network of their own (whose traffic is theirs) only on a platform run as root")
    if not shutil.which("slirp4netns"):
        pytest.skip("slirp4netns is not installed (scripts/test installs it)")
    u = new_user("iofig")
    with netkit.outside_namespace() as (ns, _port):
        with socket.socket() as free:
            free.bind(("0.0.0.0", 0))
            port = free.getsockname()[1]
        server = subprocess.Popen(["ip", "netns", "exec", ns, sys.executable, "-c", SERVE, netkit.OUTSIDE, str(port),
                                   str(2 * MIB)], stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout.readline().strip() == "up"
            j = u.ok("POST", "/jobs", json={"name": "io-figures", "plan": "cpu-small", "image": "python-cpu",
                                            "command": JOB % (netkit.OUTSIDE, port)})
            u.wait_job(j["id"], states=("running",))
            line = wait(lambda: "server read" in (t := u.ok("GET", f"/jobs/{j['id']}/logs")["text"]) and t, 90,
                        "the job's download and upload")
            assert f"got {2 * MIB} server read {MIB}" in line, line
        finally:
            server.kill()
            server.wait()

    def figures():
        (m,) = u.ok("GET", f"/jobs/{j['id']}/metrics")["instances"]
        d, n = m["disk"], m["network"]
        ok = d and n and d["write_bytes"] >= 8 * MIB and d["write_bytes_per_s"] > 0 and \
            n["rx_bytes"] >= 2 * MIB and n["tx_bytes"] >= MIB
        return m if ok else None
    try:
        m = wait(figures, 60, "8 MiB written, 2 MiB received and 1 MiB sent in the job's metrics")
        assert m["cpu_cores"] is not None and m["memory_bytes"]  # beside CPU and memory, as before
        assert m["network"]["rx_bytes_per_s"] >= 0 and m["disk"]["read_bytes_per_s"] >= 0

        env = {"TI_API_URL": hub.url, "TI_TOKEN": u.token, "HOME": str(tmp_path), "PATH": "/usr/bin:/bin",
               "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        r = subprocess.run([sys.executable, "-m", "ti_hub.cli.main", "job", "metrics", "io-figures"], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        header, row = r.stdout.splitlines()[:2]
        assert "DISK (read/write)" in header and "NETWORK (in/out)" in header
        assert " MiB)" in row and "/s" in row, row  # rates now, totals so far

        # Prometheus: counters of what it used so far, written by the leader with each health sample (15 s)
        def scraped():
            text = hub.admin.api("GET", "/metrics").text
            got = {}
            for line in text.splitlines():
                if line.startswith("ti_job_") and f'job_id="{j["id"]}"' in line and 'instance="0"' in line:
                    got[line.split("{", 1)[0]] = float(line.rsplit(" ", 1)[1])
            return got if got.get("ti_job_disk_written_bytes_total", 0) >= 8 * MIB else None
        got = wait(scraped, 60, "the job's counters in the Prometheus metrics")
        assert got["ti_job_network_receive_bytes_total"] >= 2 * MIB and \
            got["ti_job_network_transmit_bytes_total"] >= MIB, got
        assert got["ti_job_cpu_seconds_total"] > 0 and got["ti_job_memory_bytes"] > 0, got

        from ti_hub.magics.core import usage_lines

        (now,) = usage_lines(u.ok("GET", f"/jobs/{j['id']}/metrics"))
        assert " · disk read " in now and " · network in " in now, now
    finally:
        u.ok("POST", f"/jobs/{j['id']}/kill")
    u.wait_job(j["id"], states=("killed",))
