"""DEV1 in a real browser: the Jobs, Storage and Images panels of a running JupyterLab workspace."""

from __future__ import annotations

import pytest
import requests

from browserkit import screenshot, use_this_build
from ti_hub.domain import guidance
from ti_hub.domain.validation import NAME_RULE
from tihub_client import wait

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


@pytest.fixture(scope="module")
def lab(hub):
    """One user with a running workspace named 'mylab'."""
    user = hub.person("labuser")
    r = user.hub_api("POST", f"/users/{user.name}/servers/mylab", json={"plan": "cpu-small"})
    assert r.status_code in (201, 202), r.text
    user.wait_server("mylab")
    use_this_build(hub, user)  # the panels as this checkout builds them (ti_labextension/build.sh)
    yield user
    user.hub_api("DELETE", f"/users/{user.name}/servers/mylab")


def open_lab(page_for, hub, user):
    page = page_for(hub, user)
    page.goto(f"{hub.url}/user/{user.name}/mylab/lab")
    page.wait_for_selector('.jp-SideBar [data-id="ti-jobs-panel"]', timeout=90_000)
    return page


def unfold(details) -> None:
    """Open a <details> by clicking its summary, as a user would, until it is open (a click that lands while the
    panel's layout shifts, e.g. under a message that just appeared, toggles nothing)."""
    def is_open() -> bool:
        if not details.evaluate("d => d.open"):
            details.locator("summary").click()
        return details.evaluate("d => d.open")

    wait(is_open, 15, "the guide to unfold")


def open_panel(page, panel_id: str):
    page.click(f'.jp-SideBar [data-id="{panel_id}"]')
    page.wait_for_selector(f"#{panel_id}:not(.lm-mod-hidden)")
    return page.locator(f"#{panel_id}")


def test_jobs_panel_submit_watch_logs(hub, lab, page_for):
    user = lab
    page = open_lab(page_for, hub, user)
    panel = open_panel(page, "ti-jobs-panel")
    # never a blank panel: with no jobs it says so
    wait(lambda: "Loading" not in panel.inner_text(), 30, "the job list to load")
    assert "no training jobs yet" in panel.inner_text(), panel.inner_text()

    # keyboard: the New job button is a real button that Enter activates
    page.focus("#ti-new-job")
    page.keyboard.press("Enter")
    form = panel.locator("#ti-job-form")
    form.wait_for()
    form.locator("select[name=plan] option[value=cpu-small]").wait_for(state="attached")

    # DEV7: beside the kind, what it suits (the CLI's words), following the choice; the whole table folded below
    kind_hint = form.locator("#" + form.locator("select[name=kind]").get_attribute("id") + "-hint")
    suits = dict(guidance.JOB_KINDS)
    assert kind_hint.inner_text() == suits["single"]
    form.locator("select[name=kind]").select_option("distributed")
    assert kind_hint.inner_text() == suits["distributed, allreduce"]
    form.locator("select[name=strategy]").select_option("ps")
    assert kind_hint.inner_text() == suits["distributed, ps"]
    form.locator("select[name=kind]").select_option("single")
    assert kind_hint.inner_text() == suits["single"]
    guide = form.locator("#ti-kind-guide")
    unfold(guide)
    for what, text in guidance.JOB_KINDS:
        assert what in guide.inner_text() and text in guide.inner_text()
    assert "none unless ticked" in form.locator("#ti-endpoints-hint").inner_text()

    # a bad name is refused by the API and the panel says which field and why; nothing is stored
    form.locator("input[name=name]").fill("Bad Name!")
    form.locator("select[name=plan]").select_option("cpu-small")
    form.locator("textarea[name=command]").fill("echo nothing")
    form.locator("button[type=submit]").click()
    err = form.locator(".ti-message-error")
    err.wait_for()
    assert "name" in err.inner_text().lower()
    assert user.ok("GET", "/jobs?kind=single")["total"] == 0

    form.locator("input[name=name]").fill("panel-job")
    form.locator("textarea[name=command]").fill("echo hello-from-the-panel; sleep 4; echo done-from-the-panel")
    form.locator("input[name=estimated_duration]").fill("2m")
    screenshot(page, "jobs-panel-form", "#ti-jobs-panel")
    form.locator("button[type=submit]").click()

    # the detail view follows the job to Running, then Completed, with its logs streaming in
    panel.locator('#ti-job-title .ti-status[data-status="running"]').wait_for(timeout=60_000)
    panel.locator('#ti-job-title .ti-status[data-status="completed"]').wait_for(timeout=90_000)
    logs = panel.locator("#ti-job-logs")
    wait(lambda: "done-from-the-panel" in logs.inner_text(), 30, "the last log line")
    assert "hello-from-the-panel" in logs.inner_text()
    screenshot(page, "jobs-panel-detail", "#ti-jobs-panel")

    job = user.ok("GET", "/jobs/panel-job")
    assert job["status"] == "completed" and job["estimated_duration"] == 120
    assert job["command"].startswith("echo hello-from-the-panel")
    # it did not ask for TensorBoard: none is offered, and the panel says how to ask
    assert panel.locator("#ti-tensorboard-form").count() == 0
    assert "did not ask for TensorBoard" in panel.locator("#ti-tensorboard-hint").inner_text()

    # clone from the detail view makes a second job, and the list shows both
    panel.locator('button[data-action="clone"]').first.click()
    wait(lambda: user.ok("GET", "/jobs?kind=single")["total"] == 2, 30, "the clone")
    panel.locator("#ti-back").click()
    page.check("#ti-jobs-all")
    table = panel.locator("#ti-jobs-table")
    table.wait_for()
    wait(lambda: table.locator("button[data-job]").count() == 2, 30, "both jobs listed")


