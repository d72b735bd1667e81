"""The hub's TiHub pages in a real browser: an admin pins a queued job and everyone sees the new order;
a user without admin scopes gets no admin page and a 403 from its API (SPEC Q5, ADM2, ACC5)."""

from __future__ import annotations

import pytest
from browserkit import screenshot
from tihub_client import wait
from hubproc import own_hub

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

GPUS = 2
@pytest.fixture(scope="module")
def qhub(tmp_path_factory):
    # a hub of its own: these tests fill its devices, which would hold up the shared hub's tests
    yield from own_hub(tmp_path_factory, "qhub", f"c.LocalBackend.devices = {{'demo-gpu': {GPUS}}}\n"
                       "c.TiService.scheduler_interval = 0.3\n"
                       "c.TiService.usage_history_interval = 0.5\n")


def gpu_job(name: str) -> dict:
    return {"name": name, "plan": "demo-gpu-1", "image": "python-cpu", "command": "sleep 300"}


def queue_order(page) -> list[int]:
    """Job ids of the queue table, top to bottom (the table's 'id' column)."""
    page.wait_for_selector("#queue-table")
    headers = [h.strip() for h in page.locator("#queue-table th").all_inner_texts()]
    col = headers.index("id")
    return [int(r.locator("td").nth(col).inner_text()) for r in page.locator("#queue-table tr:has(td)").all()]


def test_admin_pins_a_queued_job_and_everyone_sees_the_order(qhub, page_for):
    other = qhub.person("blocker")
    user = qhub.person("waiter")
    blockers = [other.ok("POST", "/jobs", json=gpu_job(f"block{i}"))["id"] for i in range(GPUS)]
    for b in blockers:
        other.wait_job(b, states=("running",))
    first = user.ok("POST", "/jobs", json=gpu_job("first"))["id"]
    second = user.ok("POST", "/jobs", json=gpu_job("second"))["id"]

    def positions():
        q = [user.ok("GET", f"/jobs/{i}")["queue"] or {} for i in (first, second)]
        return None if any(x.get("provisional") for x in q) else [x.get("position") for x in q]

    try:
        wait(lambda: positions() == [1, 2], 30, "queue positions written")
        theirs = page_for(qhub, user)
        theirs.goto(qhub.url + "/services/ti/queue")
        assert queue_order(theirs)[:2] == [first, second]
        assert theirs.locator(f'form[aria-label="pin job {second}"]').count() == 0  # not theirs to pin

        admin = page_for(qhub, qhub.admin)
        admin.goto(qhub.url + "/services/ti/queue")
        assert queue_order(admin)[:2] == [first, second]
        admin.locator(f'form[aria-label="pin job {second}"] button').click()
        admin.wait_for_selector(f"text=Job {second} pinned")
        wait(lambda: positions() == [2, 1], 30, "the pinned job to go first")
        admin.goto(qhub.url + "/services/ti/queue")
        assert queue_order(admin)[:2] == [second, first]
        screenshot(admin, "hub-queue-page")
        # everyone sees the new order: the owner's page, reloaded
        theirs.reload()
        assert queue_order(theirs)[:2] == [second, first]
        admin.goto(qhub.url + "/services/ti/cluster")
        admin.wait_for_selector("#cluster-pools")
        screenshot(admin, "hub-cluster-page")
    finally:
        for job_id, who in [(first, user), (second, user), *[(b, other) for b in blockers]]:
            who.api("POST", f"/jobs/{job_id}/kill")


def test_user_without_admin_scopes_gets_no_admin_page(qhub, page_for):
    user = qhub.person("plain")
    page = page_for(qhub, user)
    page.goto(qhub.url + "/services/ti/queue")
    nav = page.locator("nav").first.inner_text()
    assert "Quotas" not in nav and "People" not in nav
    for name in ("quotas", "people"):
        resp = page.goto(f"{qhub.url}/services/ti/{name}")
        assert resp.status == 403
        assert "custom:ti:users:manage" in page.inner_text("body")  # says which permission is missing
    assert user.api("GET", "/quotas").status_code == 403
    assert user.api("PUT", "/quotas", json={"user": user.name, "kind": "single", "device_type": "demo-gpu",
                                             "devices": 4, "cpu": 8, "memory_mib": 8192}).status_code == 403
    # the hub's own menu offers the pages they may use, not the admin ones
    page.goto(qhub.url + "/hub/home")
    body = page.content()
    assert "/services/ti/queue" in body and "/services/ti/quotas" not in body


