"""ACC5 custom roles through the whole platform: the hub's RBAC decides for workspaces as it does for the API.

A hub of its own whose preset User role lacks submit; a custom role "trainer" (given to the group "trainers")
grants it. The spawner reads the owner's scopes inside the hub at each start and the ti service acts on them.
"""

from __future__ import annotations


import pytest
from hubproc import own_hub

pytestmark = pytest.mark.e2e

SUBMIT = "custom:ti:jobs:submit"
CONFIG = f"""
for _role in c.JupyterHub.load_roles:
    if _role["name"] == "user":
        _role["scopes"] = [s for s in _role["scopes"] if s != "{SUBMIT}"]
c.JupyterHub.load_groups["trainers"] = {{"users": []}}
c.JupyterHub.load_roles.append({{"name": "trainer", "description": "may train", "scopes": ["{SUBMIT}"],
                                 "groups": ["trainers"]}})
"""


@pytest.fixture(scope="module")
def rhub(tmp_path_factory):
    yield from own_hub(tmp_path_factory, "rhub", CONFIG)



def test_the_owners_hub_roles_decide_for_their_workspaces(rhub):
    plain, trainer = rhub.person("plain"), rhub.person("trainer")
    r = rhub.admin.hub_api("POST", "/groups/trainers/users", json={"users": [trainer.name]})
    assert r.status_code == 200, r.text
    # without submit: no job through the API, and no workspace through the hub -- a 403 naming the permission
    r = plain.api("POST", "/jobs", json={"name": "no-job", "plan": "cpu-small", "image": "python-cpu",
                                         "command": "true"})
    assert r.status_code == 403 and SUBMIT in r.json()["detail"]
    r = plain.spawn("ws-plain")
    assert r.status_code == 403, r.text
    assert SUBMIT in r.json()["message"]
    assert not plain.hub_api("GET", f"/users/{plain.name}").json()["servers"].get("ws-plain", {}).get("ready")
    assert plain.ok("GET", "/jobs?kind=workspace")["total"] == 0  # nothing stored, nothing holds resources
    # nobody vouches for themselves: only the hub's spawner identity may tell the service an owner's scopes
    r = plain.api("POST", f"/workspaces/{plain.name}/sneaky", json={"groups": [], "options": {"plan": "cpu-small"},
                                                                   "scopes": [SUBMIT]})
    assert r.status_code == 403 and "custom:ti:workspaces:admit" in r.json()["detail"]

    # the custom role grants submit: the trainer's workspace starts
    r = trainer.spawn("ws-trainer")
    assert r.status_code in (201, 202), r.text
    trainer.wait_server("ws-trainer")
    assert trainer.ok("GET", "/jobs/ws-trainer")["status"] == "running"
    trainer.hub_api("DELETE", f"/users/{trainer.name}/servers/ws-trainer")
    trainer.wait_server("ws-trainer", ready=False)
    # taken away, it counts at the very next start (read from the hub's RBAC each time, never cached)
    r = rhub.admin.hub_api("DELETE", "/groups/trainers/users", json={"users": [trainer.name]})
    assert r.status_code == 200, r.text
    r = trainer.spawn("ws-trainer")
    assert r.status_code == 403 and SUBMIT in r.json()["message"], r.text
    assert trainer.ok("GET", "/jobs/ws-trainer")["status"] == "stopped"
