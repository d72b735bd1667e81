"""JOB6 endpoints on the embedded platform: a job's ports (HTTP and WebSocket) and TensorBoard through the ti
service's authenticated proxy, for the owner only; nothing of the hub's login reaches the job's server."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from tornado.httpclient import HTTPClientError, HTTPRequest
from tihub_client import free_job_port, service_pid
from tornado.websocket import websocket_connect

pytestmark = pytest.mark.e2e

# a job's server that shows what reached it (headers, path, query, body size) and echoes WebSocket messages
SERVER = """
import asyncio, os, tornado.web, tornado.websocket
class Echo(tornado.websocket.WebSocketHandler):
    def on_message(self, m):
        self.write_message(m, binary=isinstance(m, bytes))
class Seen(tornado.web.RequestHandler):
    def get(self, *a):
        self.write({"headers": dict(self.request.headers), "path": self.request.path, "query": self.request.query})
    def post(self, *a):
        self.write({"n": len(self.request.body), "headers": dict(self.request.headers)})
class Slow(tornado.web.RequestHandler):
    async def get(self):
        self.write("first\\n"); await self.flush(); await asyncio.sleep(2); self.write("second\\n")
ROUTES = [(r"/ws", Echo), (r"/seen(.*)", Seen), (r"/slow", Slow)]
async def main():
    tornado.web.Application(ROUTES).listen(int(os.environ["PORT"]), "127.0.0.1")
    await asyncio.Event().wait()
asyncio.run(main())
"""
EVENTS = """
import time
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.compat.proto import event_pb2, summary_pb2
w = EventFileWriter("/mnt/out/tb")
v = summary_pb2.Summary.Value(tag="loss", simple_value=0.5)
w.add_event(event_pb2.Event(wall_time=time.time(), step=1, summary=summary_pb2.Summary(value=[v])))
w.close()
"""


@pytest.fixture
def people(new_user):
    """New users whose unfinished jobs are killed after the test (2 cores: a leftover job blocks the next test)."""
    made = []

    def make(prefix: str):
        made.append(new_user(prefix))
        return made[-1]

    yield make
    for u in made:
        for j in u.ok("GET", "/jobs?status=queued,scheduling,running")["items"]:
            u.api("POST", f"/jobs/{j['id']}/kill")
    for u in made:
        for j in u.ok("GET", "/jobs?status=killing")["items"]:
            u.wait_job(j["id"], states=("killed", "completed", "failed", "error"), timeout=60)


def service_url(hub) -> str:
    """The ti service's own address (the hub's proxy forwards /services/ti/ there)."""
    env = Path(f"/proc/{service_pid(hub)}/environ").read_bytes().decode(errors="replace").split("\0")
    url = next(e.split("=", 1)[1] for e in env if e.startswith("JUPYTERHUB_SERVICE_URL="))
    return url.rstrip("/") + "/"


def job(name: str, command: str, **kw) -> dict:
    return {"name": name, "plan": "cpu-small", "image": "python-cpu", "command": command, **kw}


def ep_url(hub, ref, port, instance=0, rest="/") -> str:
    return f"{hub.url}/services/ti/endpoints/{ref}/{instance}/{port}{rest}"


def auth(u) -> dict:
    return {"Authorization": f"token {u.token}"}


def wait_answer(url: str, headers: dict, timeout: float = 60) -> requests.Response:
    """Until the job's server listens (the proxy answers 502 before)."""
    deadline = time.monotonic() + timeout
    while True:
        r = requests.get(url, headers=headers, timeout=10)
        if r.status_code != 502 or time.monotonic() > deadline:
            return r
        time.sleep(0.3)


