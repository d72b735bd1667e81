"""People and groups (SPEC ACC3-4, ADM1): admins create users (one, or many from a CSV file), change their
profiles, disable, enable and delete them, and manage groups, through the API and `ti`; the last system admin
is never disabled, demoted or deleted; every change is audited."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hubproc import own_hub

pytestmark = pytest.mark.e2e
_n = itertools.count(1)
REPO = str(Path(__file__).resolve().parents[2])


def fresh(prefix: str) -> str:
    return f"{prefix}{os.getpid() % 1000:03d}{next(_n):02d}"


def ti(session, *args: str, stdin: str | None = None):
    """`ti` as this person, with input on stdin (Session.ti passes none)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "TI_API_URL": session.hub.url,
           "TI_TOKEN": session.token, "TI_CONFIG": "/nonexistent/ti.json", "PYTHONPATH": REPO}
    return subprocess.run([sys.executable, "-m", "ti_hub.cli.main", *args], env=env, capture_output=True, text=True,
                          input=stdin, timeout=60)


def audit(admin, target: str) -> list[tuple[str, dict]]:
    return [(e["action"], e["detail"]) for e in admin.ok("GET", "/audit", params={"target": target})["items"]]


def test_admin_creates_a_user_who_logs_in_at_once(hub, new_user):
    admin = hub.admin
    team = fresh("ppteam")
    admin.ok("POST", "/groups", json={"name": team, "description": "People test team"})
    name, password = fresh("ppann"), "ann-password-123"
    u = admin.ok("POST", "/users", json={"name": name, "password": password, "nickname": "Ann", "phone": "+1 555-0100",
                                         "email": "ann@example.org", "groups": [team]})
    assert (u["name"], u["nickname"], u["email"], u["phone"], u["enabled"], u["groups"]) == \
        (name, "Ann", "ann@example.org", "+1 555-0100", True, [team])
    # the hub's login form lets them in with the password given, at once (no sign-up, no approval)
    ann = hub.login(name, password)
    assert ann.ok("GET", "/me")["name"] == name
    assert admin.ok("GET", f"/users/{name}")["nickname"] == "Ann"
    assert any(x["name"] == name for x in admin.ok("GET", "/users", params={"limit": "500"})["items"])

    # bad input: 4xx naming the field (a group that does not exist: 404), nobody created
    for body, field in (({"email": "not-an-address"}, "email"), ({"phone": "call me"}, "phone"),
                        ({"nickname": "x" * 64}, "nickname"), ({"password": "short"}, "password"),
                        ({"password": "\u00e9" * 19}, "password"),  # past 72 bytes: more than bcrypt reads
                        ({"name": "Bad Name"}, "name"), ({"groups": ["no-such-group"]}, "groups")):
        data = {"name": fresh("ppbad"), "password": "long-enough-123", **body}
        r = admin.api("POST", "/users", json=data)
        assert r.status_code == (404 if field == "groups" else 400) and r.json()["field"] == field, (body, r.text)
        if field != "name":
            assert admin.api("GET", f"/users/{data['name']}").status_code == 404
    r = admin.api("POST", "/users", json={"name": name, "password": "long-enough-123"})
    assert r.status_code == 409 and r.json()["field"] == "name"

    # change the profile; an empty value clears
    r = admin.api("PATCH", f"/users/{name}", json={"email": "bad@"})
    assert r.status_code == 400 and r.json()["field"] == "email"
    changed = admin.ok("PATCH", f"/users/{name}", json={"nickname": "Annie", "phone": ""})
    assert (changed["nickname"], changed["phone"], changed["email"]) == ("Annie", "", "ann@example.org")
    entries = audit(admin, name)
    assert [a for a, _ in entries] == ["user.change", "user.create"]
    assert entries[0][1] == {"nickname": "Annie", "phone": ""}
    assert "password" not in json.dumps(entries) and password not in json.dumps(entries)

    # only users:manage
    plain = new_user("ppplain")
    assert plain.api("GET", "/users").status_code == 403
    r = plain.api("POST", "/users", json={"name": fresh("ppsneak"), "password": "long-enough-123"})
    assert r.status_code == 403 and "custom:ti:users:manage" in r.json()["detail"]

    # the CLI: create (password on stdin), show, change, list --json
    cli_name = fresh("ppcli")
    r = ti(admin, "user", "create", cli_name, "--password-stdin", "--nickname", "Cli", "--email", "cli@example.org",
           stdin="cli-password-123\n")
    assert r.returncode == 0, r.stderr
    assert hub.login(cli_name, "cli-password-123").ok("GET", "/me")["name"] == cli_name
    r = ti(admin, "user", "change", cli_name, "--phone", "12345")
    assert r.returncode == 0 and "12345" in r.stdout, r.stderr
    r = ti(admin, "user", "change", cli_name, "--email", "nope")
    assert r.returncode == 1 and "field: email" in r.stderr
    listed = json.loads(ti(admin, "user", "list", "--json").stdout)
    assert {"name": cli_name, "phone": "12345"}.items() <= next(x for x in listed if x["name"] == cli_name).items()
    assert json.loads(ti(admin, "user", "show", cli_name, "--json").stdout)["nickname"] == "Cli"
    r = ti(plain, "user", "list")
    assert r.returncode == 1 and "users:manage" in r.stderr