def test_storage_panel_create_share_browse(hub, lab, page_for):
    user = lab
    friend = hub.person("friend")
    page = open_lab(page_for, hub, user)
    panel = open_panel(page, "ti-storage-panel")
    panel.locator("#ti-storage-quota").wait_for()

    form = panel.locator("#ti-volume-form")
    form.locator("input[name=name]").fill("panel-vol")
    form.locator("select[name=kind]").select_option("filesystem")
    form.locator("input[name=capacity_gib]").fill("2")
    form.locator("button[type=submit]").click()
    panel.locator('#ti-volumes-table button[data-volume="panel-vol"]').click()
    detail = panel.locator("#ti-volume-detail")
    detail.locator("#ti-volume-holders").wait_for()
    assert "Not mounted" in detail.inner_text()
    detail.locator("#ti-volume-files .ti-message-empty").wait_for()  # an empty volume says it is empty

    share = detail.locator("#ti-share-form")
    share.locator("input[name=grantee]").fill(friend.name)
    share.locator("select[name=mode]").select_option("rw")
    share.locator("button").click()
    panel.locator(".ti-message-success").wait_for()
    detail.get_by_text(f"user {friend.name}").wait_for()  # the detail redrawn with the new share
    screenshot(page, "storage-panel", "#ti-storage-panel")
    # the friend now sees it, read-write
    theirs = [v for v in friend.ok("GET", "/volumes")["items"] if v["name"] == "panel-vol"]
    assert theirs and theirs[0]["access"] == "rw"

    # an impossible size is refused with the API's reason, shown in the panel
    size = detail.locator("input[name=capacity_gib]")
    size.fill("2000000")
    page.wait_for_timeout(11_000)  # past the panel's 10-s refresh: what the user typed must survive it
    assert size.input_value() == "2000000"
    detail.locator("button", has_text="Expand").click()
    panel.locator(".ti-form-status .ti-message-error").wait_for()
    assert user.ok("GET", "/volumes/panel-vol")["capacity_gib"] == 2

    # DEV7: beside the kind, what it suits (the CLI's words), following the choice; the whole table folded below
    kind_hint = form.locator("#" + form.locator("select[name=kind]").get_attribute("id") + "-hint")
    storage_suits = dict(guidance.STORAGE_KINDS)
    assert kind_hint.inner_text() == storage_suits["filesystem"]
    guide = form.locator("#ti-storage-guide")
    unfold(guide)
    for what, text in guidance.STORAGE_KINDS:
        assert what in guide.inner_text() and text in guide.inner_text()

    # a dataset: the form asks for its source only then, says what a source is, and the snapshot is made in
    # the background
    assert not form.locator("input[name=source]").is_visible()
    form.locator("select[name=kind]").select_option("dataset")
    assert kind_hint.inner_text() == storage_suits["dataset"]
    source_hint = form.locator("#" + form.locator("input[name=source]").get_attribute("id") + "-hint")
    assert "OWNER/NAME or id" in source_hint.inner_text() and "read-write" in source_hint.inner_text()
    form.locator("input[name=name]").fill("panel-snap")
    form.locator("input[name=capacity_gib]").fill("2")
    # without a source the API refuses it, and the panel shows its reason with the field
    form.locator("button[type=submit]").click()
    refused = panel.locator(".ti-form-status .ti-message-error")
    wait(lambda: "field: source" in refused.inner_text(), 30, "the API's refusal")
    assert user.api("GET", "/volumes/panel-snap").status_code == 404
    form.locator("input[name=source]").fill("panel-vol")
    form.locator("button[type=submit]").click()
    panel.get_by_text("Dataset panel-snap created").wait_for()
    snap = wait(lambda: (v := user.ok("GET", "/volumes/panel-snap"))["state"] != "copying" and v, 60, "the copy")
    assert snap["state"] == "ready" and snap["kind"] == "dataset" and snap["source_volume_id"] == theirs[0]["id"]