def test_a_jobs_port_answers_only_its_owner(hub, people):
    u, other = people("epowner"), people("epother")
    port = free_job_port()
    cmd = (f"echo hi > hello-endpoint.txt; mkdir sub; head -c 20000000 /dev/zero > big.bin; "
           f"exec python3 -m http.server {port} --bind 127.0.0.1")
    j = u.ok("POST", "/jobs", json=job("ep-http", cmd, ports=[port]))
    u.wait_job(j["id"], states=("running",))
    url = ep_url(hub, j["id"], port)
    r = wait_answer(url, auth(u))
    assert r.status_code == 200 and "hello-endpoint.txt" in r.text  # the directory listing
    assert requests.get(url + "hello-endpoint.txt", headers=auth(u), timeout=10).text == "hi\n"
    # HEAD straight to the service (the hub's Python proxy answers HEAD with Content-Length 0)
    direct = service_url(hub) + f"services/ti/endpoints/{j['id']}/0/{port}/hello-endpoint.txt"
    head = requests.head(direct, headers=auth(u), timeout=10)
    assert head.status_code == 200 and head.headers["Content-Length"] == "3" and not head.content
    with requests.get(url + "big.bin", headers=auth(u), stream=True, timeout=60) as big:
        assert big.status_code == 200 and sum(len(c) for c in big.iter_content(1 << 20)) == 20_000_000
    assert requests.get(ep_url(hub, "ep-http", port), headers=auth(u), timeout=10).status_code == 200  # by name
    # the endpoint's root gets its slash; the server's own redirects stay under the endpoint
    r = requests.get(ep_url(hub, j["id"], port, rest=""), headers=auth(u), allow_redirects=False, timeout=10)
    assert r.status_code == 302 and r.headers["Location"].endswith(f"/endpoints/{j['id']}/0/{port}/")
    r = requests.get(url + "sub", headers=auth(u), allow_redirects=False, timeout=10)
    assert r.status_code == 301 and r.headers["Location"] == f"/services/ti/endpoints/{j['id']}/0/{port}/sub/"
    # the detail lists the URL for the owner only (a running job is not there for others, view-all or not)
    urls = u.ok("GET", f"/jobs/{j['id']}")["endpoint_urls"]
    assert urls == {str(port): f"/services/ti/endpoints/{j['id']}/0/{port}/"}
    assert other.api("GET", f"/jobs/{j['id']}").status_code == 404
    assert "endpoint_urls" not in hub.admin.ok("GET", f"/jobs/{j['id']}")
    # no login: programs get 401, a browser page load goes to the hub's login
    r = requests.get(url, timeout=10)
    assert r.status_code == 401 and r.json()["error"] == "unauthorized"
    r = requests.get(url, headers={"Accept": "text/html"}, allow_redirects=False, timeout=10)
    assert r.status_code == 302 and "/hub/api/oauth2/authorize" in r.headers["Location"]
    assert requests.get(url, headers={"Authorization": "token nope"}, timeout=10).status_code in (401, 403)
    # a browser logged in to the hub gets through the service's OAuth and sees the listing
    r = u.browser.get(url, headers={"Accept": "text/html"}, timeout=30)
    assert r.status_code == 200 and "hello-endpoint.txt" in r.text
    # anyone else: 404, as if the job did not exist; an admin (manage-all) with a token only, never by cookie
    assert requests.get(url, headers=auth(other), timeout=10).status_code == 404
    assert other.browser.get(url, headers={"Accept": "text/html"}, timeout=30).status_code == 404
    assert requests.get(ep_url(hub, "ep-http", port), headers=auth(other), timeout=10).status_code == 404
    assert requests.get(url, headers=auth(hub.admin), timeout=10).status_code == 200
    assert hub.admin.browser.get(url, headers={"Accept": "text/html"}, timeout=30).status_code == 404
    # undeclared ports, instances out of range, a job that ended
    undeclared = port + 1
    r = requests.get(ep_url(hub, j["id"], undeclared), headers=auth(u), timeout=10)
    assert r.status_code == 404 and r.json()["field"] == "port"
    assert requests.get(ep_url(hub, j["id"], port, instance=1), headers=auth(u), timeout=10).status_code == 404
    u.ok("POST", f"/jobs/{j['id']}/kill")
    u.wait_job(j["id"], states=("killed",))
    r = requests.get(url, headers=auth(u), timeout=10)
    assert r.status_code == 409 and "killed" in r.json()["detail"]
    assert "endpoint_urls" in u.ok("GET", f"/jobs/{j['id']}") and not u.ok("GET", f"/jobs/{j['id']}")["endpoint_urls"]


