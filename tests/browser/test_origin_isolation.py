"""Why endpoints on origins of their own matter, shown in Chromium: a job's page opened from TiHub lands on its own
origin (``ID-0-PORT.ep.localhost``), where its scripts cannot read the hub's pages (the XSRF value on /hub/home
that would let them act as the viewer)."""

from __future__ import annotations

import pytest

from hubproc import free_port, own_hub
from tihub_client import free_job_port, wait

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

# what a hostile job serves: it reads its own origin (so scripts and fetch do run), then tries to read the hub's
# home page with the viewer's cookies
PAGE = """<!doctype html><title>waiting</title><script>
fetch("/index.html").then(r => r.ok ? "own ok" : "own failed").catch(() => "own failed").then(own =>
  fetch("{hub}/hub/home", {{credentials: "include"}})
    .then(r => r.text())
    .then(t => {{ document.title = own + ", " + (t.includes("_xsrf") ? "READ THE HUB" : "READ SOMETHING"); }})
    .catch(() => {{ document.title = own + ", hub BLOCKED"; }}));
</script>"""


@pytest.fixture(scope="module")
def ohub(tmp_path_factory):
    ep_port = free_port()
    origin = {"TI_HUB_ENDPOINT_ORIGIN": f"http://ep.localhost:{ep_port}"}
    for hub in own_hub(tmp_path_factory, "obhub", extra_env=origin):
        hub.ep_port = ep_port
        yield hub


def test_a_jobs_page_on_its_own_origin_cannot_read_the_hub(ohub, page_for, tmp_path):
    user = ohub.person("originview")
    port = free_job_port()
    (tmp_path / "index.html").write_text(PAGE.format(hub=ohub.url))
    ohub.put_in_home(user.name, tmp_path / "index.html")
    job = user.ok("POST", "/jobs", json={
        "name": "evil-page", "plan": "cpu-small", "image": "python-cpu", "ports": [port],
        "command": f"cd /home/{user.name} && python3 -m http.server {port} --bind 127.0.0.1"})
    user.wait_job(job["id"], states=("running",), timeout=90)
    wait(lambda: "Serving HTTP" in user.ok("GET", f"/jobs/{job['id']}/logs")["text"], 30, "the job's server")
    page = page_for(ohub, user)
    page.goto(f"{ohub.url}/services/ti/endpoints/{job['id']}/0/{port}/index.html")
    page.wait_for_url(f"http://{job['id']}-0-{port}.ep.localhost:{ohub.ep_port}/index.html")
    page.wait_for_function("document.title !== 'waiting'")
    assert page.title() == "own ok, hub BLOCKED"  # the browser keeps the hub's pages from the job's origin
    user.api("POST", f"/jobs/{job['id']}/kill")
