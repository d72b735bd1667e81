"""Bad input over HTTP gets a clear 4xx naming the field and the rule, never a 500, and stores nothing; a token
in a URL never reaches the log; shares go to existing hub users and groups only (docs/security.md "Input")."""

from __future__ import annotations

import requests
import pytest

pytestmark = pytest.mark.e2e


def job(name: str, **kw) -> dict:
    return {"name": name, "plan": "cpu-small", "image": "python-cpu", "command": "true", **kw}


def refused(r: requests.Response, field: str | None, status: int = 400) -> dict:
    assert r.status_code == status, (r.status_code, r.text)
    doc = r.json()
    assert doc["field"] == field and doc["detail"], doc
    assert r.headers["Content-Type"].startswith("application/json")
    return doc


def raw(u, method: str, path: str, data: bytes) -> requests.Response:
    return u.api(method, path, data=data, headers={"Content-Type": "application/json"})


def test_ids_and_numbers_in_urls(hub, new_user):
    u = new_user("badurl")
    admin = hub.admin
    j = u.ok("POST", "/jobs", json=job("url-numbers"))
    refused(u.api("GET", "/jobs/%C2%B2"), "id")  # '²'.isdigit() is true; int('²') was a 500
    refused(u.api("GET", "/jobs/%D9%A3"), "id")  # an Arabic-Indic 3: not an id either
    # digits past 2^63 (an overflow in the database, once) or 0 name no job: the document allows them, so 404
    for ref in ("99999999999999999999", "9223372036854775808", "0", "00"):
        assert "an id is a whole number" in refused(u.api("GET", f"/jobs/{ref}"), "id", 404)["detail"]
    refused(admin.api("PATCH", "/plans/9223372036854775808", json={"cpu": 2}), "id")
    refused(admin.api("DELETE", "/images/%C2%B2"), "id")
    refused(u.api("DELETE", f"/volumes/1/shares/{2**64}"), "share_id")
    refused(u.api("GET", "/jobs", params={"limit": "²"}), "limit")
    refused(u.api("GET", "/jobs", params={"offset": str(2**64)}), "offset")
    refused(u.api("GET", f"/jobs/{j['id']}/logs", params={"offset": "9" * 30}), "offset")  # was an OverflowError
    refused(u.api("GET", f"/jobs/{j['id']}/logs", params={"instance": "²"}), "instance")
    refused(u.api("GET", "/ssh/command", params={"name": "my-ws", "instance": "²"}), "instance")
    refused(u.api("GET", "/jobs", params={"statuz": "queued"}), "statuz")  # a typo is refused, not ignored
    refused(u.api("GET", "/me", params={"x": "1"}), "x")
    refused(u.api("GET", "/jobs", params={"all": "maybe"}), "all")
    assert u.api("GET", "/me", params={"token": u.token}).status_code == 200  # the hub's own ?token= is fine


def test_bodies_that_json_reads_loosely_are_refused(hub, new_user):
    u = new_user("badbody")
    good = b'{"name": "dup-keys", "plan": "cpu-small", "image": "python-cpu", "command": "true"'
    refused(raw(u, "POST", "/jobs", good + b', "plan": "demo-gpu-1"}'), "plan")  # a key given twice
    refused(raw(u, "POST", "/jobs", b"[" * 50_000 + b"]" * 50_000), None)  # RecursionError: was a 500
    refused(raw(u, "POST", "/jobs", b'{"name": "deep-one", "env": ' + b'{"A": ' * 40 + b'"x"' + b"}" * 41), None)
    refused(raw(u, "POST", "/jobs", good + b', "estimated_duration": 1e999}'), None)
    refused(raw(u, "POST", "/jobs", good + b', "estimated_duration": NaN}'), None)
    refused(u.api("POST", "/jobs", json=job("huge-plan", plan=2**64)), "plan")  # was a 500
    refused(u.api("POST", "/jobs", json=job("huge-volume", volumes=[{"volume": 2**70}])), "volumes[0].volume")
    refused(u.api("POST", "/jobs", json=job("newline\n")), "name")
    refused(u.api("POST", "/jobs", json=job("sneaky-field", sneaky=1)), "sneaky")
    refused(u.api("POST", "/jobs", json={"plan": "cpu-small"}), "name")
    assert u.ok("GET", "/jobs")["total"] == 0  # nothing stored


def test_templates_are_checked_as_submissions(hub, new_user):
    u = new_user("badtpl")
    refused(u.api("POST", "/templates", json={"name": "no-plan", "spec": {"plan": "no-such-plan"}}), "spec.plan", 404)
    refused(u.api("POST", "/templates", json={"name": "neg-workers", "spec": {"kind": "distributed", "workers": -5}}),
            "spec.workers")
    refused(u.api("POST", "/templates", json={"name": "big-workers", "spec": {"kind": "distributed",
                                                                               "workers": 1000}}), "spec.workers")
    refused(u.api("POST", "/templates", json={"name": "bad-image", "spec": {"image": "Not An Image!"}}), "spec.image")
    assert u.ok("GET", "/templates")["total"] == 0
    u.ok("POST", "/templates", json={"name": "good-tpl", "spec": {"plan": "cpu-small", "command": "true"}})


def test_volumes_are_shared_with_existing_users_and_groups_only(hub, new_user):
    owner, friend = new_user("shareown"), new_user("sharefriend")
    vol = owner.ok("POST", "/volumes", json={"name": "shared-data", "kind": "filesystem", "capacity_gib": 1})
    path = f"/volumes/{vol['id']}/shares"
    ghost = "ghostuser01"  # nobody has this name yet: the share would go to whoever signs up with it
    doc = refused(owner.api("POST", path, json={"user": ghost}), "user", 404)
    assert "no user named" in doc["detail"]
    refused(owner.api("POST", path, json={"group": "no-such-group"}), "group", 404)
    assert owner.ok("GET", f"/volumes/{vol['id']}")["shares"] == []
    hub.signup(ghost, "ghost-pass-12345")
    hub.admin.authorize(ghost)
    late = hub.login(ghost, "ghost-pass-12345")
    assert late.api("GET", f"/volumes/{vol['id']}").status_code == 404  # never shared with them
    out = owner.ok("POST", path, json={"user": friend.name, "mode": "ro"})
    assert [(s["grantee"], s["mode"]) for s in out["shares"]] == [(friend.name, "ro")]
    assert friend.ok("GET", f"/volumes/{vol['id']}")["access"] == "ro"
    # not one's own volume: refused before the hub is asked, so nobody learns which names exist
    refused(friend.api("POST", path, json={"user": "nobody-at-all"}), "id", 403)  # shared with them: visible
    refused(new_user("sharestranger").api("POST", path, json={"user": "nobody-at-all"}), "id", 404)


def test_tokens_in_urls_never_reach_the_log(hub, new_user):
    u = new_user("logtoken")
    marker = "/services/ti/api/v1/queue/panel"
    # JupyterHub reads ?token= for WebSocket handshakes only: answered 401 otherwise, and logged either way
    assert requests.get(hub.url + marker, params={"token": u.token}, timeout=30).status_code == 401
    r = requests.get(hub.url + marker, params={"limit": "1", "token": u.token}, timeout=30,
                     headers={"Sec-Fetch-Mode": "websocket"})
    assert r.status_code == 400 and r.json()["field"] == "limit"  # authenticated by the URL's token
    log = (hub.data_dir.parent / f"{hub.data_dir.name}.log").read_text(errors="replace")
    assert f"{marker}?token=[secret]" in log and f"{marker}?limit=1&token=[secret]" in log
    assert u.token not in log