def test_headers_bodies_and_websockets_cross_without_the_hub_login(hub, people):
    u, other = people("epws"), people("epwsother")
    port = free_job_port()
    j = u.ok("POST", "/jobs", json=job("ep-ws", 'exec python3 -c "$SERVER"', ports=[port],
                                       env={"SERVER": SERVER, "PORT": str(port)}))
    u.wait_job(j["id"], states=("running",))
    seen_url = ep_url(hub, j["id"], port, rest="/seen/x?a=1")
    r = wait_answer(seen_url, {**auth(u), "Cookie": "app=1"})
    seen = r.json()
    assert r.status_code == 200 and seen["path"] == "/seen/x" and seen["query"] == "a=1"
    assert "Authorization" not in seen["headers"] and seen["headers"]["Cookie"] == "app=1"
    assert seen["headers"]["X-Forwarded-Prefix"] == f"/services/ti/endpoints/{j['id']}/0/{port}"
    # a browser's login cookies (the service's OAuth cookie holds the hub token) never reach the job
    r = u.browser.get(seen_url, headers={"Accept": "text/html"}, timeout=30)
    assert r.status_code == 200, r.text[:300]
    cookie = r.json()["headers"].get("Cookie", "")
    mine = {c.name for c in u.browser.cookies}
    assert any("service" in n for n in mine) and not [n for n in mine if f"{n}=" in cookie and n != "_xsrf"]
    # a cookie-authenticated write from another site loses its login; the same origin keeps it
    evil = u.browser.post(seen_url, data=b"x", headers={"Origin": "http://evil.example"}, allow_redirects=False,
                          timeout=30)
    assert evil.status_code == 401
    same = u.browser.post(seen_url, data=b"x", headers={"Origin": hub.url}, timeout=30)
    assert same.status_code == 200 and same.json()["n"] == 1
    # a 3 MiB body streams through
    big = requests.post(seen_url, data=b"z" * (3 << 20), headers=auth(u), timeout=60)
    assert big.status_code == 200 and big.json()["n"] == 3 << 20

    # answers stream: the first piece arrives before the job's server has finished (straight to the service:
    # the hub's Python proxy holds whole answers)
    t0 = time.monotonic()
    slow = service_url(hub) + f"services/ti/endpoints/{j['id']}/0/{port}/slow"
    with requests.get(slow, headers=auth(u), stream=True, timeout=30) as r:
        pieces = r.iter_content(None)
        assert next(pieces) == b"first\n" and time.monotonic() - t0 < 1.8
        assert b"".join(pieces) == b"second\n"

    ws_url = ep_url(hub, j["id"], port, rest="/ws").replace("http://", "ws://")

    async def echo(url: str, headers: dict) -> list:
        conn = await websocket_connect(HTTPRequest(url, headers=headers, request_timeout=20))
        got = []
        for msg in ("hello", b"\x00\x01binary"):
            await conn.write_message(msg, binary=isinstance(msg, bytes))
            got.append(await conn.read_message())
        conn.close()
        return got

    async def refused(headers: dict) -> int:
        with pytest.raises(HTTPClientError) as e:
            await websocket_connect(HTTPRequest(ws_url, headers=headers, request_timeout=20))
        return e.value.code

    # through the hub's proxy (the Python configurable-http-proxy relays binary messages as text frames) ...
    assert asyncio.run(echo(ws_url, auth(u))) in (["hello", b"\x00\x01binary"], ["hello", "\x00\x01binary"])
    # ... and straight to the ti service, where binary stays binary
    direct = service_url(hub).replace("http://", "ws://") + f"services/ti/endpoints/{j['id']}/0/{port}/ws"
    assert asyncio.run(echo(direct, auth(u))) == ["hello", b"\x00\x01binary"]
    assert asyncio.run(refused({})) in (401, 403)
    # a browser's login works from the hub's own pages, never from another site's
    jar = "; ".join(f"{c.name}={c.value}" for c in u.browser.cookies)
    assert asyncio.run(echo(ws_url, {"Cookie": jar, "Origin": hub.url}))[0] == "hello"
    assert asyncio.run(refused({"Cookie": jar, "Origin": "http://evil.example"})) == 403
    assert asyncio.run(refused(auth(other))) == 404
    u.ok("POST", f"/jobs/{j['id']}/kill")