def test_images_panel_picks_image_for_a_job(hub, lab, page_for):
    user = lab
    page = open_lab(page_for, hub, user)
    panel = open_panel(page, "ti-images-panel")
    images = user.ok("GET", "/images")["items"]
    assert images, "the embedded hub ships public images"
    first = images[0]["name"]
    panel.locator("#ti-images-table").wait_for()
    screenshot(page, "images-panel", "#ti-images-panel")
    panel.locator(f'#ti-images-table button[aria-label="Use {first} for a job"]').click()
    # the Jobs panel opens with the form and that image chosen
    jobs = page.locator("#ti-jobs-panel")
    jobs.locator("#ti-job-form").wait_for()
    wait(lambda: jobs.locator("select[name=image]").input_value() == first, 20, "the image chosen")


def test_server_routes_need_a_login(hub, lab):
    """The CI check for the extension's routes: all authenticated in code, and refused without a login."""
    from ti_labextension.handlers import ROUTES, unauthenticated_routes

    assert ROUTES and unauthenticated_routes() == []
    user = lab
    base = f"{hub.url}/user/{user.name}/mylab/ti/api"
    for method in ("GET", "POST", "PATCH", "PUT", "DELETE"):
        r = requests.request(method, base + "/jobs", allow_redirects=False, timeout=10)
        assert r.status_code in (302, 401, 403), (method, r.status_code, r.text[:200])
        assert "items" not in r.text


def test_forwarding_with_the_browser_login(hub, lab, page_for):
    user = lab
    page = open_lab(page_for, hub, user)
    base = f"{hub.url}/user/{user.name}/mylab/ti/api"
    me = page.request.get(base + "/me")
    assert me.status == 200 and me.json()["name"] == user.name
    # encoded dots arrive decoded in the route's argument, and are refused before anything is forwarded
    up = page.request.get(base + "/jobs%2F%2E%2E%2F%2E%2E%2Fhub")
    assert up.status == 400 and "ti service" in up.text()
    # writes without JupyterLab's XSRF token are refused by the workspace server
    assert page.request.post(base + "/volumes", data={"name": "x"}).status == 403


