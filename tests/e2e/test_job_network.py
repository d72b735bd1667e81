"""Issue 30, findings 2 and 3: every job has a network of its own (its instances share it).

Before, jobs shared the host's network: another user's job read a job's port (its env secret) and the platform's
TensorBoards on 127.0.0.1, and a job could take the hub's ports while the platform restarted. Now a job sees only
its own loopback: nothing of the host's or of other jobs' ports is there, what it binds is its own, and the
platform reaches its ports (endpoints) through the job's portal. Root only, as in CI (namespaces need it).
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

import netkit
from hubproc import own_hub, start_hub, stop_in_background, terminate_group
from tihub_client import free_job_port, wait

pytestmark = pytest.mark.e2e

PROBE = """python3 - <<'PY'
import json, socket
out = {}
for port in %s:
    for host in ("127.0.0.1", "::1"):
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        s.settimeout(3)
        try:
            s.connect((host, port)); out[f"{host}:{port}"] = s.recv(200).decode(errors="replace") or "connected"
        except OSError as e:
            out[f"{host}:{port}"] = type(e).__name__
        finally:
            s.close()
print(json.dumps(out))
PY"""


@pytest.fixture(scope="module")
def nhub(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("network namespaces for jobs need root (as in CI)")
    # fake NVIDIA device nodes (this machine has no GPU): plain files where the driver's nodes would be, bound
    # into the sandboxes exactly as the real ones would be
    fake_dev = tmp_path_factory.mktemp("fake-dev")
    for name in ("nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"):
        (fake_dev / name).write_text(name)
    config = (f"c.LocalBackend.devices = {{'demo-gpu': 2}}\nc.LocalBackend.gpu_device_dir = {str(fake_dev)!r}\n"
              "c.TiService.scheduler_interval = 0.3\n")  # jobs seen to start and end sooner (default 1 s)
    for hub in own_hub(tmp_path_factory, "nethub", config):
        for name, devices in (("net-tiny", 0), ("net-gpu", 1)):
            hub.admin.ok("POST", "/plans", json={"name": name, "kinds": ["single", "distributed"],
                                                 "device_type": "demo-gpu" if devices else "cpu",
                                                 "device_count": devices, "cpu": 0.1, "memory_mib": 512})
        yield hub


def job(session, name, command, **kw):
    return session.ok("POST", "/jobs", json={"name": name, "plan": "net-tiny", "image": "python-cpu",
                                             "command": command, **kw})


def log_of(session, job_id, instance=0):
    return session.ok("GET", f"/jobs/{job_id}/logs", params={"instance": instance})["text"]


def test_a_job_reaches_neither_the_host_nor_another_jobs_ports(nhub):
    bob, mal = nhub.person("netbob"), nhub.person("netmal")
    port = free_job_port()
    serve = (f"python3 -c \"import socket; s=socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); "
             "print('up', flush=True)\nwhile True:\n c,_=s.accept(); c.recv(4096); "
             "c.sendall(b'HTTP/1.0 200 OK\\r\\nContent-Length: 10\\r\\n\\r\\nBOB-SECRET'); c.close()\"")
    b = job(bob, "secret-server", serve, ports=[port])
    bob.wait_job(b["id"], states=("running",), timeout=90)
    wait(lambda: "up" in log_of(bob, b["id"]), 30, "bob's server")
    # the platform still reaches it, for its owner, through the job's portal
    r = bob.http.get(f"{nhub.url}/services/ti/endpoints/{b['id']}/0/{port}/", timeout=30)
    assert "BOB-SECRET" in r.text, r.text
    # bob's port, the hub's public port (the proxy) and the SSH gateway's, all listening on the host's loopback
    targets = [port, int(nhub.url.rsplit(":", 1)[1]), nhub.ssh_port]
    m = job(mal, "probe", PROBE % json.dumps(targets))
    assert mal.wait_job(m["id"], timeout=90)["status"] == "completed"
    seen = json.loads(log_of(mal, m["id"]).strip().splitlines()[-1])
    assert all("BOB-SECRET" not in v for v in seen.values()), seen
    assert all(v in ("ConnectionRefusedError", "OSError") for v in seen.values()), seen  # nothing listens there
    bob.api("POST", f"/jobs/{b['id']}/kill")


def test_a_job_binding_the_hubs_port_across_a_restart_takes_nothing(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("network namespaces for jobs need root (as in CI)")
    data = tmp_path / "data"
    data.mkdir()
    proc, hub, ports = start_hub(data)
    try:
        from hubproc import ADMIN, ADMIN_PASSWORD

        hub.admin = hub.login(ADMIN, ADMIN_PASSWORD)
        hub.admin.ok("POST", "/plans", json={"name": "net-tiny", "kinds": ["single"], "device_type": "cpu",
                                             "device_count": 0, "cpu": 0.1, "memory_mib": 256})
        squat = (f"python3 -c \"import socket, time\ns = socket.socket()\nwhile True:\n try:\n  "
                 f"s.bind(('127.0.0.1', {ports['hub']})); s.listen(); break\n except OSError:\n  time.sleep(0.01)\n"
                 "print('holding', flush=True); time.sleep(300)\"")
        j = hub.admin.ok("POST", "/jobs", json={"name": "squat", "plan": "net-tiny", "image": "python-cpu",
                                                "command": squat})
        hub.admin.wait_job(j["id"], states=("running",), timeout=90)
        log = data / "jobs" / str(j["id"]) / "logs" / "instance-0.log"
        # the port is free in the job's own network even while the hub holds the host's
        wait(lambda: log.exists() and "holding" in log.read_text(), 30, "the job to bind its own loopback")
        terminate_group(proc)  # the platform restarts; the job runs on
        proc, hub, ports = start_hub(data, ports=ports)  # nothing of the host's was taken
        hub.admin = hub.login(ADMIN, ADMIN_PASSWORD)
        assert hub.admin.ok("GET", f"/jobs/{j['id']}")["status"] == "running"  # re-adopted, still isolated
        hub.admin.api("POST", f"/jobs/{j['id']}/kill")
    finally:
        stop_in_background(proc)  # nothing checks this last stop


def test_a_job_reaches_out_but_not_back_into_the_host(nhub):
    """Outbound network through slirp4netns: an address outside the host answers (a namespace of this test's,
    over a veth pair: nothing leaves the machine); the host's loopback (through the gateway) and the host's own
    addresses, where a server listens, do not."""
    if not shutil.which("slirp4netns"):
        pytest.skip("slirp4netns is not installed (scripts/test installs it)")
    with netkit.outside_namespace() as (_name, port):
        targets = [(netkit.OUTSIDE, port), ("10.0.2.2", port), ("198.18.0.1", port), ("10.0.2.2", nhub.ssh_port)]
        probe = """python3 - <<'PY'