def test_disabled_user_cannot_log_in_nor_use_the_api(hub):
    admin = hub.admin
    name, password = fresh("ppdis"), "dis-password-123"
    admin.ok("POST", "/users", json={"name": name, "password": password})
    them = hub.login(name, password)
    assert them.ok("GET", "/me")["name"] == name

    assert admin.ok("POST", f"/users/{name}/disable")["enabled"] is False
    r = them.api("GET", "/me")  # a token issued before: revoked, refused by the ti API at once
    assert r.status_code == 401, r.text
    with pytest.raises(PermissionError):
        hub.login(name, password)
    assert admin.ok("GET", f"/users/{name}")["enabled"] is False

    assert admin.ok("POST", f"/users/{name}/enable")["enabled"] is True
    assert hub.login(name, password).ok("GET", "/me")["name"] == name
    assert [a for a, _ in audit(admin, name)] == ["user.enable", "user.disable", "user.create"]

    r = ti(admin, "user", "disable", name)
    assert r.returncode == 0, r.stderr
    with pytest.raises(PermissionError):
        hub.login(name, password)
    assert ti(admin, "user", "enable", name).returncode == 0
    assert hub.login(name, password)
    assert admin.api("POST", "/users/no-such-user-x/disable").status_code == 404


def test_disabling_revokes_tokens_for_good(hub):
    """Issue 30: a disabled user's tokens (API tokens, the OAuth token of their ti-service login) and hub login
    cookie are revoked, in every API process of the ti service at once, and enabling them again brings none of
    them back: they log in again."""
    import requests

    admin = hub.admin
    name, password = fresh("pprev"), "rev-password-123"
    admin.ok("POST", "/users", json={"name": name, "password": password})
    them = hub.login(name, password)
    auth = {"Authorization": f"token {them.token}"}

    def ti_statuses() -> set[int]:
        """/me with their token on new connections: the service's API processes all answer some."""
        return {requests.get(hub.api_url + "/me", headers=auth, timeout=30).status_code for _ in range(8)}

    assert ti_statuses() == {200}  # the token is now in every process's cache of the hub's answers
    assert them.hub_api("GET", "/user").status_code == 200
    assert "/hub/login" not in them.browser.get(f"{hub.url}/services/ti/", timeout=30).url  # an OAuth login
    assert them.spawn("ws-rev").status_code in (201, 202)
    them.wait_server("ws-rev")

    out = admin.ok("POST", f"/users/{name}/disable")
    assert out["enabled"] is False
    # their API token, the OAuth token of their login to the ti service's pages, the workspace's; it stopped
    assert out["revoked"]["tokens"] >= 2 and out["revoked"]["servers_stopped"] == ["ws-rev"], out
    deadline = time.monotonic() + 60
    while "ws-rev" in admin.hub_api("GET", f"/users/{name}").json()["servers"]:  # the hub may stop it in the background
        assert time.monotonic() < deadline, "the disabled user's workspace still runs"
        time.sleep(0.3)
    entry = next(d for a, d in audit(admin, name) if a == "user.disable")
    assert entry["revoked"]["tokens"] == out["revoked"]["tokens"]
    assert ti_statuses() == {401}
    assert them.hub_api("GET", "/user").status_code == 403

    assert admin.ok("POST", f"/users/{name}/enable")["enabled"] is True
    # nothing of before comes back: the token, the hub's login cookie, the ti service's login cookie
    assert ti_statuses() == {401}
    assert them.hub_api("GET", "/user").status_code == 403
    r = them.browser.get(f"{hub.url}/hub/home", allow_redirects=False, timeout=30)
    assert r.status_code == 302 and "/hub/login" in r.headers["Location"], (r.status_code, r.headers)
    assert "/hub/login" in them.browser.get(f"{hub.url}/services/ti/", timeout=30).url
    # a fresh login works
    again = hub.login(name, password)
    assert again.ok("GET", "/me")["name"] == name

    r = ti(admin, "user", "disable", name)
    assert r.returncode == 0 and "revoked 1 token(s)" in r.stdout, (r.stdout, r.stderr)
    assert again.api("GET", "/me").status_code == 401