def test_ports_added_while_running(hub, people):
    u, other = people("epadd"), people("epaddother")
    port = free_job_port()
    j = u.ok("POST", "/jobs", json=job("ep-added", f"exec python3 -m http.server {port} --bind 127.0.0.1"))
    u.wait_job(j["id"], states=("running",))
    url = ep_url(hub, j["id"], port)
    assert requests.get(url, headers=auth(u), timeout=10).status_code == 404  # not declared yet
    for bad, field in (({"port": 80}, "port"), ({"port": "x"}, "port"), ({}, "port"), ({"port": port, "x": 1}, "x")):
        r = u.api("POST", f"/jobs/{j['id']}/ports", json=bad)
        assert r.status_code == 400 and r.json()["field"] == field, (bad, r.text)
    assert other.api("POST", f"/jobs/{j['id']}/ports", json={"port": port}).status_code in (403, 404)
    out = u.ok("POST", f"/jobs/{j['id']}/ports", json={"port": port})
    assert out["ports"] == [port] and out["endpoint_urls"] == {str(port): f"/services/ti/endpoints/{j['id']}/0/{port}/"}
    assert u.api("POST", f"/jobs/{j['id']}/ports", json={"port": port}).status_code == 409
    assert wait_answer(url, auth(u)).status_code == 200
    assert any(e["message"] == f"port {port} added" for e in u.ok("GET", f"/jobs/{j['id']}")["events"])
    # another running job that declares the same port later never reaches this job's server
    clash = u.ok("POST", "/jobs", json=job("ep-clash", "sleep 300", ports=[port]))
    u.wait_job(clash["id"], states=("running",))
    r = requests.get(ep_url(hub, clash["id"], port), headers=auth(u), timeout=10)
    assert r.status_code == 409 and r.json()["field"] == "port"
    assert u.api("POST", f"/jobs/{clash['id']}/ports", json={"port": port + 1}).status_code == 200
    u.ok("POST", f"/jobs/{j['id']}/kill")
    u.ok("POST", f"/jobs/{clash['id']}/kill")
    u.wait_job(j["id"], states=("killed",))
    assert u.api("POST", f"/jobs/{j['id']}/ports", json={"port": port + 2}).status_code == 409


def test_tensorboard_for_a_jobs_volume(hub, people):
    u, other = people("eptb"), people("eptbother")
    u.ok("POST", "/volumes", json={"name": "tb-logs", "kind": "filesystem", "capacity_gib": 1})
    j = u.ok("POST", "/jobs", json=job("ep-tb", 'mkdir -p /mnt/out/tb && python3 -c "$EVENTS"', env={"EVENTS": EVENTS},
                                       volumes=[{"volume": "tb-logs", "mount_path": "/mnt/out"}],
                                       endpoints=["tensorboard"]))
    assert u.wait_job(j["id"])["status"] == "completed"
    # not a directory of the job's mounts: 409 (the job's mounts decide); not a normalized absolute path: 400
    for bad, status in (("/etc", 409), ("/mnt/outside/tb", 409), ("/mnt/out/../../etc", 400), ("tb", 400), ("", 400),
                        ("//mnt/out/tb", 400)):
        r = u.api("POST", f"/jobs/{j['id']}/tensorboard", json={"logdir": bad})
        assert r.status_code == status and r.json()["field"] == "logdir", (bad, r.text)
    assert other.api("POST", f"/jobs/{j['id']}/tensorboard", json={"logdir": "/mnt/out/tb"}).status_code in (403, 404)
    r = u.api("POST", f"/jobs/{j['id']}/tensorboard", json={"logdir": "/mnt/out/tb/"})
    assert r.status_code == 201, r.text
    tb = r.json()
    assert tb["logdir"] == "/mnt/out/tb" and tb["url"] == f"/services/ti/endpoints/{j['id']}/tensorboard/{tb['key']}/"
    again = u.ok("POST", f"/jobs/{j['id']}/tensorboard", json={"logdir": "/mnt/out/tb"})
    assert again["url"] == tb["url"] and again["started"] is False
    url = hub.url + tb["url"]
    r = requests.get(url, headers=auth(u), timeout=30)
    assert r.status_code == 200 and "<html" in r.text.lower()
    # it reads the job's volume: the scalar the job wrote shows up (TensorBoard loads in the background)
    deadline = time.monotonic() + 60
    while True:
        tags = requests.get(url + "data/plugin/scalars/tags", headers=auth(u), timeout=30).json()
        if any("loss" in run_tags for run_tags in tags.values()) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert any("loss" in run_tags for run_tags in tags.values()), tags
    by_name = f"{hub.url}/services/ti/endpoints/ep-tb/tensorboard/{tb['key']}/"
    assert requests.get(by_name, headers=auth(u), timeout=30).status_code == 200
    assert requests.get(url, headers=auth(other), timeout=30).status_code == 404
    assert requests.get(url, timeout=30).status_code == 401
    assert [t["url"] for t in u.ok("GET", f"/jobs/{j['id']}")["tensorboards"]] == [tb["url"]]
    assert [t["logdir"] for t in u.ok("GET", f"/jobs/{j['id']}/tensorboard")["items"]] == ["/mnt/out/tb"]
    assert u.ok("DELETE", f"/jobs/{j['id']}/tensorboard")["stopped"] == 1
    assert requests.get(url, headers=auth(u), timeout=30).status_code == 404