import json, socket
out = {}
for host, port in %s:
    try:
        with socket.create_connection((host, port), timeout=3) as c:
            out[f"{host}:{port}"] = c.recv(100).decode() or "connected"
    except OSError as e:
        out[f"{host}:{port}"] = type(e).__name__
print(json.dumps(out))
PY""" % json.dumps(targets)
        alice = nhub.person("netout")
        j = job(alice, "reach-out", probe)
        assert alice.wait_job(j["id"], timeout=90)["status"] == "completed"
    seen = json.loads(log_of(alice, j["id"]).strip().splitlines()[-1])
    assert seen[f"{netkit.OUTSIDE}:{port}"] == "OUTSIDE", seen
    assert "HOST" not in seen.values() and len(seen) == 4, seen
    assert not any(v.startswith("SSH-") for v in seen.values()), seen  # nor the platform's SSH gateway


def test_a_sandbox_has_only_the_device_nodes_of_the_gpus_it_holds(nhub):
    """Before, every NVIDIA device node of the machine was in every sandbox."""
    bob = nhub.person("netgpu")
    show = "ls /dev; echo CVD=$CUDA_VISIBLE_DEVICES"
    g = bob.ok("POST", "/jobs", json={"name": "one-gpu", "plan": "net-gpu", "image": "python-cpu",
                                      "command": show})
    c = job(bob, "no-gpu", show)
    for j in (g, c):
        assert bob.wait_job(j["id"], timeout=90)["status"] == "completed"
    held = bob.ok("GET", f"/jobs/{g['id']}")
    index = held["placement"]["instances"][0]["devices"][0]
    text = log_of(bob, g["id"])
    listed = {w for w in text.split() if w.startswith("nvidia")}
    assert listed == {"nvidiactl", "nvidia-uvm", f"nvidia{index}"}, text  # not the other GPU's node
    assert f"CVD={index}" in text, text  # demo devices keep their index
    text = log_of(bob, c["id"])
    assert not {w for w in text.split() if w.startswith("nvidia")} and "CVD=\n" in text + "\n", text
