"""Alerts reach people (MON2-3, JOB2): a job past its declared duration opens an alert; its notice arrives by
email at a real SMTP server the test starts (aiosmtpd) for the owner and the admins, and by webhook; reminders
follow every reminder_interval until the job is killed, which clears the alert; GET /alerts and `ti alert list`
show it to its owner and the admins only."""

from __future__ import annotations

import json
import time

import pytest
from hubproc import own_hub
from mailkit import Hooks, smtp_server
from tihub_client import wait

pytestmark = pytest.mark.e2e

REMINDER_S = 4


@pytest.fixture(scope="module")
def smtp():
    with smtp_server() as (ctl, inbox):
        yield ctl, inbox


@pytest.fixture(scope="module")
def hooks():
    h = Hooks()
    yield h
    h.server.shutdown()


@pytest.fixture(scope="module")
def nhub(tmp_path_factory, smtp, hooks):
    ctl, _ = smtp
    yield from own_hub(tmp_path_factory, "notices", (
        f"c.Notifier.smtp_host = '127.0.0.1'\nc.Notifier.smtp_port = {ctl.port}\nc.Notifier.smtp_tls = 'none'\n"
        "c.Notifier.sender = 'TiHub <tihub@example.org>'\nc.Notifier.admin_emails = ['oncall@example.org']\n"
        f"c.Notifier.reminder_interval = {REMINDER_S}\nc.Notifier.interval = 0.5\n"
        "c.Notifier.admin_refresh_interval = 1\n"
        f"c.Notifier.webhook_urls = ['{hooks.url}']\nc.Notifier.base_url = 'https://hub.example.org'\n"))


def test_an_overrun_alert_is_mailed_to_owner_and_admins_reminded_and_cleared(nhub, smtp, hooks):
    _, inbox = smtp
    admin = nhub.admin
    owner = nhub.person("alerted")
    other = nhub.person("bystander")
    admin.ok("PATCH", f"/users/{owner.name}", json={"email": "owner@example.org"})
    admin.ok("PATCH", f"/users/{admin.name}", json={"email": "admin@example.org"})
    j = owner.ok("POST", "/jobs", json={"name": "late", "plan": "cpu-small", "image": "python-cpu",
                                         "command": "sleep 300", "estimated_duration": 1})
    key = f"job:{j['id']}:overrun"
    first = wait(lambda: inbox.to("owner@example.org", key), timeout=90, what="the owner's email")[0]
    assert first["Subject"].startswith("[TiHub] Job ") and "running past its declared duration" in first["Subject"]
    assert f"{owner.name}/late" in first["Subject"] and first["From"] == "TiHub <tihub@example.org>"
    text = first.get_payload(decode=True).decode()
    assert "declared_s: 1" in text and "ran_s:" in text, text
    assert f"https://hub.example.org/services/ti/jobs?job={j['id']}" in text, text
    # the admins: the configured address and the profile email of the user whose role gives users:manage
    wait(lambda: inbox.to("oncall@example.org", key) and inbox.to("admin@example.org", key), timeout=30,
         what="the admins' emails")
    assert not inbox.to("bystander@example.org")
    hook = wait(lambda: [p for p in hooks.posts if p["key"] == key], timeout=30, what="the webhook")[0]
    assert hook["job_id"] == j["id"] and hook["users"] == [owner.name] and hook["rule"] == "overrun"
    assert set(hook["recipients"]) == {"owner@example.org", "oncall@example.org", "admin@example.org"}
    assert hook["figures"]["declared_s"] == 1 and hook["reminder"] is False

    # in the product: the owner and the admins see it, another user does not
    mine = owner.ok("GET", "/alerts")["items"]
    assert [a["key"] for a in mine] == [key] and mine[0]["open"] and mine[0]["job_id"] == j["id"]
    assert key in [a["key"] for a in admin.ok("GET", "/alerts")["items"]]
    assert other.ok("GET", "/alerts") == {"items": [], "total": 0, "limit": 50, "offset": 0}
    assert owner.api("GET", "/alerts", params={"open": "maybe"}).status_code == 400
    cli = owner.ti("alert", "list", "--json")
    assert cli.returncode == 0 and [a["key"] for a in json.loads(cli.stdout)] == [key], cli.stderr
    # another user's alerts: the hub (its home page's banner) and admins only
    assert other.api("GET", "/alerts", params={"user": owner.name}).status_code == 403
    assert [a["key"] for a in admin.ok("GET", "/alerts", params={"user": owner.name})["items"]] == [key]
    assert admin.ok("GET", "/alerts", params={"user": other.name})["total"] == 0
    # the hub's home page shows a banner with my open alerts, escaped; none for another user
    home = owner.browser.get(f"{nhub.url}/hub/home", timeout=30)
    assert home.status_code == 200 and 'id="ti-alerts-banner"' in home.text, home.text[:2000]
    assert "1 open TiHub alert<" in home.text and f"({owner.name}/late) is running past" in home.text
    assert 'id="ti-alerts-banner"' not in other.browser.get(f"{nhub.url}/hub/home", timeout=30).text
    listed = owner.ti("alert", "list")
    assert listed.returncode == 0 and f"{owner.name}/late) is running past" in listed.stdout, listed.stdout

    # a reminder after reminder_interval, saying so
    reminder = wait(lambda: [m for m in inbox.to("owner@example.org", key) if m["Subject"].startswith(
        "[TiHub] Reminder: ")], timeout=REMINDER_S * 6, what="a reminder")[0]
    assert "notice 2" in reminder.get_payload(decode=True).decode()

    # killed: the alert clears and the reminders stop
    owner.ok("POST", f"/jobs/{j['id']}/kill")
    owner.wait_job(j["id"])
    assert owner.ok("GET", "/alerts")["items"] == []
    assert 'id="ti-alerts-banner"' not in owner.browser.get(f"{nhub.url}/hub/home", timeout=30).text
    gone = owner.ok("GET", "/alerts", params={"open": "false"})["items"]
    assert gone[0]["key"] == key and gone[0]["cleared_at"] and not gone[0]["open"]
    time.sleep(1)  # a round in flight when it was killed may still deliver
    count = len(inbox.to("owner@example.org", key))
    time.sleep(REMINDER_S * 2)
    assert len(inbox.to("owner@example.org", key)) == count
    # the history keeps the alert event
    assert [e for e in owner.ok("GET", f"/jobs/{j['id']}")["events"] if e["status"] == "alert"]
