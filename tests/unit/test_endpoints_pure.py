"""JOB6 endpoints, pure parts: URL shapes, what crosses to a job's server, where a TensorBoard logdir lives."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from ti_hub.backends.local import procs
from ti_hub.domain.errors import Conflict, ValidationError
from ti_hub.domain import endpoints as p
from ti_hub.endpoints.tensorboard import TensorBoards, installed

PREFIX = "/services/ti/"
COOKIE = "service-ti"


def test_endpoint_paths():
    ep = p.parse_endpoint_path("/services/ti/endpoints/12/0/40001/a/b%20c?x", PREFIX)
    assert (ep.job, ep.kind, ep.instance, ep.port, ep.rest) == ("12", "port", 0, 40001, "/a/b%20c?x")
    assert ep.base == "/services/ti/endpoints/12/0/40001"
    assert p.parse_endpoint_path("/services/ti/endpoints/my-job/3/49999", PREFIX).rest == ""
    tb = p.parse_endpoint_path("/services/ti/endpoints/7/tensorboard/0123456789ab/data/runs", PREFIX)
    assert (tb.kind, tb.key, tb.rest) == ("tensorboard", "0123456789ab", "/data/runs")
    for bad in ("/services/ti/endpoints/12/0/39999/", "/services/ti/endpoints/12/0/50000/",
                "/services/ti/endpoints/12/x/40001/", "/services/ti/endpoints/%2e%2e/0/40001/",
                "/services/ti/endpoints/12/0/040001/", "/services/ti/endpoints/12/0", "/services/ti/api/v1/me",
                "/services/ti/endpoints/12/tensorboard/NOTAKEY/", "/services/ti/endpoints/a/b/0/40001/"):
        assert p.parse_endpoint_path(bad, PREFIX) is None, bad
    assert p.port_url(PREFIX, 12, 0, 40001) == "/services/ti/endpoints/12/0/40001/"
    assert p.tensorboard_prefix(PREFIX, 7, "abc") == "/services/ti/endpoints/7/tensorboard/abc"
    assert len(p.tensorboard_key("/mnt/out/tb")) == 12


def test_request_headers_never_carry_the_hub_token_or_hub_cookies():
    headers = [("Host", "hub:8000"), ("Authorization", "token SECRET"), ("Connection", "keep-alive, X-Hop"),
               ("X-Hop", "1"), ("Keep-Alive", "5"), ("Accept", "text/html"), ("Proxy-Authorization", "Basic x"),
               ("Cookie", "service-ti=TOKENCOOKIE; app=1; jupyterhub-session-id=s; service-ti-oauth-state=st; "
                          "__Host-service-ti=t2; ti-flash=f; _xsrf=x"), ("Upgrade", "websocket"),
               ("Sec-WebSocket-Key", "k"), ("X-XSRFToken", "x")]
    out = dict(p.request_headers(headers, COOKIE))
    assert out == {"Host": "hub:8000", "Accept": "text/html", "Cookie": "app=1; _xsrf=x", "Sec-WebSocket-Key": "k",
                   "X-XSRFToken": "x"}
    ws = dict(p.request_headers(headers, COOKIE, websocket=True))
    assert "Sec-WebSocket-Key" not in ws and "Authorization" not in ws
    only_hub = [("Cookie", "service-ti=a; jupyterhub-hub-login=b")]
    assert p.request_headers(only_hub, COOKIE) == []


def test_response_headers_keep_hub_cookies_and_rewrite_redirects():
    base = "/services/ti/endpoints/12/0/40001"
    out = p.response_headers([("Content-Type", "text/html"), ("Transfer-Encoding", "chunked"),
                              ("Set-Cookie", "service-ti=evil; Path=/"), ("Set-Cookie", "jupyterhub-hub-login=x"),
                              ("Set-Cookie", "app=1; Path=/"), ("Location", "/sub/")], COOKIE, base,
                             "127.0.0.1:40001")
    assert out == [("Content-Type", "text/html"), ("Set-Cookie", "app=1; Path=/"), ("Location", base + "/sub/")]
    assert p.rewrite_location("http://127.0.0.1:40001/x?y=1", base, "127.0.0.1:40001") == base + "/x?y=1"
    assert p.rewrite_location("https://example.com/x", base, "127.0.0.1:40001") == "https://example.com/x"
    assert p.rewrite_location("//evil.example/x", base, "127.0.0.1:40001") == "//evil.example/x"
    assert p.rewrite_location("rel/x", base, "127.0.0.1:40001") == "rel/x"
    # a server that built the URL from the hub's Host, with or without X-Forwarded-Prefix
    assert p.rewrite_location("http://hub:8000/x", base, "127.0.0.1:40001", "hub:8000") == base + "/x"
    assert p.rewrite_location(f"http://hub:8000{base}/x#f", base, "u:1", "hub:8000") == base + "/x#f"
    assert p.rewrite_location(base + "/", base, "u:1") == base + "/"
    assert p.rewrite_location("http://other:8000/x", base, "127.0.0.1:40001", "hub:8000") == "http://other:8000/x"
    # TensorBoard knows its prefix: no rewriting
    assert p.response_headers([("Location", "/a")], COOKIE, None, "x:1") == [("Location", "/a")]


def test_token_query_and_cross_site_rules():
    assert p.strip_token_query("token=abc&x=1", "abc") == "x=1"
    assert p.strip_token_query("token=mine&x=1", "abc") == "token=mine&x=1"  # a job's own ?token= stays
    assert p.strip_token_query("x=1", None) == "x=1"
    host = "hub.example:8000"
    assert p.cross_site("POST", "same-origin", None, host) is None
    assert p.cross_site("GET", "cross-site", None, host)
    assert p.cross_site("POST", "same-site", None, host)
    assert p.cross_site("POST", None, "http://hub.example:8000", host) is None
    assert p.cross_site("POST", None, "http://evil.example", host)
    assert p.cross_site("GET", None, None, host) is None
    assert p.cross_site("POST", None, None, host)


VOLS = [{"volume_id": 1, "volume": "a/out", "kind": "filesystem", "mount_path": "/mnt/out", "read_only": False},
        {"volume_id": 2, "volume": "a/deep", "kind": "filesystem", "mount_path": "/mnt/out/deep", "read_only": True},
        {"volume_id": 3, "volume": "a/tmp", "kind": "local", "mount_path": "/data/tmp", "read_only": False}]


def test_logdirs_map_only_into_the_jobs_mounts():
    assert p.map_logdir("/mnt/out/tb/", VOLS) == (VOLS[0], "tb")
    assert p.map_logdir("/mnt/out", VOLS) == (VOLS[0], "")
    assert p.map_logdir("/mnt/out/deep/x", VOLS) == (VOLS[1], "x")  # the innermost mount holds it
    for bad in ("relative/tb", "/mnt/out/../../etc", "/mnt/out//tb", "//mnt/out/tb", "/mnt/out/./tb", "", None, 5,
                "/mnt/out/\x00", "/" + "a" * 2000):
        with pytest.raises(ValidationError) as e:
            p.map_logdir(bad, VOLS)
        assert e.value.field == "logdir", bad
    for elsewhere in ("/etc", "/mnt/outside", "/data/tmp/tb"):  # a good path, but the job's mounts decide: 409
        with pytest.raises(Conflict) as e:
            p.map_logdir(elsewhere, VOLS)
        assert e.value.field == "logdir", elsewhere
    with pytest.raises(Conflict, match="not inside"):
        p.map_logdir("/mnt/outside", VOLS)
    assert p.inside("/v/1/tb", "/v/1") and p.inside("/v/1", "/v/1") and not p.inside("/v/10", "/v/1")


def test_tensorboard_records_are_found_touched_and_reaped(tmp_path):
    """The registry every API process reads: a live record is found, a stale one (its process gone) is not."""
    import json
    import os

    tbs = TensorBoards(tmp_path, idle_timeout=60)
    me = {"job_id": 4, "key": "0123456789ab", "logdir": "/mnt/out/tb", "prefix": "/x", "port": 1, "pid": os.getpid(),
          "start_time": procs.start_time(os.getpid()), "started_at": time.time()}
    (tmp_path / "4-0123456789ab.json").write_text(json.dumps(me))
    (tmp_path / "4-ffffffffffff.json").write_text(json.dumps({**me, "key": "ffffffffffff", "pid": 999999999}))
    assert tbs.get(4, "0123456789ab")["logdir"] == "/mnt/out/tb"
    assert tbs.get(4, "ffffffffffff") is None
    assert [r["key"] for r in tbs.of_job(4)] == ["0123456789ab"] and tbs.of_job(5) == []
    os.utime(tmp_path / "4-0123456789ab.json", (0, 0))
    tbs.touch(me)
    assert (tmp_path / "4-0123456789ab.json").stat().st_mtime > 1000
    tbs.reap()
    assert not (tmp_path / "4-ffffffffffff.json").exists()  # stale records go
    assert (tmp_path / "4-0123456789ab.json").exists()  # not this process's child: never killed by it


@pytest.mark.skipif(not installed(), reason="tensorboard is not installed (extra 'tensorboard')")
async def test_a_tensorboard_starts_once_and_stops_when_idle(tmp_path):
    tbs = TensorBoards(tmp_path / "reg", idle_timeout=1.0, max_running=1)
    (tmp_path / "logs").mkdir()
    logs = str(tmp_path / "logs")
    uid = 900555 if os.geteuid() == 0 else None
    rec, started = await tbs.start(9, "ann", "/mnt/out/tb", logs, "/p/9/tensorboard/k", uid=uid,
                                   mount=(logs, "/mnt/out/tb"))
    assert started and procs.is_alive(rec["pid"], rec["start_time"])
    again, started = await tbs.start(9, "ann", "/mnt/out/tb", logs, "/p/9/tensorboard/k", uid=uid,
                                     mount=(logs, "/mnt/out/tb"))
    assert again["pid"] == rec["pid"] and not started
    with pytest.raises(Conflict):  # the cap counts every running TensorBoard
        await tbs.start(10, "ann", "/mnt/out/tb", logs, "/p/10/tensorboard/k", uid=uid, mount=(logs, "/mnt/out/tb"))
    tree = procs.descendants(rec["pid"], procs.snapshot()) | {rec["pid"]}
    tb = [p for p in tree if Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[1:3] == [b"-m", b"tensorboard.main"]]
    assert len(tb) == 1
    if uid is not None:  # TensorBoard runs as the job owner, never as the service
        assert Path(f"/proc/{tb[0]}").stat().st_uid == uid
    env = (Path(f"/proc/{tb[0]}/environ").read_bytes()).split(b"\0")
    assert not [e for e in env if e.startswith((b"JUPYTERHUB_", b"TI_"))]  # the service's secrets stay behind
    deadline = time.monotonic() + 20
    while procs.is_alive(rec["pid"], rec["start_time"]) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)  # the reaper stops it after 1 s without a request
    assert not procs.is_alive(rec["pid"], rec["start_time"]) and tbs.get(9, rec["key"]) is None
    tbs.stop_all()


async def test_backends_say_where_an_instance_listens():
    from ti_hub.backends.k8s.backend import KubernetesBackend
    from ti_hub.backends.k8s.objects import COMPLETION_INDEX
    from ti_hub.backends.local.backend import LocalBackend

    local = LocalBackend()
    assert local.shares_host_network
    assert await local.endpoint_address(3, {"instances": [{"index": 0}, {"index": 1}]}, 1) == ("127.0.0.1", None)
    with pytest.raises(LookupError):
        await local.endpoint_address(3, {"instances": [{"index": 0}]}, 1)

    kube = KubernetesBackend(namespace="users")
    assert not kube.shares_host_network

    async def no_watches(jobs=True):
        return None

    kube.start_watches = no_watches

    def pod(name, job, index, phase="Running", ip="10.1.2.3", created="2026-01-01T00:00:00Z"):
        return {"metadata": {"name": name, "namespace": "users", "creationTimestamp": created,
                             "labels": {"job-name": job, COMPLETION_INDEX: str(index)}},
                "status": {"phase": phase, "podIP": ip}}

    kube.pods_by_job[7] = {"a": pod("a", "j-ps", 0, ip="10.0.0.1"), "b": pod("b", "j-w", 1, ip="10.0.0.2"),
                           "c": pod("c", "j-w", 0, phase="Pending", ip="")}
    state = {"roles": [{"job": "j-ps", "offset": 0, "count": 1}, {"job": "j-w", "offset": 1, "count": 2}]}
    assert await kube.endpoint_address(7, state, 0) == ("10.0.0.1", None)
    assert await kube.endpoint_address(7, state, 2) == ("10.0.0.2", None)  # worker 1 of the second role
    for instance in (1, 3):  # pending, out of range
        with pytest.raises(LookupError):
            await kube.endpoint_address(7, state, instance)


def test_endpoint_origins_labels_tickets_and_cookies():
    from cryptography.fernet import Fernet

    from ti_hub.endpoints import origins as o

    ori = o.Origins.parse("https://ep.Example.org")
    assert (ori.scheme, ori.domain, ori.port) == ("https", "ep.example.org", None)
    assert ori.url(o.port_label(42, 0, 40001)) == "https://42-0-40001.ep.example.org/"
    assert o.Origins.parse("http://ep.localhost:8040").url("7-tb-0123456789ab", "/x") == \
        "http://7-tb-0123456789ab.ep.localhost:8040/x"
    for bad in ("ftp://ep.example.org", "https://ep.example.org/path", "ep.example.org", "https://"):
        with pytest.raises(ValueError):
            o.Origins.parse(bad)
    assert ori.label_of("42-0-40001.ep.example.org:443") == "42-0-40001"
    assert ori.label_of("42-0-40001.ep.example.org.evil.com") is None
    assert ori.label_of("x.42-0-40001.ep.example.org") is None and ori.label_of("ep.example.org") is None
    assert o.parse_label("42-1-40001") == o.Label(42, "port", 1, 40001)
    assert o.parse_label("42-tb-0123456789ab") == o.Label(42, "tensorboard", key="0123456789ab")
    assert o.parse_label("42-0-00080") is None and o.parse_label("42-0-4000") is None  # ports 40000-49999 only
    f, other = Fernet(Fernet.generate_key()), Fernet(Fernet.generate_key())
    ticket = o.seal(f, "ticket", "ann", "42-0-40001")
    assert o.unseal(f, ticket, "ticket", "42-0-40001", 60) == "ann"
    assert o.unseal(f, ticket, "cookie", "42-0-40001", 60) is None  # a ticket is not a cookie
    assert o.unseal(f, ticket, "ticket", "42-1-40001", 60) is None  # nor good for another endpoint
    assert o.unseal(other, ticket, "ticket", "42-0-40001", 60) is None and o.unseal(f, "junk", "ticket", "x", 60) is None
    import time as _t
    old = f.encrypt_at_time(b'{"k": "ticket", "u": "ann", "l": "42-0-40001"}', int(_t.time()) - 120).decode()
    assert o.unseal(f, old, "ticket", "42-0-40001", 60) is None  # expired
    for bad, good in (("//evil.example/x", "/"), ("https://evil.example/", "/"), ("/\\evil", "/"), ("/a?b=1", "/a?b=1")):
        assert o.safe_next(bad) == good
    login = o.origin_login(f, ori, "ann", "42-0-40001", "/lab", "a=1")
    assert login.startswith("https://42-0-40001.ep.example.org/_ti/login?ticket=") and "next=%2Flab%3Fa%3D1" in login