def test_a_user_with_work_in_progress_is_not_deleted(hub):
    admin = hub.admin
    name, password = fresh("ppdel"), "del-password-123"
    admin.ok("POST", "/users", json={"name": name, "password": password})
    them = hub.login(name, password)
    job = them.ok("POST", "/jobs", json={"name": "pp-long-job", "plan": "cpu-small", "image": "python-cpu",
                                         "command": "sleep 600"})
    r = admin.api("DELETE", f"/users/{name}")
    assert r.status_code == 409 and "pp-long-job" in r.json()["detail"], r.text
    assert any("pp-long-job" in h for h in r.json()["holders"])
    r = ti(admin, "user", "delete", name)
    assert r.returncode == 1 and "pp-long-job" in r.stderr
    them.ok("POST", f"/jobs/{job['id']}/kill")
    them.wait_job(job["id"])
    assert admin.api("DELETE", f"/users/{name}").status_code == 204
    assert admin.api("GET", f"/users/{name}").status_code == 404
    with pytest.raises(PermissionError):
        hub.login(name, password)
    assert audit(admin, name)[0][0] == "user.delete"


@pytest.fixture(scope="module")
def one_admin_hub(tmp_path_factory):
    """A hub of its own: its only admin is the one it starts with, whatever other tests do to the shared hub."""
    yield from own_hub(tmp_path_factory, "pphub")


def test_the_last_admin_is_never_disabled_demoted_or_deleted(one_admin_hub):
    hub = one_admin_hub
    admin = hub.admin
    admins = [u["name"] for u in admin.ok("GET", "/users", params={"limit": "500"})["items"] if u["admin"]]
    assert admins == [admin.name], admins
    for method, path, body in (("POST", f"/users/{admin.name}/disable", None),
                               ("DELETE", f"/users/{admin.name}", None),
                               ("PATCH", f"/users/{admin.name}", {"admin": False}),
                               ("POST", "/groups/ti-admins/remove", {"users": [admin.name]})):
        r = admin.api(method, path, json=body)
        assert r.status_code == 409 and "no system admin" in r.json()["detail"], (method, path, r.text)
    assert admin.ok("GET", "/me")["name"] == admin.name
    r = ti(admin, "user", "change", admin.name, "--no-admin")
    assert r.returncode == 1 and "no system admin" in r.stderr

    # with a second admin, the first may be demoted; the second is then the last
    name, password = fresh("ppadm"), "adm-password-123"
    admin.ok("POST", "/users", json={"name": name, "password": password})
    assert admin.ok("PATCH", f"/users/{name}", json={"admin": True})["admin"] is True
    second = hub.login(name, password)
    assert second.ok("GET", "/users", params={"limit": "1"})["limit"] == 1  # the new admin's token works
    r = second.api("POST", f"/users/{name}/disable")
    assert r.status_code == 200  # admin remains an admin: not the last
    assert r.json()["revoked"]["tokens"] >= 1  # their own token too
    r = second.api("GET", "/me")
    assert r.status_code == 401
    admin.ok("POST", f"/users/{name}/enable")
    assert admin.ok("PATCH", f"/users/{name}", json={"admin": False})["admin"] is False
    assert [u["name"] for u in admin.ok("GET", "/users", params={"limit": "500"})["items"] if u["admin"]] == \
        [admin.name]


