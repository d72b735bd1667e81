"""WS7 on the embedded platform: an owner resets a stopped workspace to a fresh state (POST
/workspaces/{owner}/{name}/reset, `ti workspace reset`), keeping its configuration, its volumes and their home.

What goes is the workspace's own directories under the spawner's root (ti_hub/backends/local/wsstate.py): the
records and log of its past runs, its /tmp, its local scratch volumes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests

pytestmark = pytest.mark.e2e

WS = "reset-box"


@pytest.fixture(scope="module")
def rhub(hub):
    """The session's hub: the workspaces, volume and users here are this module's own, and the audit entries it
    checks are those of its own workspace (a hub of its own cost a start and a stop)."""
    return hub


def start(u, server: str) -> None:
    r = u.hub_api("POST", f"/users/{u.name}/servers/{server}",
                  json={"plan": "cpu-small", "volumes": [{"volume": "keep", "mount_path": "/mnt/keep"}]})
    assert r.status_code in (201, 202), r.text
    u.wait_server(server)


def stop(u, server: str) -> None:
    r = u.hub_api("DELETE", f"/users/{u.name}/servers/{server}")
    assert r.status_code in (202, 204), r.text
    u.wait_server(server, ready=False)


def tensorboard_for_the_workspace(rhub, alice, bob) -> None:
    """WS3: TensorBoard for a log directory of a workspace's volume, as for a job (what the Lab panel asks for),
    with the same rules: inside the workspace's volume mounts, the owner's alone."""
    r = alice.api("POST", f"/jobs/{WS}/tensorboard", json={"logdir": "/etc"})
    assert r.status_code == 409 and r.json()["field"] == "logdir" and "/mnt/keep" in r.json()["detail"], r.text
    assert alice.api("POST", f"/jobs/{WS}/tensorboard", json={"logdir": "/mnt/keep/../../etc"}).status_code == 400
    assert bob.api("POST", f"/jobs/{alice.name}/{WS}/tensorboard",
                   json={"logdir": "/mnt/keep/tb"}).status_code in (403, 404)
    tb = alice.ok("POST", f"/jobs/{WS}/tensorboard", json={"logdir": "/mnt/keep/tb"})
    ws_id = alice.ok("GET", f"/jobs/{WS}")["id"]
    assert tb["url"] == f"/services/ti/endpoints/{ws_id}/tensorboard/{tb['key']}/"
    token = {"Authorization": f"token {alice.token}"}
    r = requests.get(rhub.url + tb["url"], headers=token, timeout=30)
    assert r.status_code == 200 and "<html" in r.text.lower()
    assert requests.get(rhub.url + tb["url"], headers={"Authorization": f"token {bob.token}"},
                        timeout=30).status_code == 404
    assert alice.ok("DELETE", f"/jobs/{WS}/tensorboard")["stopped"] == 1


def test_a_stopped_workspace_is_reset_keeping_its_volumes_and_the_home(rhub):
    alice, bob = rhub.person("wsreset"), rhub.person("wsother")
    vol = alice.ok("POST", "/volumes", json={"name": "keep", "kind": "filesystem", "capacity_gib": 1})
    root = Path(rhub.data_dir) / "workspaces"
    run, tmp = root / "run" / alice.name / WS, root / "tmp" / alice.name / WS
    home = root / "home" / alice.name
    start(alice, WS)
    try:
        (Path(rhub.data_dir) / "volumes" / str(vol["id"]) / "kept.txt").write_text("on the volume")
        (Path(rhub.data_dir) / "volumes" / str(vol["id"]) / "tb").mkdir()
        (home / "mine.txt").write_text("in the home")
        (tmp / "left.txt").write_text("in /tmp")
        assert (run / "workspace.log").is_file() and (run / "record.json").is_file()
        # refused while it runs, naming the workspace; nothing removed
        r = alice.api("POST", f"/workspaces/{alice.name}/{WS}/reset")
        assert r.status_code == 409 and r.json()["field"] == "name", r.text
        assert f"workspace {WS} is running" in r.json()["detail"]
        assert (run / "record.json").is_file() and (tmp / "left.txt").is_file()
        tensorboard_for_the_workspace(rhub, alice, bob)
    finally:
        stop(alice, WS)
    assert alice.ok("GET", f"/jobs/{WS}")["status"] == "stopped"
    # only the owner: another user is not told it exists, an admin may not reset it
    assert bob.api("POST", f"/workspaces/{alice.name}/{WS}/reset").status_code == 404
    assert rhub.admin.api("POST", f"/workspaces/{alice.name}/{WS}/reset").status_code == 403
    # the CLI asks first: off a terminal, without --yes, it does nothing
    refused = alice.ti("workspace", "reset", WS)
    assert refused.returncode != 0 and "--yes" in refused.stderr, refused.stderr
    assert run.is_dir()
    done = alice.ti("workspace", "reset", WS, "--yes", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["name"], out["status"]) == (WS, "stopped")
    assert out["removed"] == ["records and log of its past runs", "its /tmp"]
    # its own state is gone; the volume's file, the home's file and the configuration stay
    assert not run.exists() and not tmp.exists()
    assert (Path(rhub.data_dir) / "volumes" / str(vol["id"]) / "kept.txt").read_text() == "on the volume"
    assert (home / "mine.txt").read_text() == "in the home"
    ws = alice.ok("GET", f"/jobs/{WS}")
    assert [v["mount_path"] for v in ws["volumes"]] == ["/mnt/keep"]
    assert any(e["message"].startswith("reset to a fresh state (records and log") for e in ws["events"])
    # audited: who reset which workspace, and what went
    entries = rhub.admin.ok("GET", "/audit", params={"action": "workspace.reset", "target": f"{alice.name}/{WS}"}
                            )["items"]
    assert [(e["actor"], e["target"], e["detail"]["removed"]) for e in entries] == \
        [(alice.name, f"{alice.name}/{WS}", out["removed"])]
    # a second reset finds nothing of its own left, and says so
    assert alice.ok("POST", f"/workspaces/{alice.name}/{WS}/reset")["removed"] == []
    # and the workspace starts again from the fresh state, with its volume
    start(alice, WS)
    try:
        assert (run / "workspace.log").is_file()
        assert alice.ok("GET", f"/jobs/{WS}")["status"] == "running"
    finally:
        stop(alice, WS)


def test_a_training_job_or_an_unknown_workspace_is_no_workspace_to_reset(rhub):
    u = rhub.person("wsresetjob")
    j = u.ok("POST", "/jobs", json={"name": "not-a-ws", "plan": "cpu-small", "image": "python-cpu",
                                    "command": "true"})
    u.wait_job(j["id"])
    r = u.api("POST", f"/workspaces/{u.name}/not-a-ws/reset")
    assert r.status_code == 404 and r.json()["field"] == "name" and "training job" in r.json()["detail"], r.text
    r = u.api("POST", f"/workspaces/{u.name}/no-such-box/reset")
    assert r.status_code == 404, r.text
