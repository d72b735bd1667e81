"""The People page in a real browser (SPEC ACC3-4): an admin creates a group, adds a user to it and creates a
user from a CSV upload, with the page's own forms in Chromium."""

from __future__ import annotations

import pytest
from browserkit import screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def test_admin_creates_a_group_and_adds_a_user_on_the_people_page(hub, page_for, tmp_path):
    member = hub.person("brmember")
    page = page_for(hub, hub.admin)
    page.goto(hub.url + "/services/ti/people")
    page.fill("#group-form-name", "br-team")
    page.fill("#group-form-description", "Browser team")
    page.click("#group-form button[type=submit]")
    page.wait_for_selector("text=Created group br-team")
    row = page.locator("#people-groups tr", has=page.locator("td", has_text="br-team")).first
    assert "Browser team" in row.inner_text()

    page.select_option("#members-form-group", "br-team")
    page.fill("#members-form-users", member.name)
    page.select_option("#members-form-action", "group-add")
    page.click("#members-form button[type=submit]")
    page.wait_for_selector(f"text=Added {member.name} to group br-team")
    assert hub.admin.ok("GET", "/groups/br-team")["users"] == [member.name]
    user_row = page.locator("#people-users tr", has=page.locator("td", has_text=member.name)).first
    assert "br-team" in user_row.inner_text()

    csv = tmp_path / "people.csv"
    csv.write_text("name,password,nickname,groups\nbr-upload,upload-pass-123,Uploaded,br-team\n")
    page.set_input_files("#import-form-csv", str(csv))
    page.click("#import-form button[type=submit]")
    page.wait_for_selector("#import-rows")
    assert "Created 1 user(s)." in page.inner_text("main")
    screenshot(page, "people-page")
    assert hub.login("br-upload", "upload-pass-123").ok("GET", "/me")["name"] == "br-upload"
    assert sorted(hub.admin.ok("GET", "/groups/br-team")["users"]) == sorted([member.name, "br-upload"])