def test_spawn_form_says_a_bad_name_before_start(qhub, page_for):
    """WS1 as a newcomer meets it: the name is checked as it is typed on the home page (issue 31: one rule,
    JupyterHub's and TiHub's together), Add creates the server under the name as typed, and the hub refuses a bad
    name in plain words before it stores anything; the selects look like selects; Volumes is there with no volume
    yet; the embedded platform says that it does not run the image picked."""
    user = qhub.person("spawnform")
    page = page_for(qhub, user)
    page.goto(qhub.url + "/hub/home")
    box, add = page.locator(".new-server-name"), page.locator(".new-server-btn")
    error = page.locator("#ti-server-name-error")
    for bad in ("abc", "dev_box", "Dev-Box"):
        box.fill(bad)
        assert f"'{bad}' cannot name a workspace: workspace names are 4-30 characters" in error.inner_text()
        assert add.is_disabled()
        box.press("Enter")  # goes nowhere either
    box.fill("my-desk")
    assert error.inner_text() == "" and add.is_enabled()
    with page.expect_navigation():
        add.click()
    # the name as typed (the hub's own button would have made it my-desk-HASH)
    assert page.locator('tr[data-server-name="my-desk"]').count() == 1

    page.goto(f"{qhub.url}/hub/spawn/{user.name}/my-desk")
    form = page.locator("#spawn_form")
    assert form.locator("#ti-ws-name").inner_text() == "Workspace name: my-desk"
    assert form.locator("#ti-name-error").count() == 0 and form.locator("[type=submit]").is_enabled()
    assert form.locator("label[for=ti-desc]").inner_text() == "Description"
    for select in ("#ti-plan", "#ti-image"):  # drawn as selects (Bootstrap's arrow), not as text boxes
        assert "url(" in form.locator(select).evaluate("e => getComputedStyle(e).backgroundImage"), select
    assert "the image you pick is recorded" in form.locator("#ti-image-note").inner_text()
    empty = form.locator("#ti-volumes-empty")
    assert "ti volume create" in empty.inner_text() and "Storage panel" in empty.inner_text()
    # a bad name in the address is refused in the same plain words, not "HTTP 400: ... (...)", and stored nowhere
    resp = page.goto(f"{qhub.url}/hub/spawn/{user.name}/abc")
    shown = page.inner_text("body")
    assert resp.status == 400 and "'abc' cannot name a workspace" in shown and "HTTP 400" not in shown, shown
    servers = user.hub_api("GET", f"/users/{user.name}?include_stopped_servers=1").json()["servers"]
    assert sorted(n for n in servers if n) == ["my-desk"]
    user.hub_api("DELETE", f"/users/{user.name}/servers/my-desk", json={"remove": True})


def test_home_page_copies_a_workspace_ssh_command(qhub, page_for):
    """WS3: each workspace row of the hub's home page copies the command `ti ssh-command NAME` prints; without a
    clipboard the command is shown selected."""
    user = qhub.person("homessh")
    r = user.hub_api("POST", f"/users/{user.name}/servers/ssh-desk", json={"plan": "cpu-small"})
    assert r.status_code in (201, 202), r.text
    user.wait_server("ssh-desk")
    try:
        expected = user.ok("GET", "/ssh/command?name=ssh-desk")["command"]
        page = page_for(qhub, user)
        page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        page.goto(qhub.url + "/hub/home")
        button = page.locator('tr[data-server-name="ssh-desk"] .ti-copy-ssh')
        assert button.get_attribute("data-command") == expected
        button.click()
        page.wait_for_selector('tr[data-server-name="ssh-desk"] .ti-copy-ssh-said:text("copied")')
        assert page.evaluate("navigator.clipboard.readText()") == expected
        page.evaluate("Object.defineProperty(navigator, 'clipboard', {value: undefined})")
        button.click()
        field = page.locator('tr[data-server-name="ssh-desk"] .ti-copy-ssh-field')
        assert field.input_value() == expected
        assert page.evaluate("document.activeElement.selectionEnd - document.activeElement.selectionStart") \
            == len(expected)
    finally:
        user.hub_api("DELETE", f"/users/{user.name}/servers/ssh-desk", json={"remove": True})
