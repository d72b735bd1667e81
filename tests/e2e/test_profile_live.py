"""A user's own profile (issue 31): GET/PATCH /me, the email verified by a link mailed through a real SMTP server
(aiosmtpd) and opened signed in as its user, the account page's Profile section, and `ti account show|set` with
every example of its help run as written. Without SMTP (the shared hub) the answer and the page say the email
cannot be verified there."""

from __future__ import annotations

import email
import json
import re
import shlex

import pytest
import requests
from hubproc import own_hub
from mailkit import smtp_server
from tihub_client import wait

pytestmark = pytest.mark.e2e

LINK = re.compile(r"https?://\S+/services/ti/account/verify-email\?token=[A-Za-z0-9_.-]+")


@pytest.fixture(scope="module")
def smtp():
    with smtp_server() as (ctl, inbox):
        yield ctl, inbox


@pytest.fixture(scope="module")
def mhub(tmp_path_factory, smtp):
    ctl, _ = smtp
    yield from own_hub(tmp_path_factory, "profile", (
        f"c.Notifier.smtp_host = '127.0.0.1'\nc.Notifier.smtp_port = {ctl.port}\nc.Notifier.smtp_tls = 'none'\n"
        "c.Notifier.sender = 'TiHub <tihub@example.org>'\nc.Notifier.email_link_interval = 0\n"
        "c.TiService.check_responses = True\n"))


def link_in(msg: email.message.Message, hub) -> str:
    text = msg.get_payload(decode=True).decode()
    url = LINK.search(text).group(0)
    # the hub's public address as ti-hub start set it; the test reaches the same hub at hub.url
    return hub.url + url[url.index("/services/ti/"):]


def test_a_user_sets_their_email_and_verifies_it_by_the_mailed_link(mhub, smtp):
    _, inbox = smtp
    u, other = mhub.person("prof"), mhub.person("snoop")
    me = u.ok("GET", "/me")
    assert me["name"] == u.name and {k: me[k] for k in ("nickname", "email", "phone", "email_verified")} == \
        {"nickname": "", "email": "", "phone": "", "email_verified": False}
    addr = f"{u.name}@example.org"
    r = u.ok("PATCH", "/me", json={"email": addr, "nickname": "Ada L.", "phone": "+44 20 7946 0000"})
    assert (r["email"], r["nickname"], r["phone"], r["email_verified"]) == (addr, "Ada L.", "+44 20 7946 0000", False)
    assert r["verification"]["status"] == "sent" and addr in r["verification"]["detail"]
    msg = wait(lambda: inbox.to(addr), timeout=30, what="the verification email")[0]
    assert msg["Subject"] == "[TiHub] Verify your email address" and msg["From"] == "TiHub <tihub@example.org>"
    link = link_in(msg, mhub)

    # not signed in: the hub's login, nothing verified; another user signed in: refused, the link stays good
    anon = requests.get(link, allow_redirects=False, timeout=30)
    assert anon.status_code == 302 and "/hub/api/oauth2/authorize" in anon.headers["Location"], anon.status_code
    snooped = other.browser.get(link, timeout=30)
    assert snooped.status_code == 403 and "another account" in snooped.text, snooped.text[:500]
    assert u.ok("GET", "/me")["email_verified"] is False
    # a token that is not this TiHub's: 400 naming why
    bad = u.browser.get(link[:-3] + "AAA", timeout=30)
    assert bad.status_code == 400 and "not a verification link" in bad.text

    page = u.browser.get(link, timeout=30)
    assert page.status_code == 200 and 'id="email-verified"' in page.text and addr in page.text, page.text[:500]
    assert u.ok("GET", "/me")["email_verified"] is True
    again = u.browser.get(link, timeout=30)  # single use
    assert again.status_code == 409 and "used already" in again.text
    assert mhub.admin.ok("GET", f"/users/{u.name}")["email_verified"] is True

    # a new email is unverified again and its link is new; the old link verifies nothing
    r = u.ok("PATCH", "/me", json={"email": "second-" + addr})
    assert r["email_verified"] is False and r["verification"]["status"] == "sent"
    assert u.browser.get(link, timeout=30).status_code == 409
    # an admin's email counts as verified
    assert mhub.admin.ok("PATCH", f"/users/{u.name}", json={"email": addr})["email_verified"] is True
    assert u.ok("GET", "/me")["email_verified"] is True


@pytest.fixture(scope="module")
def badin(mhub):
    return mhub.person("badin")