def test_jobs_panel_links_ports_and_opens_tensorboard(hub, lab, page_for):
    """JOB6 from the panel: a running job's declared port is a link through the hub, and TensorBoard starts for a
    log directory of its volume; what the browser then fetches through those links is the job's."""
    import random

    user = lab
    port = random.randint(40000, 49990)
    user.ok("POST", "/volumes", json={"name": "tb-panel", "kind": "filesystem", "capacity_gib": 1})
    job = user.ok("POST", "/jobs", json={
        "name": "served", "plan": "cpu-small", "image": "python-cpu", "ports": [port], "endpoints": ["tensorboard"],
        "volumes": [{"volume": "tb-panel", "mount_path": "/mnt/out"}],
        "command": f"mkdir -p /mnt/out/tb && echo served-by-the-job > index.html && "
                   f"exec python3 -m http.server {port} --bind 127.0.0.1"})
    try:
        user.wait_job(job["id"], states=("running",))
        page = open_lab(page_for, hub, user)
        panel = open_panel(page, "ti-jobs-panel")
        panel.locator('#ti-jobs-table button[data-job="served"]').click()
        link = panel.locator(f'#ti-job-endpoints a:has-text("port {port}")')
        link.wait_for(timeout=30_000)
        href = link.get_attribute("href")
        assert href == f"/services/ti/endpoints/{job['id']}/0/{port}/"
        # following the link, the browser's hub login reaches the job's server through the ti service
        tab = page.context.new_page()
        wait(lambda: tab.goto(hub.url + href).status == 200, 30, "the job's server to answer")
        assert "served-by-the-job" in tab.content()  # the index.html the job wrote
        tab.close()

        form = panel.locator("#ti-tensorboard-form")
        form.locator("input[name=logdir]").fill("/etc")
        form.locator("button").click()
        err = form.locator(".ti-message-error")
        err.wait_for()
        assert "logdir" in err.inner_text()
        page.wait_for_timeout(2500)  # past a redraw of the detail: the form keeps what was typed
        form.locator("input[name=logdir]").fill("/mnt/out/tb")
        with page.expect_popup() as popup:
            form.locator("button").click()
        tb_url = f"/services/ti/endpoints/{job['id']}/tensorboard/"
        form.locator(f'.ti-message-success a[href^="{tb_url}"]').wait_for(timeout=60_000)
        assert popup.value.url.startswith(hub.url + tb_url)
        screenshot(page, "jobs-panel-endpoints", "#ti-jobs-panel")
    finally:
        user.api("POST", f"/jobs/{job['id']}/kill")
        user.api("DELETE", f"/jobs/{job['id']}/tensorboard")


def outside(page, box_selector: str, items) -> list[str]:
    """The items (a Locator of several) that are not wholly inside the box's visible area, with their edges."""
    box = page.locator(box_selector).bounding_box()
    for _ in range(10):
        out, redrawn = [], False
        for i in range(items.count()):
            try:
                b, text = items.nth(i).bounding_box(timeout=2000), items.nth(i).inner_text(timeout=2000)
            except Exception:  # noqa: BLE001 - the row went while measured: measure them all again
                b = text = None
            if b is None:
                # the panels redraw every 2 s: an element replaced while it is measured has no box (on a loaded
                # machine that happens); measure the new ones
                redrawn = True
                break
            if b["x"] < box["x"] - 0.5 or b["x"] + b["width"] > box["x"] + box["width"] + 0.5:
                out.append(f"{text!r} at {b} outside {box}")
        if not redrawn:
            return out
        page.wait_for_timeout(300)
    return out + ["(the panel kept redrawing while it was measured)"]