def test_cli_tensorboard_port_and_show(hub, people, tmp_path):
    u = people("epcli")
    u.ok("POST", "/volumes", json={"name": "cli-logs", "kind": "filesystem", "capacity_gib": 1})
    port = free_job_port()
    j = u.ok("POST", "/jobs", json=job("ep-cli", "sleep 300", volumes=[{"volume": "cli-logs", "mount_path": "/mnt/o"}],
                                       endpoints=["tensorboard"]))
    u.wait_job(j["id"], states=("running",))
    env = {"TI_API_URL": hub.url, "TI_TOKEN": u.token, "HOME": str(tmp_path), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}

    def ti(*args):
        r = subprocess.run([sys.executable, "-m", "ti_hub.cli.main", *args], env=env, capture_output=True, text=True,
                           timeout=90)
        assert r.returncode == 0, r.stderr
        return r.stdout

    prefix = f"{hub.url}/services/ti/endpoints/{j['id']}"
    assert ti("job", "port", "ep-cli", str(port)).strip() == f"{prefix}/0/{port}/"
    tb = ti("job", "tensorboard", "ep-cli", "--logdir", "/mnt/o/tb").strip()
    assert tb.startswith(f"{prefix}/tensorboard/") and requests.get(tb, headers=auth(u), timeout=30).status_code == 200
    shown = ti("job", "show", "ep-cli")
    assert f"{prefix}/0/{port}/" in shown and tb in shown and "tensorboard /mnt/o/tb" in shown
    assert "/mnt/o/tb" in ti("job", "tensorboard", "ep-cli")
    assert "stopped 1" in ti("job", "tensorboard", "ep-cli", "--stop")
    u.ok("POST", f"/jobs/{j['id']}/kill")


def test_the_jupyter_endpoint_serves_the_owner_only_and_ends_with_the_job(hub, people):
    import socket

    u, other = people("epjup"), people("epjupother")
    j = u.ok("POST", "/jobs", json=job("ep-jupyter", "sleep 300", endpoints=["jupyter"]))
    port = j["jupyter_port"]
    assert 40000 <= port <= 49999 and port in j["ports"]
    u.wait_job(j["id"], states=("running",))
    detail = u.ok("GET", f"/jobs/{j['id']}")
    assert detail["jupyter_url"] == f"/services/ti/endpoints/{j['id']}/0/{port}/"
    url = hub.url + detail["jupyter_url"]
    r = wait_answer(url + "api/status", auth(u), timeout=120)  # the proxy sends the server's token upstream
    assert r.status_code == 200 and "started" in r.json(), r.text
    assert requests.get(url + "api/status", headers=auth(other), timeout=10).status_code == 404
    assert "jupyter_url" not in other.api("GET", f"/jobs/{j['id']}").json()
    # the server itself wants its token: other processes that reach the job's loopback (this machine shares its
    # network with jobs when it has no bubblewrap) cannot use it
    try:
        direct = requests.get(f"http://127.0.0.1:{port}{detail['jupyter_url']}api/contents", timeout=10)
        assert direct.status_code == 403, direct.text
    except requests.ConnectionError:
        pass  # a network of the job's own: nothing outside it reaches the port at all
    u.ok("POST", f"/jobs/{j['id']}/kill")
    u.wait_job(j["id"], states=("killed",))
    deadline = time.monotonic() + 30
    while True:  # the server was in the job's process group: it ended with the job
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) != 0:
                break
        assert time.monotonic() < deadline, "the jupyter server outlived its job"
        time.sleep(0.5)
