"""Images, credentials, keys, volumes and templates through the real API: what docs/security.md claims."""

from __future__ import annotations

import base64
import sqlite3

import pytest

pytestmark = pytest.mark.e2e

ED25519 = "ssh-ed25519 " + base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + b"\x00\x00\x00\x20" + bytes(range(32))
                                            ).decode() + " me@laptop"


def test_registry_passwords_are_encrypted_and_never_returned(hub, new_user):
    u = new_user("creds")
    secret = "s3cret-Registry-Pass!"
    made = u.ok("POST", "/credentials", json={"name": "myreg", "registry": "registry.example.org:5000",
                                              "username": "bot", "password": secret})
    listed = u.api("GET", "/credentials")
    for body in (str(made), listed.text):
        assert secret not in body and "password" not in body
    with sqlite3.connect(hub.data_dir / "ti.sqlite") as db:
        stored = db.execute("SELECT password_encrypted FROM ti_registry_credentials WHERE name='myreg'").fetchone()[0]
    assert secret.encode() not in stored
    # a job may use it; another user cannot even name it
    other = new_user("credsother")
    r = other.api("POST", "/jobs", json={"name": "steal-cred", "plan": "cpu-small", "image": "python-cpu",
                                         "command": "true", "credential": "myreg"})
    assert r.status_code == 404 and r.json()["field"] == "credential"


def test_a_clone_keeps_its_jobs_registry_credential_and_only_its_owner_may_clone_it(hub, new_user):
    u = new_user("credclone")
    cred = u.ok("POST", "/credentials", json={"name": "cloned-reg", "registry": "registry.example.org",
                                              "username": "bot", "password": "pw-for-clone"})
    job = u.ok("POST", "/jobs", json={"name": "with-cred", "plan": "cpu-small", "image": "python-cpu",
                                      "command": "true", "credential": "cloned-reg"})
    assert job["credential_id"] == cred["id"]
    u.wait_job(job["id"])
    clone = u.ok("POST", f"/jobs/{job['id']}/clone", json={})
    assert clone["credential_id"] == cred["id"] and clone["name"] == "with-cred-2"
    # an admin's clone would pull with another user's login: refused, as for secret entries
    r = hub.admin.api("POST", f"/jobs/{job['id']}/clone", json={})
    assert r.status_code == 403 and "registry credential" in r.json()["detail"], r.text
    plain = u.ok("POST", "/jobs", json={"name": "no-cred", "plan": "cpu-small", "image": "python-cpu",
                                        "command": "true"})
    assert plain["credential_id"] is None
    for j in (clone, plain):
        u.api("POST", f"/jobs/{j['id']}/kill")  # (or already ended)


def test_ssh_keys_are_checked_and_fingerprinted(hub, new_user):
    u = new_user("keys")
    key = u.ok("POST", "/keys", json={"name": "laptop", "key": ED25519})
    assert key["fingerprint"].startswith("SHA256:")
    r = u.api("POST", "/keys", json={"name": "again", "key": ED25519})
    assert r.status_code == 409 and r.json()["field"] == "key"
    forged = "ssh-rsa " + ED25519.split()[1]  # an ed25519 blob labelled as RSA
    r = u.api("POST", "/keys", json={"name": "forged", "key": forged})
    assert r.status_code == 400 and r.json()["field"] == "key"
    assert [k["name"] for k in u.ok("GET", "/keys")["items"]] == ["laptop"]
    u.api("DELETE", "/keys/laptop")
    assert u.ok("GET", "/keys")["total"] == 0


