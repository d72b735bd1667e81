"""WS7 and JOB2 on Kubernetes: an SSH-only workspace's pod, and a job's jupyter endpoint beside instance 0.

KWOK pods never run a process, so these tests look at what reaches Kubernetes (the pods, admitted by Pod Security
"restricted", and the job's Secret) and then run the pods' own commands on this machine as real processes: the
SSH-only placeholder answers the hub's readiness check, and the jupyter wrapper starts a Jupyter server that wants
its token and hides it from the user's command. For the endpoint, instance 0's pod is given 127.0.0.1 as its
address, so the hub's endpoint URL reaches that server through the real proxy, with the token sent upstream. A
real container run of both is a real node's test (issue 33).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
import requests
from hubproc import own_hub
from tihub_client import wait

from ti_hub.backends.k8s import jupyterep
from ti_hub.backends.k8s import objects as ob
from ti_hub.backends.k8s.names import safe_name

from .kubehub import kube_hub_lines

NS = "ti-jupyter-k8s"


@pytest.fixture(scope="module")
def jhub(k8s_cluster, tmp_path_factory):
    k8s_cluster.namespace(NS)
    yield from own_hub(tmp_path_factory, "jkhub", kube_hub_lines(k8s_cluster.kubeconfig, NS, "jupyter-test"))


def get(k8s_cluster, kind: str, name: str):
    out = k8s_cluster.kubectl("get", kind, name, "-n", NS, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def of_job(k8s_cluster, job_id: int, kinds: str) -> list[dict]:
    out = k8s_cluster.kubectl("get", kinds, "-n", NS, "-l", f"{ob.LABEL_JOB_ID}={job_id}", "-o", "json")
    return json.loads(out.stdout)["items"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answer(url: str, timeout: float = 60, **kw) -> requests.Response:
    deadline = time.monotonic() + timeout
    while True:
        try:
            r = requests.get(url, timeout=10, **kw)
            if r.status_code not in (502, 503):
                return r
        except requests.ConnectionError:
            r = None
        assert time.monotonic() < deadline, f"{url} did not answer: {r.status_code if r is not None else 'refused'}"
        time.sleep(0.3)


def end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_an_ssh_only_workspace_runs_the_placeholder_in_an_equally_restricted_pod(jhub, k8s_cluster, tmp_path):
    admin = jhub.admin
    admin.ok("POST", "/plans", json={"name": "ws-small", "kinds": ["workspace"], "device_type": "cpu",
                                     "device_count": 0, "cpu": 1, "memory_mib": 1024})
    # the spawn page offers leaving Jupyter out here too
    page = admin.browser.get(f"{jhub.url}/hub/spawn/{admin.name}/any-box", timeout=30)
    assert 'name="jupyter"' in page.text and "Jupyter server" in page.text, page.text[:500]
    pods = {}
    for name, options in (("lab-box", {"plan": "ws-small"}), ("ssh-box", {"plan": "ws-small", "jupyter": False})):
        r = admin.hub_api("POST", f"/users/{admin.name}/servers/{name}", json=options)
        assert r.status_code in (201, 202), r.text  # no refusal any more
    try:
        for name in ("lab-box", "ssh-box"):
            # the first sight of each pod: the hub stops it once its HTTP wait (10 s) ends, KWOK never answers
            pods[name] = wait(lambda n=name: get(k8s_cluster, "pod", safe_name("ti-ws", admin.name, n)),
                              timeout=60, what=f"{name}'s pod")
        ws = {w["name"]: w for w in admin.ok("GET", "/jobs?kind=workspace")["items"]}
        assert ws["ssh-box"]["status"] in ("scheduling", "running", "stopped"), ws["ssh-box"]
        lab, ssh = (next(c for c in pods[n]["spec"]["containers"] if c["name"] == "notebook")
                    for n in ("lab-box", "ssh-box"))
        # another command, nothing else: the image's entrypoint is replaced by the placeholder, never Jupyter
        assert ssh["command"][:2] == ["python3", "-c"] and not ssh.get("args")
        assert "jupyterhub-singleuser" not in json.dumps(ssh["command"]) and "runs without Jupyter" in ssh["command"][2]
        assert "command" not in lab  # the image's own (jupyterhub-singleuser)
        for key in ("securityContext", "resources", "volumeMounts", "ports", "image"):
            assert ssh.get(key) == lab.get(key), key
        for key in ("securityContext", "automountServiceAccountToken", "volumes", "nodeSelector", "tolerations"):
            assert pods["ssh-box"]["spec"].get(key) == pods["lab-box"]["spec"].get(key), key
        assert ssh["securityContext"]["allowPrivilegeEscalation"] is False
        assert ssh["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert pods["ssh-box"]["spec"]["automountServiceAccountToken"] is False
        assert pods["ssh-box"]["metadata"]["labels"][ob.LABEL_KIND] == "workspace"
        assert pods["ssh-box"]["metadata"]["annotations"][ob.ANN_OWNER] == admin.name

        # the pod's own command, run here: it answers where the hub looks (JUPYTERHUB_SERVICE_URL) with the page
        env = {e["name"]: e["value"] for e in ssh["env"] if "value" in e}
        assert env["JUPYTERHUB_SERVICE_URL"].endswith(f":8888/user/{admin.name}/ssh-box/")
        port = free_port()
        env["JUPYTERHUB_SERVICE_URL"] = f"http://127.0.0.1:{port}/user/{admin.name}/ssh-box/"
        python = shutil.which("python3") or sys.executable
        proc = subprocess.Popen([python, *ssh["command"][1:]], env={"PATH": os.environ["PATH"], **env},
                                cwd=tmp_path, start_new_session=True)
        try:
            r = answer(env["JUPYTERHUB_SERVICE_URL"] + "api", timeout=30)
            assert r.status_code == 200 and "runs without Jupyter" in r.text and f"{admin.name}+ssh-box" in r.text
        finally:
            end(proc)
    finally:
        for name in ("lab-box", "ssh-box"):
            admin.hub_api("DELETE", f"/users/{admin.name}/servers/{name}")
    for name in ("lab-box", "ssh-box"):
        wait(lambda n=name: get(k8s_cluster, "pod", safe_name("ti-ws", admin.name, n)) is None, timeout=60,
             what="the pod to go")


@pytest.fixture(scope="module")
def job_plan(jhub):
    jhub.admin.ok("POST", "/plans", json={"name": "job-small", "kinds": ["single"], "device_type": "cpu",
                                          "device_count": 0, "cpu": 1, "memory_mib": 1024})
    return "job-small"


def test_a_jobs_jupyter_endpoint_runs_beside_instance_0_with_its_token_from_a_secret(jhub, k8s_cluster, job_plan,
                                                                                      tmp_path):
    admin = jhub.admin
    j = admin.ok("POST", "/jobs", json={"name": "nb-job", "plan": job_plan, "image": "python-cpu",
                                        "command": "env > \"$OUT\"; sleep 300", "endpoints": ["jupyter"],
                                        "env": {"TI_JUPYTER_TOKEN": "mine"}})
    port = j["jupyter_port"]
    admin.wait_job(j["id"], states=("running",), timeout=60)
    detail = admin.ok("GET", f"/jobs/{j['id']}")
    base = detail["jupyter_url"]
    assert base == f"/services/ti/endpoints/{j['id']}/0/{port}/"
    pod = wait(lambda: [p for p in of_job(k8s_cluster, j["id"], "pods") if p["status"].get("phase") == "Running"],
               timeout=60, what="the job's running pod")[0]
    main = pod["spec"]["containers"][0]
    script = main["command"][2]
    assert main["command"][:2] == ["/bin/sh", "-c"] and main["command"][3:] == ["ti-jupyter",
                                                                                 'env > "$OUT"; sleep 300']
    assert f"jupyter server --no-browser --ip=0.0.0.0 --port={port} " in script
    assert f"--ServerApp.base_url={base} " in script and "unset TI_JUPYTER_TOKEN" in script
    assert {"name": "jupyter", "containerPort": port, "protocol": "TCP"} in main["ports"]
    [secret] = of_job(k8s_cluster, j["id"], "secrets")
    refs = [e for e in main["env"] if e["name"] == jupyterep.TOKEN_ENV]
    assert refs == [{"name": jupyterep.TOKEN_ENV, "valueFrom": {"secretKeyRef": {
        "name": secret["metadata"]["name"], "key": jupyterep.TOKEN_KEY}}}]  # the user's value does not win
    token = base64.b64decode(secret["data"][jupyterep.TOKEN_KEY]).decode()
    assert len(token) >= 32 and list(secret["data"]) == [jupyterep.TOKEN_KEY]
    owner = secret["metadata"]["ownerReferences"][0]
    assert owner["kind"] == "Pod" and owner["name"] == pod["metadata"]["name"]  # goes with the job
    # never in clear where pods and jobs are listed, nor in what the API shows
    assert token not in json.dumps(of_job(k8s_cluster, j["id"], "pods,jobs")) and token not in json.dumps(detail)

    # the pod's own command, run here as Kubernetes would (the Secret's value in its env): the server wants the
    # token, the user's command never sees it
    out = tmp_path / "env.txt"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TMPDIR": str(tmp_path), "OUT": str(out),
           "JOB_COMPLETION_INDEX": "0", jupyterep.TOKEN_ENV: token}
    proc = subprocess.Popen(main["command"], env=env, cwd=tmp_path, start_new_session=True,
                            stderr=subprocess.PIPE, text=True)
    try:
        direct = f"http://127.0.0.1:{port}{base}api/status"
        r = answer(direct, headers={"Authorization": f"token {token}"}, timeout=90)
        assert r.status_code == 200 and "started" in r.json(), r.text
        assert requests.get(direct, timeout=10).status_code == 403  # no token, no server
        text = wait(lambda: out.exists() and out.read_text(), timeout=30, what="the command's environment")
        assert token not in text and jupyterep.TOKEN_ENV not in text
        assert (tmp_path / "ti-jupyter.log").exists()

        # the endpoint URL routes to the pod's address and the port, with the token sent upstream: give the
        # pod this machine's address, where its command runs
        patch = {"status": {"podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}]}}
        k8s_cluster.kubectl("patch", "pod", pod["metadata"]["name"], "-n", NS, "--subresource=status",
                            "--type=merge", "-p", json.dumps(patch))
        auth = {"Authorization": f"token {admin.token}"}
        r = answer(jhub.url + base + "api/status", headers=auth, timeout=30)
        assert r.status_code == 200 and "started" in r.json(), r.text
    finally:
        end(proc)
        admin.ok("POST", f"/jobs/{j['id']}/kill")
    wait(lambda: of_job(k8s_cluster, j["id"], "pods,secrets") == [], timeout=60, what="the pod and its Secret gone")


def test_a_job_without_the_endpoint_gets_none_of_it(jhub, k8s_cluster, job_plan):
    admin = jhub.admin
    j = admin.ok("POST", "/jobs", json={"name": "plain-job", "plan": job_plan, "image": "python-cpu",
                                        "command": "sleep 300"})
    assert "jupyter_port" not in j and j["ports"] == []
    admin.wait_job(j["id"], states=("running",), timeout=60)
    [pod] = wait(lambda: of_job(k8s_cluster, j["id"], "pods"), timeout=30, what="the job's pod")
    main = pod["spec"]["containers"][0]
    assert main["command"] == ["/bin/sh", "-c", "sleep 300"] and "ports" not in main
    assert not [e for e in main["env"] if e["name"] == jupyterep.TOKEN_ENV]
    assert of_job(k8s_cluster, j["id"], "secrets") == []
    assert "jupyter_url" not in admin.ok("GET", f"/jobs/{j['id']}")
    admin.ok("POST", f"/jobs/{j['id']}/kill")
    wait(lambda: of_job(k8s_cluster, j["id"], "pods") == [], timeout=60, what="the pod gone")
