"""Issue 31 (3, 4, 6): what a newcomer sees while a workspace starts, through the public port.

A hub of its own whose workspace "server" prints a few lines (its token among them) and exits with code 3, after
EXIT_AFTER seconds (a user option's environment variable): the start fails at once with the exit code and the
log's last lines, scrubbed; the progress events arrive as they happen, in plain words; names that cannot name a
workspace are refused with the rule before the hub stores anything.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from hubproc import own_hub

pytestmark = pytest.mark.e2e

SERVER = (
    "import os, sys, time\n"
    "tok = os.environ.get('JUPYTERHUB_API_TOKEN', '')\n"
    "print('test server starting, token ' + tok, flush=True)\n"
    "print('url http://127.0.0.1/lab?token=' + tok, flush=True)\n"
    "time.sleep(float(os.environ.get('EXIT_AFTER') or 0))\n"
    "print('ModuleNotFoundError: no module named nonsense', file=sys.stderr, flush=True)\n"
    "sys.exit(3)\n"
)
RULE = "4-30 characters: lowercase letters, digits and single hyphens"


@pytest.fixture(scope="module")
def fhub(tmp_path_factory):
    yield from own_hub(tmp_path_factory, "feedback",
                       f"import sys\nc.TiLocalSpawner.cmd = [sys.executable, '-c', {SERVER!r}]\n")


def rows(u) -> list[str]:
    """The person's named servers as the home page lists them (stopped ones too)."""
    return [n for n in u.hub_api("GET", f"/users/{u.name}?include_stopped_servers=1").json()["servers"] if n]


def read_events(response, out: list) -> None:
    """(seconds since the stream opened, event) for each event of an event stream, as it arrives."""
    t0 = time.monotonic()
    for line in response.iter_lines(chunk_size=1):
        if line.startswith(b"data:"):
            out.append((time.monotonic() - t0, json.loads(line[5:])))


def test_a_server_that_exits_fails_the_start_at_once_with_its_reason(fhub):
    u = fhub.person("boom")
    t0 = time.monotonic()
    r = u.hub_api("POST", f"/users/{u.name}/servers/boom-box", json={"plan": "cpu-small"})
    took = time.monotonic() - t0
    assert r.status_code == 500, r.text
    said = r.json()["message"]
    assert took < 15, took  # not the hub's http_timeout (120 s)
    assert "ended before Jupyter answered: exited with code 3" in said, said
    assert "no module named nonsense" in said and "test server starting" in said, said
    token_line = next(ln for ln in said.splitlines() if "test server starting" in ln)
    assert token_line.endswith("token [secret]"), said  # the server's own token is not shown
    assert "?token=[secret]" in said, said
    # the progress stream of the failed start says the same
    events = []
    read_events(u.http.get(f"{fhub.url}/hub/api/users/{u.name}/servers/boom-box/progress", stream=True,
                           timeout=30), events)
    last = events[-1][1]
    assert last["failed"] and "exited with code 3" in last["message"], last
    assert "<pre" in last["html_message"] and "no module named nonsense" in last["html_message"], last
    job = u.ok("GET", "/jobs/boom-box")
    assert job["status"] == "stopped" and "exited with code 3" in job["reason"], job


def test_progress_events_arrive_through_the_public_port_as_they_happen(fhub):
    u = fhub.person("watcher")
    answer = {}
    spawn = threading.Thread(target=lambda: answer.update(r=u.hub_api(
        "POST", f"/users/{u.name}/servers/slow-box", json={"plan": "cpu-small", "env": {"EXIT_AFTER": "4"}})))
    spawn.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        s = u.hub_api("GET", f"/users/{u.name}").json()["servers"].get("slow-box")
        if s and s.get("pending") == "spawn":
            break
        time.sleep(0.05)
    else:
        pytest.fail("the spawn never became pending")
    events = []
    read_events(u.http.get(f"{fhub.url}/hub/api/users/{u.name}/servers/slow-box/progress", stream=True,
                           timeout=60), events)
    spawn.join(30)
    messages = [e["message"] for _, e in events]
    assert any(m.startswith("Admitted, starting on ") for m in messages), messages
    assert "Workspace started; waiting for Jupyter to answer" in messages, messages
    assert not any("admitted: " in m.lower() for m in messages), messages
    end_at, end = events[-1]
    assert end["failed"] and "exited with code 3" in end["message"], end
    # the events before the end came as they happened, not held until the spawn ended (4 s later)
    waiting_at = next(at for at, e in events if e["message"].startswith("Workspace started"))
    assert end_at - waiting_at > 2.5, events
    assert answer["r"].status_code == 500


@pytest.mark.parametrize("bad", ["dev_box", "ab", "Dev-Box", "box-", "a--b-c"])
def test_a_name_that_cannot_name_a_workspace_is_refused_before_the_hub_stores_it(fhub, bad):
    u = fhub.person("namer")
    xsrf = {"_xsrf": u.browser.cookies.get("_xsrf", path="/hub/")}
    refusals = [
        u.hub_api("POST", f"/users/{u.name}/servers/{bad}", json={"plan": "cpu-small"}),
        u.hub_api("PUT", f"/users/{u.name}/servers/{bad}", json={}),
    ]
    for r in refusals:
        assert r.status_code == 400 and RULE in r.json()["message"] and repr(bad) in r.json()["message"], r.text
    page = u.browser.get(f"{fhub.url}/hub/spawn/{u.name}/{bad}")
    assert page.status_code == 400 and "cannot name a workspace" in page.text and RULE in page.text
    page = u.browser.post(f"{fhub.url}/hub/spawn/{u.name}/{bad}", data={"plan": "cpu-small", **xsrf})
    assert page.status_code == 400 and "cannot name a workspace" in page.text
    assert rows(u) == []  # no row on the home page
    # a name within the rule is stored
    r = u.hub_api("PUT", f"/users/{u.name}/servers/good-name-1", json={})
    assert r.status_code in (200, 201), r.text
    assert rows(u) == ["good-name-1"]
    u.hub_api("DELETE", f"/users/{u.name}/servers/good-name-1", json={"remove": True})
