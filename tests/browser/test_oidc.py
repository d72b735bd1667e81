"""ACC1-2 in a real browser against a real OpenID Connect provider (tests/oidc/server.mjs, the certified
oidc-provider package on Node): an account that logs in through the provider waits for an admin's approval,
the admin approves one account and refuses another at /hub/authorize, and taking an approval back locks the
account out (its browser session, its tokens, its running workspace)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests
from browserkit import screenshot
from hubproc import free_port, start_hub, stop_hub, terminate_group
from tihub_client import Session, wait

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

OIDC_DIR = Path(__file__).resolve().parents[1] / "oidc"
CLIENT_ID = "tihub-test"
ACCOUNTS = {name: {"password": f"{name}-idp-password", "email": f"{name}@example.org"}
            for name in ("admin", "ann", "bob")}


def install_provider() -> str:
    """node, with tests/oidc's packages installed (cached by tests/oidc/install.sh, which scripts/test runs)."""
    node = shutil.which("node")
    if not node or not shutil.which("npm"):
        pytest.fail("the OAuth login tests need Node.js and npm: `apt-get install nodejs npm` (scripts/test does)")
    r = subprocess.run(["bash", str(OIDC_DIR / "install.sh")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"tests/oidc/install.sh failed:\n{r.stdout}\n{r.stderr}"
    return node


def start_provider(node: str, port: int, redirect_uri: str, secret: str, log: Path) -> subprocess.Popen:
    env = dict(os.environ, OIDC_PORT=str(port), OIDC_CLIENT_ID=CLIENT_ID, OIDC_CLIENT_SECRET=secret,
               OIDC_REDIRECT_URI=redirect_uri, OIDC_ACCOUNTS=json.dumps(ACCOUNTS))
    out = open(log, "wb")
    proc = subprocess.Popen([node, "server.mjs"], cwd=OIDC_DIR, env=env, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the OIDC provider exited with {proc.returncode}: {log.read_text()}")
        try:
            if requests.get(f"http://127.0.0.1:{port}/.well-known/openid-configuration", timeout=2).ok:
                return proc
        except requests.RequestException:
            pass
        time.sleep(0.2)
    terminate_group(proc, grace=5)
    raise RuntimeError(f"the OIDC provider did not answer: {log.read_text()}")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A hub whose logins go through the provider, configured as docs/admin-guide.md says."""
    node = install_provider()
    base = tmp_path_factory.mktemp("oidc")
    data = base / "data"
    data.mkdir()
    idp_port, hub_port = free_port(), free_port()
    issuer, hub_url = f"http://127.0.0.1:{idp_port}", f"http://127.0.0.1:{hub_port}"
    secret = secrets.token_hex(16)
    config = base / "jupyterhub_config.py"
    config.write_text(
        "from ti_hub.hub.config import configure\nconfigure(c)\n"
        'c.JupyterHub.authenticator_class = "ti_hub.hub.oauth.TiOIDCAuthenticator"\n'
        f'c.TiOIDCAuthenticator.oidc_issuer = "{issuer}"\n'
        f'c.OAuthenticator.client_id = "{CLIENT_ID}"\n'
        f'c.OAuthenticator.client_secret = "{secret}"\n'
        f'c.OAuthenticator.oauth_callback_url = "{hub_url}/hub/oauth_callback"\n')
    # the hub first: it reads the provider's discovery document at the first login, not at start
    proc, hub, _ports = start_hub(data, config=str(config), port=hub_port)
    idp = None
    try:
        idp = start_provider(node, idp_port, f"{hub_url}/hub/oauth_callback", secret, base / "oidc.log")
        hub.issuer = issuer
        yield hub
    finally:
        if idp is not None:
            terminate_group(idp, grace=5)
        stop_hub(proc)
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture
def person(browser):
    """A fresh browser (cookies of its own) for one person."""
    contexts = []

    def make():
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        ctx.set_default_timeout(30_000)
        contexts.append(ctx)
        return ctx.new_page()

    yield make
    for ctx in contexts:
        ctx.close()


def log_in(page, hub, name: str | None = None) -> None:
    """The hub's login page -> the provider (its form, unless this browser is still signed in there) -> back."""
    page.goto(hub.url + "/hub/login")
    page.get_by_role("button", name="Sign in with OpenID Connect").click()
    if name:
        page.wait_for_url(hub.issuer + "/interaction/**")
        page.fill("input[name=login]", name)
        page.fill("input[name=password]", ACCOUNTS[name]["password"])
        page.click("button[type=submit]")
    page.wait_for_url(hub.url + "/hub/**")
    page.wait_for_load_state()


def waiting_heading(page) -> str:
    page.wait_for_selector("#ti-approval-wait h1")
    return page.locator("#ti-approval-wait h1").inner_text()


def xsrf_of(page, hub) -> str:
    """The hub's XSRF value for this browser (its _xsrf cookie), as its pages put in forms and headers."""
    return next(c["value"] for c in page.context.cookies(hub.url + "/hub/") if c["name"] == "_xsrf")


def token_of(page, hub, name: str) -> Session:
    """An API token made from the browser's hub login, as a person does on /hub/token."""
    r = page.context.request.post(f"{hub.url}/hub/api/users/{name}/tokens", data={"note": "oidc test"},
                                  headers={"X-XSRFToken": xsrf_of(page, hub)})
    assert r.ok, r.text()
    return Session(hub, name, r.json()["token"], requests.Session())


def act(page, hub, verb: str, name: str) -> str:
    """Press a button of /hub/authorize; the page's message."""
    page.goto(hub.url + "/hub/authorize")
    page.locator(f'form[aria-label="{verb} {name}"] button').click()
    page.wait_for_selector("#ti-authorize-message")
    return page.locator("#ti-authorize-message").inner_text()


def test_oauth_accounts_wait_for_approval_and_lose_it_when_taken_back(site, person):
    hub = site
    # a new account: provider login, then "waiting for approval", not the hub
    ann = person()
    log_in(ann, hub, "ann")
    assert waiting_heading(ann) == "Waiting for approval"
    assert "ann" in ann.locator("#ti-approval-wait").inner_text()
    screenshot(ann, "hub-oauth-waiting")
    bob = person()
    log_in(bob, hub, "bob")
    assert waiting_heading(bob) == "Waiting for approval"

    # the admin (admin_users) is approved at once and sees both requests
    admin = person()
    log_in(admin, hub, "admin")
    assert admin.url == hub.url + "/hub/home"
    admin_api = token_of(admin, hub, "admin")
    admin.goto(hub.url + "/hub/authorize")
    waiting = admin.locator("#ti-waiting")
    assert waiting.locator('tr[data-account="ann"] td').all_inner_texts()[:3] == ["ann", "ann@example.org", "new"]
    assert waiting.locator('tr[data-account="bob"]').count() == 1
    assert "admin_users" in admin.locator('#ti-approved tr[data-account="admin"]').inner_text()
    screenshot(admin, "hub-oauth-authorize")
    assert "ann is approved" in act(admin, hub, "approve", "ann")
    assert "refused" in act(admin, hub, "refuse", "bob")
    assert admin.locator('#ti-approved tr[data-account="ann"]').count() == 1

    # ann logs in again (still signed in at the provider: no form) and reaches the hub's home
    log_in(ann, hub)
    assert ann.url == hub.url + "/hub/home"
    ann_api = token_of(ann, hub, "ann")
    assert ann_api.hub_api("GET", "/user").json()["name"] == "ann"
    # ... and starts a workspace
    r = ann_api.hub_api("POST", "/users/ann/servers/dev-box", json={"plan": "demo-gpu-1"})
    assert r.status_code in (201, 202), r.text
    ann_api.wait_server("dev-box")

    # bob, refused, never gets in: his next login is a new request, and the hub has no user bob
    log_in(bob, hub)
    assert waiting_heading(bob) == "Waiting for approval"
    assert admin_api.hub_api("GET", "/users/bob").status_code == 404

    # the admin takes ann's approval back: her session, her token and her workspace end at once
    message = act(admin, hub, "take-back", "ann")
    assert "taken back" in message and "dev-box" in message, message
    wait(lambda: admin_api.hub_api("GET", "/users/ann").json()["servers"] == {}, 60, "ann's workspace to stop")
    assert ann_api.hub_api("GET", "/user").status_code == 403
    ann.goto(hub.url + "/hub/home")
    assert "/hub/login" in ann.url
    log_in(ann, hub)
    assert waiting_heading(ann) == "Your access was taken back"
    admin.goto(hub.url + "/hub/authorize")
    row = admin.locator('#ti-waiting tr[data-account="ann"]')
    assert "approval taken back" in row.inner_text()
    assert row.locator('form[aria-label="refuse ann"]').count() == 0  # she had access: nothing to refuse
    # an admin cannot take their own approval back, nor an admin_users one's
    r = admin.context.request.post(hub.url + "/hub/authorize", form={
        "name": "admin", "action": "take-back", "_xsrf": xsrf_of(admin, hub)})
    assert r.status == 409 and "admin_users" in r.text()


def test_approval_changes_need_an_admin_and_the_xsrf_value(site, person):
    hub = site
    bob = person()
    log_in(bob, hub, "bob")  # waiting (a new request, or again after the first test refused him)
    assert waiting_heading(bob) == "Waiting for approval"
    # no hub login: sent to log in
    r = requests.get(hub.url + "/hub/authorize", allow_redirects=False, timeout=10)
    assert r.status_code == 302 and "/hub/login" in r.headers["Location"]
    # an admin's browser POST without the page's _xsrf value (another site's form) changes nothing
    admin = person()
    log_in(admin, hub, "admin")
    r = admin.context.request.post(hub.url + "/hub/authorize", form={"name": "bob", "action": "approve"})
    assert r.status == 403
    admin.goto(hub.url + "/hub/authorize")
    assert admin.locator('#ti-waiting tr[data-account="bob"]').count() == 1
    # an approved account without admin:users sees no page and changes nothing
    assert "bob is approved" in act(admin, hub, "approve", "bob")
    log_in(bob, hub)
    assert bob.url == hub.url + "/hub/home"
    assert bob.goto(hub.url + "/hub/authorize").status == 403
    r = bob.context.request.post(hub.url + "/hub/authorize", form={
        "name": "bob", "action": "take-back", "_xsrf": xsrf_of(bob, hub)})
    assert r.status == 403
    admin.goto(hub.url + "/hub/authorize")
    assert admin.locator('#ti-approved tr[data-account="bob"]').count() == 1