@pytest.mark.parametrize("body, field, words", [
    ({"email": "nobody"}, "email", "name@example.org"),
    ({"email": "a@b"}, "email", "name@example.org"),
    ({"phone": "call me"}, "phone", "digits"),
    ({"nickname": "x" * 64}, "nickname", "63"),
    ({"nickname": "tab\there"}, "nickname", "control"),
    ({"email": 7}, "email", "string"),
    ({"admin": True}, "admin", "admin"),
    ({"nickname": "fine", "enabled": False}, "enabled", "enabled"),
    ({"nickname": "fine", "phone": "12"}, "phone", "digits"),
    ({}, None, "at least 1 entry"),
])
def test_bad_input_is_a_400_naming_the_field_and_nothing_is_stored(badin, smtp, body, field, words):
    u = badin
    before = u.ok("GET", "/me")
    r = u.api("PATCH", "/me", json=body)
    assert r.status_code == 400, (body, r.status_code, r.text)
    doc = r.json()
    assert doc["field"] == field and words in doc["detail"], doc
    assert u.ok("GET", "/me") == before
    assert not smtp[1].to(f"{u.name}@example.org")


def test_the_account_page_shows_and_edits_the_profile(mhub, smtp):
    _, inbox = smtp
    u = mhub.person("pager")
    html = u.browser.get(f"{mhub.url}/services/ti/account", timeout=30).text
    assert 'id="my-profile"' in html and 'id="profile-form"' in html and "email-not-verifiable" not in html
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', html).group(1)
    addr = f"{u.name}@example.org"
    r = u.browser.post(f"{mhub.url}/services/ti/account", data={
        "_xsrf": xsrf, "action": "set-profile", "nickname": "Pager", "email": addr, "phone": ""},
        allow_redirects=False, timeout=30)
    assert r.status_code == 303, r.text[:300]
    html = u.browser.get(f"{mhub.url}/services/ti/account", timeout=30).text
    assert f"a link was mailed to {addr}" in html and "not verified" in html and 'id="resend-form"' in html
    assert u.ok("GET", "/me")["nickname"] == "Pager"
    link = link_in(wait(lambda: inbox.to(addr), timeout=30, what="the page's verification email")[0], mhub)
    # saving the nickname alone mails nothing again
    u.browser.post(f"{mhub.url}/services/ti/account", data={
        "_xsrf": xsrf, "action": "set-profile", "nickname": "Pager 2", "email": addr, "phone": ""}, timeout=30)
    assert len(inbox.to(addr)) == 1 and u.ok("GET", "/me")["nickname"] == "Pager 2"
    assert u.browser.get(link, timeout=30).status_code == 200
    html = u.browser.get(f"{mhub.url}/services/ti/account", timeout=30).text
    assert "verified: alert notices are mailed here" in html and 'id="resend-form"' not in html


def test_the_cli_shows_and_sets_the_profile_and_its_help_examples_run(mhub, smtp):
    _, inbox = smtp
    u = mhub.person("clier")
    addr = f"{u.name}@example.org"
    r = u.ti("account", "set", "--email", addr, "--nickname", "Cli User", "--phone", "555-0100")
    assert r.returncode == 0, r.stderr
    assert "Cli User" in r.stdout and "not verified" in r.stdout and f"a link was mailed to {addr}" in r.stdout
    shown = u.ti("account", "show", "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout) == {
        "name": u.name, "nickname": "Cli User", "email": addr, "email_verified": False, "phone": "555-0100"}
    bad = u.ti("account", "set", "--email", "nope")
    assert bad.returncode == 1 and "(field: email)" in bad.stderr and "name@example.org" in bad.stderr
    assert u.ti("account", "set").returncode == 2
    link = link_in(wait(lambda: inbox.to(addr), timeout=30, what="the CLI's verification email")[0], mhub)
    assert u.browser.get(link, timeout=30).status_code == 200
    assert "(verified)" in u.ti("account", "show").stdout
    # every example of `ti account`'s help, as written
    examples = []
    for cmd in (("account",), ("account", "show"), ("account", "set")):
        text = u.ti(*cmd, "--help").stdout
        assert "examples:" in text, text
        examples += [line.strip() for line in text.splitlines() if line.strip().startswith("ti account")]
    assert len(examples) >= 5
    for line in dict.fromkeys(examples):
        r = u.ti(*shlex.split(line)[1:])
        assert r.returncode == 0, (line, r.stdout, r.stderr)
    assert json.loads(u.ti("account", "show", "--json").stdout)["phone"] == ""  # the last example clears it


def test_without_smtp_the_answer_and_the_page_say_the_email_cannot_be_verified(hub, new_user):
    u = new_user("nosmtp")
    r = u.ok("PATCH", "/me", json={"email": f"{u.name}@example.org"})
    assert r["email_verified"] is False and r["verification"]["status"] == "not_configured"
    assert "cannot be verified here" in r["verification"]["detail"]
    html = u.browser.get(f"{hub.url}/services/ti/account", timeout=30).text
    assert 'id="email-not-verifiable"' in html and "cannot be verified here" in html
    cli = u.ti("account", "set", "--email", f"{u.name}@example.org")
    assert cli.returncode == 0 and "cannot be verified here" in cli.stderr
