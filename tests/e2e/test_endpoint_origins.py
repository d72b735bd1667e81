"""JOB6 endpoints on origins of their own (TiService.endpoint_origin): a job's page never runs on the hub's origin.

The hub is started with ``--endpoint-origin http://ep.localhost:PORT``: a job's port is at
``http://ID-0-PORT.ep.localhost:PORT/``, served by the ti service on that port. Requests here go to 127.0.0.1 with
the endpoint's Host (browsers resolve *.localhost themselves; tests/browser covers one).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from hubproc import free_port, own_hub
from tihub_client import free_job_port, wait

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def ohub(tmp_path_factory):
    ep_port = free_port()
    origin = {"TI_HUB_ENDPOINT_ORIGIN": f"http://ep.localhost:{ep_port}"}
    for hub in own_hub(tmp_path_factory, "ohub", extra_env=origin):
        hub.ep_port = ep_port
        yield hub


def person(hub, name: str):
    hub.signup(name, "pass-word-1234")
    hub.admin.authorize(name)
    return hub.login(name, "pass-word-1234")


def at_origin(hub, url: str, **kw) -> requests.Response:
    """A request to an endpoint origin's URL, sent to the ti service's port with the origin's Host."""
    u = urlsplit(url)
    headers = {**kw.pop("headers", {}), "Host": u.netloc}
    target = f"http://127.0.0.1:{hub.ep_port}{u.path}" + (f"?{u.query}" if u.query else "")
    return requests.get(target, headers=headers, allow_redirects=False, timeout=30, **kw)


def to_origin(session, url: str) -> str:
    """Follow the hub's redirects (its login, the service's OAuth) until one leaves for the endpoint's origin."""
    for _ in range(10):
        r = session.browser.get(url, headers={"Accept": "text/html"}, allow_redirects=False, timeout=30)
        assert r.status_code in (301, 302, 303, 307), (r.status_code, r.text[:300])
        url = requests.compat.urljoin(url, r.headers["Location"])
        if ".ep.localhost" in urlsplit(url).netloc:
            return url
    raise AssertionError("never sent to the endpoint's origin")


def test_a_jobs_page_is_served_on_its_own_origin_to_its_owner_only(ohub):
    owner, other = person(ohub, "origowner"), person(ohub, "origother")
    port = free_job_port()
    page = ohub.put_in_home(owner.name, __file__, "index.html")
    job = owner.ok("POST", "/jobs", json={
        "name": "served", "plan": "cpu-small", "image": "python-cpu", "ports": [port],
        "command": f"cd /home/{owner.name} && python3 -m http.server {port} --bind 127.0.0.1"})
    owner.wait_job(job["id"], states=("running",), timeout=90)
    label_host = f"{job['id']}-0-{port}.ep.localhost:{ohub.ep_port}"
    detail = owner.ok("GET", f"/jobs/{job['id']}")
    assert detail["endpoint_urls"] == {str(port): f"http://{label_host}/"}

    # a program with the owner's token: served at the origin's root, the whole path going to the job
    wait(lambda: at_origin(ohub, f"http://{label_host}/index.html",
                           headers={"Authorization": f"token {owner.token}"}).status_code == 200, 60,
         "the job's server")
    r = at_origin(ohub, f"http://{label_host}/index.html", headers={"Authorization": f"token {owner.token}"})
    assert "origins of their own" in r.text and page.endswith("index.html")
    # another user's token: nothing (as if the job did not exist)
    assert at_origin(ohub, f"http://{label_host}/", headers={"Authorization": f"token {other.token}"}
                     ).status_code == 404

    # a browser: the hub-origin URL never serves the job's page; it hands a ticket to the endpoint's origin
    hub_side = f"{ohub.url}/services/ti/endpoints/{job['id']}/0/{port}/index.html"
    login = to_origin(owner, hub_side)
    assert urlsplit(login).netloc == label_host and urlsplit(login).path == "/_ti/login"
    assert parse_qs(urlsplit(login).query)["next"] == ["/index.html"]
    r = at_origin(ohub, login)
    assert r.status_code == 302 and r.headers["Location"] == "/index.html"
    cookie = r.headers["Set-Cookie"]
    assert cookie.startswith("ti-endpoint=") and "HttpOnly" in cookie and "Domain" not in cookie  # host-only
    value = re.match(r"ti-endpoint=([^;]+)", cookie)[1]
    jar = {"Cookie": f"ti-endpoint={value}"}
    r = at_origin(ohub, f"http://{label_host}/index.html", headers=jar)
    assert r.status_code == 200 and "origins of their own" in r.text
    # the cookie opens that one endpoint only, and the ticket is of no use to anyone else's origin
    other_label = f"{job['id']}-1-{port}.ep.localhost:{ohub.ep_port}"
    assert at_origin(ohub, f"http://{other_label}/", headers=jar).status_code == 401
    ticket_elsewhere = login.replace(label_host, other_label)
    assert at_origin(ohub, ticket_elsewhere).status_code == 403
    # without a login, a browser goes through the hub (where it logs in) and comes back
    r = at_origin(ohub, f"http://{label_host}/x?y=1", headers={"Accept": "text/html"})
    assert r.status_code == 302 and r.headers["Location"] == f"{ohub.url}/services/ti/endpoints/{job['id']}/0/" \
                                                             f"{port}/x?y=1"
    # another user's browser gets no ticket: the hub side answers as if the job did not exist
    r = other.browser.get(hub_side, headers={"Accept": "text/html"}, timeout=30)
    assert r.status_code == 404 and ".ep.localhost" not in r.url
    owner.api("POST", f"/jobs/{job['id']}/kill")
