"""The Roles page in Chromium (issue 18, ACC5): an admin composes a role without "submit", gives it to a user,
and that user's job submission and workspace start are refused at once; taking it back restores them."""

from __future__ import annotations

import time

import pytest
from browserkit import screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

SUBMIT = "custom:ti:jobs:submit"



def notice(page) -> str:
    return page.locator(".notice").first.inner_text()


def test_a_role_without_submit_made_on_the_page_counts_at_once(hub, page_for):
    admin, user = hub.admin, hub.person("rolepage")
    role = f"no-submit-{int(time.time()) % 100000}"
    page = page_for(hub, admin)
    page.goto(hub.url + "/services/ti/roles")
    assert page.locator("#nav-roles").count() == 1
    form = page.locator("#role-create")
    form.locator("input[name=name]").fill(role)
    form.locator("input[name=description]").fill("watch, never run")
    # the form starts from the preset User role's permissions: take submit away
    box = form.locator(f"input[name=permissions][value='{SUBMIT}']")
    assert box.is_checked()
    box.uncheck()
    form.locator("button[type=submit]").click()
    assert notice(page) == f"Role {role} created."
    row = page.locator("#roles-table tr", has_text=role).inner_text()
    assert "vc:view" in row and "jobs:submit" not in row and "nobody" in row

    grant = page.locator("#grant-form")
    grant.locator("select[name=role]").select_option(role)
    grant.locator("input[name=users]").fill(user.name)
    grant.locator("button[type=submit]").click()
    assert notice(page) == f"Role {role} given to user {user.name}."
    assert f"user {user.name}" in page.locator("#roles-table tr", has_text=role).inner_text()
    screenshot(page, "roles-page")

    # at once, without a restart: no job, no workspace
    r = user.api("POST", "/jobs", json={"name": "page-refused", "plan": "cpu-small", "image": "python-cpu",
                                        "command": "true"})
    assert r.status_code == 403 and SUBMIT in r.json()["detail"], r.text
    r = user.spawn("ws-page")
    assert r.status_code == 403 and SUBMIT in r.json()["message"], r.text
    assert user.ok("GET", "/me")["roles"] == [role]

    # a bad grant names its field and stores nothing
    grant = page.locator("#grant-form")
    grant.locator("select[name=role]").select_option(role)
    grant.locator("input[name=users]").fill("nobody-by-that-name")
    grant.locator("button[type=submit]").click()
    assert "Not done" in notice(page) and "grants[0].user" in notice(page)

    # taken back on the page: the user submits again
    page.locator(f"#grants-{role} button", has_text="Remove").click()
    assert notice(page) == f"Role {role} removed from user {user.name}."
    assert user.ok("POST", "/jobs", json={"name": "page-allowed", "plan": "cpu-small", "image": "python-cpu",
                                          "command": "true"})["owner"] == user.name
    entries = [e["action"] for e in admin.ok("GET", "/audit", params={"action": "grant",
                                                                       "target": f"user {user.name}"})["items"]]
    assert entries == ["grant.remove", "grant.add"]