def test_csv_import_is_all_or_nothing_with_a_report_per_row(hub, tmp_path):
    admin = hub.admin
    team = fresh("ppcsv")
    admin.ok("POST", "/groups", json={"name": team})
    a, b, c = fresh("ppcsa"), fresh("ppcsb"), fresh("ppcsc")
    bad = (f"name,password,nickname,email,phone,groups\n{a},pass-a-12345,A,a@example.org,,{team}\n"
           f"{b},pass-b-12345,B,not-an-email,,\n{c},pass-c-12345,C,,123,{team};no-such-group\n")
    r = admin.api("POST", "/user-imports", json={"csv": bad})
    assert r.status_code == 400, r.text
    doc = r.json()
    assert doc["field"] == "rows[3].email" and "row 3" in doc["detail"]
    assert [(x["row"], x["status"], x["field"]) for x in doc["rows"]] == \
        [(2, "not created", None), (3, "refused", "email"), (4, "refused", "groups")]
    for n in (a, b, c):
        assert admin.api("GET", f"/users/{n}").status_code == 404  # nobody

    f = tmp_path / "people.csv"
    f.write_text(bad)
    r = ti(admin, "user", "import", str(f))
    assert r.returncode == 1 and "row 3" in r.stderr and "refused" in r.stdout and "email" in r.stdout, r
    assert admin.api("GET", f"/users/{a}").status_code == 404

    good = f"name,password,groups,email\n{a},pass-a-12345,{team},a@example.org\n\n{b},pass-b-12345,,\n"
    f.write_text(good)
    r = ti(admin, "user", "import", str(f), "--json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["created"] == 2 and [(x["row"], x["status"]) for x in report["rows"]] == [(2, "created"),
                                                                                          (4, "created")]
    assert hub.login(a, "pass-a-12345").ok("GET", "/me")["name"] == a
    assert hub.login(b, "pass-b-12345")
    assert admin.ok("GET", f"/users/{a}")["groups"] == [team]
    assert admin.ok("GET", f"/groups/{team}")["users"] == [a]
    # the same file again: every row exists now (409), nothing happens
    r = admin.api("POST", "/user-imports", json={"csv": good})
    assert r.status_code == 409 and [x["status"] for x in r.json()["rows"]] == ["refused", "refused"]
    r = admin.api("POST", "/user-imports", json={"csv": "name,secret\nx,y\n"})
    assert r.status_code == 400 and r.json()["field"] == "csv"


def test_groups_create_rename_delete_and_members_in_bulk(hub, new_user):
    admin = hub.admin
    owner, member = new_user("ppown"), new_user("ppmem")
    g = fresh("ppgrp")
    r = ti(admin, "group", "create", g, "--description", "Vision team", "--users", member.name)
    assert r.returncode == 0, r.stderr
    listed = json.loads(ti(admin, "group", "list", "--json").stdout)
    assert {"name": g, "description": "Vision team", "users": [member.name]}.items() <= \
        next(x for x in listed if x["name"] == g).items()
    r = admin.api("POST", "/groups", json={"name": g})
    assert r.status_code == 409
    r = admin.api("POST", "/groups", json={"name": "bad name!"})
    assert r.status_code == 400 and r.json()["field"] == "name"

    # members in bulk: all or nothing
    r = admin.api("POST", f"/groups/{g}/add", json={"users": [owner.name, "nobody-here-x"]})
    assert r.status_code == 404 and r.json()["field"] == "users[1]" and "nobody-here-x" in r.json()["detail"]
    assert admin.ok("GET", f"/groups/{g}")["users"] == [member.name]
    r = ti(admin, "group", "add", g, owner.name, "nobody-here-x")
    assert r.returncode == 1 and "nobody-here-x" in r.stderr
    assert sorted(admin.ok("POST", f"/groups/{g}/add", json={"users": [owner.name]})["users"]) == \
        sorted([owner.name, member.name])
    assert ti(admin, "group", "remove", g, owner.name).returncode == 0
    assert admin.ok("GET", f"/groups/{g}")["users"] == [member.name]

    # a volume shared with the group stays shared with it under its new name
    vol = owner.ok("POST", "/volumes", json={"name": fresh("ppvol"), "kind": "filesystem", "capacity_gib": 1})
    owner.ok("POST", f"/volumes/{vol['id']}/shares", json={"group": g, "mode": "ro"})
    new = fresh("ppren")
    r = ti(admin, "group", "rename", g, new)
    assert r.returncode == 0, r.stderr
    assert admin.api("GET", f"/groups/{g}").status_code == 404
    renamed = admin.ok("GET", f"/groups/{new}")
    assert (renamed["users"], renamed["description"]) == ([member.name], "Vision team")
    shares = owner.ok("GET", f"/volumes/{vol['id']}")["shares"]
    assert [(s["kind"], s["grantee"], s["mode"]) for s in shares] == [("group", new, "ro")]
    again = hub.login(member.name, member.password)  # a new token: the hub tells the new group name
    assert again.ok("GET", f"/volumes/{vol['id']}")["access"] == "ro"
    assert audit(admin, g)[0] == ("group.rename", {"to": new, "members": 1, "volume_shares": 1,
                                                   "team_templates": 0, "grants": 0})
    r = admin.api("PATCH", "/groups/ti-admins", json={"name": "ti-bosses"})
    assert r.status_code == 409

    assert admin.ok("PATCH", f"/groups/{new}", json={"description": "Vision"})["description"] == "Vision"
    assert ti(admin, "group", "delete", new).returncode == 0
    assert admin.api("GET", f"/groups/{new}").status_code == 404
    assert owner.ok("GET", f"/volumes/{vol['id']}")["shares"] == []
    assert [a for a, _ in audit(admin, new)][:2] == ["group.delete", "group.change"]
    assert member.api("GET", "/groups").status_code == 403