def test_volume_browsing_stays_inside_the_volume(hub, new_user):
    u = new_user("browse")
    vol = u.ok("POST", "/volumes", json={"name": "browse-me", "kind": "filesystem", "capacity_gib": 1})
    vdir = hub.data_dir / "volumes" / str(vol["id"])
    (vdir / "sub").mkdir()
    (vdir / "sub" / "a.txt").write_text("hello")
    (vdir / "escape").symlink_to("/etc")
    listing = u.ok("GET", f"/volumes/{vol['id']}/files", params={"path": "sub"})
    assert [(e["name"], e["size"]) for e in listing["entries"]] == [("a.txt", 5)]
    # '..' is bad input (400); through a link is what the volume holds refusing it (409)
    for bad, status in (("../..", 400), ("sub/../../..", 400), ("escape/passwd", 409)):
        r = u.api("GET", f"/volumes/{vol['id']}/files", params={"path": bad})
        assert r.status_code == status and r.json()["field"] == "path", bad
    # a link is shown as what it is, never listed through
    assert u.ok("GET", f"/volumes/{vol['id']}/files", params={"path": "escape"}) == {
        "path": "escape", "type": "link", "size": 4, "entries": []}
    other = new_user("browseother")
    assert other.api("GET", f"/volumes/{vol['id']}/files").status_code == 404


def test_lists_paginate(hub, new_user):
    u = new_user("pages")
    for i in range(3):
        u.ok("POST", "/templates", json={"name": f"tpl-{i:02d}", "spec": {"plan": "cpu-small", "command": "true"}})
    page = u.ok("GET", "/templates", params={"limit": 2, "offset": 1})
    assert page["total"] == 3 and page["limit"] == 2 and [t["name"] for t in page["items"]] == ["tpl-01", "tpl-02"]
    r = u.api("GET", "/templates", params={"limit": 0})
    assert r.status_code == 400 and r.json()["field"] == "limit"
    # a template fills a submission; the submission's own fields win
    j = u.ok("POST", "/jobs", json={"name": "from-tpl", "template": "tpl-00", "image": "python-cpu",
                                    "command": "echo mine"})
    assert j["command"] == "echo mine" and j["plan_id"] is not None
    u.ok("POST", f"/jobs/{j['id']}/kill")


def test_a_workspace_takes_its_owners_registry_credential_and_no_one_elses(hub, new_user):
    u, other = new_user("wscred"), new_user("wscredother")
    cred = u.ok("POST", "/credentials", json={"name": "ws-reg", "registry": "registry.example.org",
                                              "username": "bot", "password": "pw-for-workspace"})
    # the spawn form offers it (id, name, registry; never the login's secret)
    page = u.browser.get(f"{hub.url}/hub/spawn/{u.name}/cred-box").text
    assert 'name="credential"' in page and "ws-reg (registry.example.org)" in page
    assert "pw-for-workspace" not in page
    # another user cannot name it: refused before anything is stored
    r = other.hub_api("POST", f"/users/{other.name}/servers/steal-box", json={"plan": "cpu-small",
                                                                                "credential": "ws-reg"})
    assert 400 <= r.status_code < 500 and "credential" in r.json()["message"], r.text
    r = other.hub_api("POST", f"/users/{other.name}/servers/steal-box2", json={"plan": "cpu-small",
                                                                                 "credential": cred["id"]})
    assert 400 <= r.status_code < 500 and "credential" in r.json()["message"], r.text
    assert not any(w["name"].startswith("steal-box") for w in other.ok("GET", "/jobs?kind=workspace")["items"])
    # the owner's workspace pulls with it (on Kubernetes) and says so
    r = u.hub_api("POST", f"/users/{u.name}/servers/cred-box", json={"plan": "cpu-small", "credential": "ws-reg"})
    assert r.status_code in (201, 202), r.text
    u.wait_server("cred-box")
    assert u.ok("GET", "/jobs/cred-box")["credential_id"] == cred["id"]
    u.hub_api("DELETE", f"/users/{u.name}/servers/cred-box")
    u.wait_server("cred-box", ready=False)
    # a restart without options is a restart with the last ones (the hub keeps them): the credential stays
    r = u.hub_api("POST", f"/users/{u.name}/servers/cred-box")
    assert r.status_code in (201, 202), r.text
    u.wait_server("cred-box")
    assert u.ok("GET", "/jobs/cred-box")["credential_id"] == cred["id"]
    u.hub_api("DELETE", f"/users/{u.name}/servers/cred-box")
    u.wait_server("cred-box", ready=False)