def test_panels_fit_the_default_sidebar_width(hub, lab, page_for):
    """Issue 17 item 23: at JupyterLab's default sidebar width every action of a job row and every "Use for a
    job" is on screen, history messages wrap instead of being cut, Open TensorBoard is offered only where it can
    work (a log directory in one of the job's volumes), the name hint says the real rule and checks it as it is
    typed, and the embedded platform says where the image is picked that it does not run images."""
    user = lab
    running = user.ok("POST", "/jobs", json={"name": "narrow-running", "plan": "cpu-small", "image": "python-cpu",
                                              "command": "sleep 300", "endpoints": ["tensorboard"]})
    try:
        user.wait_job(running["id"], states=("running",))
        page = open_lab(page_for, hub, user)
        panel = open_panel(page, "ti-jobs-panel")
        row_buttons = panel.locator("#ti-jobs-table button[data-action]")
        wait(lambda: row_buttons.count() >= 3, 30, "the running job's actions")  # Pause, Kill, Clone
        assert outside(page, "#jp-left-stack", row_buttons) == []
        # the detail: its history messages wrap inside the panel (a kill reason is a long sentence)
        panel.locator('#ti-jobs-table button[data-job="narrow-running"]').click()
        panel.locator("#ti-job-history").wait_for()
        assert outside(page, "#jp-left-stack", panel.locator("#ti-job-history td")) == []
        assert outside(page, "#jp-left-stack", panel.locator(".ti-toolbar button")) == []
        # asked for TensorBoard but has no volume: it cannot read a log directory of this job, so it is not offered
        assert panel.locator("#ti-tensorboard-form").count() == 0
        assert "TensorBoard reads a log directory in one of the job's volumes" in \
            panel.locator("#ti-job-endpoints").inner_text()

        panel.locator("#ti-back").click()
        panel.locator("#ti-new-job").click()
        form = panel.locator("#ti-job-form")
        form.locator("select[name=image] option").first.wait_for(state="attached")
        assert "the image you pick is recorded" in form.locator("#ti-image-note").inner_text()
        hint = form.locator("#ti-name-hint")
        assert hint.inner_text() == NAME_RULE  # the API's rule, word for word
        form.locator("input[name=name]").fill("abc")
        wait(lambda: "'abc' cannot be a name" in hint.inner_text(), 10, "the name checked as it is typed")
        assert form.locator("input[name=name]").get_attribute("aria-invalid") == "true"
        form.locator("input[name=name]").fill("good_name-1")
        wait(lambda: "cannot" not in hint.inner_text(), 10, "the hint back to the rule")

        images = open_panel(page, "ti-images-panel")
        use = images.locator("#ti-images-table button", has_text="Use for a job")
        use.first.wait_for()
        assert outside(page, "#jp-left-stack", use) == []
        assert "the image you pick is recorded" in images.locator("#ti-images-note").inner_text()
    finally:
        user.api("POST", f"/jobs/{running['id']}/kill")


def test_jobs_panel_copies_the_ssh_command(hub, lab, page_for):
    """WS3/JOB6: a job that asked for SSH shows the API's command with a Copy button that puts it on the
    clipboard; where the browser offers no clipboard the command is left selected with a line saying so."""
    user = lab
    job = user.ok("POST", "/jobs", json={"name": "ssh-me", "plan": "cpu-small", "image": "python-cpu",
                                         "endpoints": ["ssh"], "command": "true"})
    expected = user.ok("GET", "/ssh/command", params={"name": "ssh-me"})["command"]
    page = open_lab(page_for, hub, user)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=hub.url)
    panel = open_panel(page, "ti-jobs-panel")
    page.check("#ti-jobs-all")
    panel.locator('#ti-jobs-table button[data-job="ssh-me"]').click()
    field = panel.locator("#ti-ssh-command")
    field.wait_for(timeout=30_000)
    assert field.input_value() == expected and expected.startswith("ssh ")
    panel.locator("#ti-ssh-copy").click()
    wait(lambda: panel.locator("#ti-ssh-status").inner_text() == "copied", 10, "the copied line")
    assert page.evaluate("navigator.clipboard.readText()") == expected
    page.wait_for_timeout(2500)  # past a redraw of the detail: the box and its line stay
    assert panel.locator("#ti-ssh-status").inner_text() == "copied"
    # no clipboard (as on an http address other than localhost): the command is selected to copy by hand
    page.evaluate("Object.defineProperty(navigator, 'clipboard', {value: undefined, configurable: true})")
    panel.locator("#ti-ssh-copy").click()
    wait(lambda: "Ctrl+C" in panel.locator("#ti-ssh-status").inner_text(), 10, "the fallback line")
    assert page.evaluate("window.getSelection().toString() || document.activeElement.value.substring("
                         "document.activeElement.selectionStart, document.activeElement.selectionEnd)") == expected
    user.wait_job(job["id"])