def _page(who, status: int = 200) -> str:
    r = who.browser.get(f"{who.hub.url}/services/ti/people", timeout=30)
    assert r.status_code == status, (r.status_code, r.text[:500])
    return r.text


def _post(who, files=None, **fields) -> str:
    """A People page form as a browser posts it: with the page's _xsrf value (and a file: multipart)."""
    token = re.search(r'name="_xsrf" value="([^"]+)"', _page(who)).group(1)
    r = who.browser.post(f"{who.hub.url}/services/ti/people", data={"_xsrf": token, **fields}, files=files,
                         allow_redirects=True, timeout=60)
    assert r.status_code == 200, (r.status_code, r.text[:500])
    return r.text


def test_the_people_page_forms(hub, new_user):
    admin = hub.admin
    name, g = fresh("pppage"), fresh("ppgpage")
    html = _post(admin, action="create", name=name, password="page-password-123", nickname="Paged",
                 email="paged@example.org", phone="", groups="")
    assert f"Created user {name}" in html and f"<td>{name}</td>" in html and "<td>Paged</td>" in html
    assert hub.login(name, "page-password-123")
    html = _post(admin, action="create", name=fresh("ppbad"), password="page-password-123", email="nope")
    assert "Not done: email must be" in html
    html = _post(admin, action="change", user=name, phone="+86 10 1234", nickname="", email="", admin="")
    assert "<td>+86 10 1234</td>" in html
    html = _post(admin, action="disable", user=name)
    assert f"Disabled {name}" in html
    with pytest.raises(PermissionError):
        hub.login(name, "page-password-123")
    assert f"Enabled {name}" in _post(admin, action="enable", user=name)
    assert "no system admin" in _post(admin, action="disable", user=admin.name)

    html = _post(admin, action="group-create", name=g, description="Paged team", users=name)
    assert f"Created group {g}" in html and "<td>Paged team</td>" in html
    other = new_user("pppgm")
    assert "nothing was changed" in _post(admin, action="group-add", group=g, users=f"{other.name} nobody-zz")
    assert f"Added {other.name}" in _post(admin, action="group-add", group=g, users=other.name)
    assert sorted(admin.ok("GET", f"/groups/{g}")["users"]) == sorted([name, other.name])
    assert f"Removed {name}" in _post(admin, action="group-remove", group=g, users=name)
    new = fresh("ppgren")
    assert f"Group {g} is now {new}" in _post(admin, action="group-change", group=g, name=new, description="")
    assert f"Deleted group {new}" in _post(admin, action="group-delete", group=new)

    # the upload answers with the report of every row
    a, b = fresh("ppupa"), fresh("ppupb")
    bad = f"name,password,phone\n{a},upload-pass-123,\n{b},short,\n".encode()
    html = _post(admin, files={"csv": ("people.csv", bad, "text/csv")}, action="import")
    assert 'id="import-rows"' in html and "row 3" in html and "<td>refused</td>" in html
    assert "<td>not created</td>" in html and admin.api("GET", f"/users/{a}").status_code == 404
    good = f"name,password\n{a},upload-pass-123\n{b},upload-pass-456\n".encode()
    html = _post(admin, files={"csv": ("people.csv", good, "text/csv")}, action="import")
    assert "Created 2 user(s)." in html and html.count("<td>created</td>") == 2
    assert hub.login(b, "upload-pass-456")
    assert f"Deleted user {b}" in _post(admin, action="delete", user=b)
    # a user without users:manage sees no page and changes nothing
    assert "Permission needed" in _page(other, 403)
