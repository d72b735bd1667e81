"""The audit log (ADM1): operators' changes are recorded with who, what and when; only admins read it."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.e2e


def test_operators_changes_are_recorded_and_only_admins_read_them(hub, new_user):
    admin = hub.admin
    admin.ok("POST", "/images", json={"name": "audit-img", "address": "example.org/audit:1"})
    admin.ok("PUT", "/quotas", json={"user": "audit-someone", "kind": "dataset", "capacity_gib": 7})
    img = next(i for i in admin.ok("GET", "/images?limit=500")["items"] if i["name"] == "audit-img")
    admin.api("DELETE", f"/images/{img['id']}")

    log = admin.ok("GET", "/audit", params={"target": "audit-img"})
    assert [(e["actor"], e["action"]) for e in log["items"]] == [(admin.name, "image.delete"),
                                                                  (admin.name, "image.add")]
    assert log["items"][0]["detail"] == {"address": "example.org/audit:1"} and log["items"][0]["at"].endswith("Z")
    quota = admin.ok("GET", "/audit", params={"action": "quota", "target": "audit-someone/dataset"})["items"]
    assert quota and quota[0]["detail"]["capacity_gib"] == 7
    # an object filter matches whole objects only: "imag" is not "image"
    assert admin.ok("GET", "/audit", params={"action": "imag", "target": "audit-img"})["total"] == 0

    cli = admin.ti("admin", "audit", "--target", "audit-img", "--json")
    assert cli.returncode == 0, cli.stderr
    assert [e["action"] for e in json.loads(cli.stdout)] == ["image.delete", "image.add"]
    text = admin.ti("admin", "audit", "--action", "image.add", "--target", "audit-img")
    assert text.returncode == 0 and "image.add" in text.stdout and admin.name in text.stdout, text.stdout

    u = new_user("auditor")
    r = u.api("GET", "/audit")
    assert r.status_code == 403 and "custom:ti:users:manage" in r.json()["detail"]
    refused = u.ti("admin", "audit")
    assert refused.returncode == 1 and "users:manage" in refused.stderr
    # a refused change leaves no entry
    assert u.api("POST", "/images", json={"name": "audit-sneak", "address": "example.org/x:1"}).status_code == 403
    assert admin.ok("GET", "/audit", params={"target": "audit-sneak"})["total"] == 0
