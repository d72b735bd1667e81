"""WS3 on the ti service's job page (issue 31): the owner of a running job with SSH on copies its SSH command in
Chromium, with the clipboard and without it; the command is there as text with script off. The page's one inline
script runs under a nonce fresh to each response; every other ti page keeps script-src 'none', and an admin
looking at another user's job is shown no command (SSH logs in as the owner: ops/jobssh.py)."""

from __future__ import annotations

import re

import pytest
from browserkit import screenshot

from ti_hub.pages.base import PAGES

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def running_job(user, name: str, endpoints: list[str]) -> dict:
    job = user.ok("POST", "/jobs", json={"name": name, "plan": "cpu-small", "image": "python-cpu",
                                         "endpoints": endpoints, "command": "sleep 600"})
    return user.wait_job(job["id"], states=("running",))


def script_src(r) -> str:
    return re.search(r"script-src ([^;]*)", r.headers["Content-Security-Policy"]).group(1)


def no_script(r) -> None:
    assert script_src(r) == "'none'" and "<script" not in r.text, (r.url, r.headers["Content-Security-Policy"])


def test_the_owner_copies_a_running_jobs_ssh_command_from_its_page(hub, page_for):
    user = hub.person("jpssh")
    job = running_job(user, "jp-ssh", ["ssh"])
    try:
        expected = user.ok("GET", "/ssh/command", params={"name": "jp-ssh", "instance": "0"})["command"]
        assert expected.startswith("ssh ") and f"{user.name}+jp-ssh.0@" in expected
        page = page_for(hub, user)
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=hub.url)
        refused = []
        page.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
        page.goto(f"{hub.url}/services/ti/jobs?job={job['id']}")
        assert page.locator("#job-ssh-command").inner_text() == expected
        button = page.locator("#job-ssh-copy")
        button.wait_for(state="visible")  # shown by the script: it ran under this response's nonce
        button.click()
        page.wait_for_selector('#job-ssh-said:text-is("Copied")')
        assert page.evaluate("navigator.clipboard.readText()") == expected
        screenshot(page, "hub-job-ssh", "#job-ssh")
        # no clipboard (http on an address other than localhost): the command is selected in a read-only field
        page.evaluate("Object.defineProperty(navigator, 'clipboard', {value: undefined, configurable: true})")
        button.click()
        field = page.locator("#job-ssh-field")
        field.wait_for()
        assert field.input_value() == expected and field.get_attribute("readonly") is not None
        assert "Ctrl+C" in page.locator("#job-ssh-said").inner_text()
        assert page.evaluate("document.activeElement.id") == "job-ssh-field"
        assert page.evaluate("document.activeElement.selectionEnd - document.activeElement.selectionStart") \
            == len(expected)
        assert refused == []

        # script off: the command is still on the page as text, and no button that would do nothing
        plain = page_for(hub, user, java_script_enabled=False)
        plain.goto(f"{hub.url}/services/ti/jobs?job={job['id']}")
        assert plain.locator("#job-ssh-command").inner_text() == expected
        assert not plain.locator("#job-ssh-copy").is_visible()
    finally:
        user.ok("POST", f"/jobs/{job['id']}/kill")


def test_only_the_owners_running_ssh_job_page_allows_a_script_under_a_fresh_nonce(hub):
    owner = hub.person("jpcsp")
    job = running_job(owner, "csp-ssh", ["ssh"])
    plain = running_job(owner, "csp-plain", [])
    expected = owner.ok("GET", "/ssh/command", params={"name": "csp-ssh", "instance": "0"})["command"]
    url = f"{hub.url}/services/ti/jobs"
    try:
        nonces = []
        for _ in range(2):
            r = owner.browser.get(url, params={"job": job["id"]}, timeout=30)
            assert r.status_code == 200, r.text[-1000:]
            nonce = re.fullmatch(r"'nonce-([A-Za-z0-9_-]{22,})'", script_src(r))
            assert nonce, r.headers["Content-Security-Policy"]  # the nonce alone: no 'self', no 'unsafe-inline'
            assert re.findall(r"<script\b[^>]*>", r.text) == [f'<script nonce="{nonce.group(1)}">']
            assert f'<code id="job-ssh-command">{expected}</code>' in r.text
            assert not re.search(r"<[^>]*\son[a-z]+=", r.text)  # no inline event handler attributes
            nonces.append(nonce.group(1))
        assert nonces[0] != nonces[1]

        # the owner's job without SSH: no command, no script; nor the owner's other pages, nor refusals
        r = owner.browser.get(url, params={"job": plain["id"]}, timeout=30)
        assert r.status_code == 200 and "csp-plain" in r.text and 'id="job-ssh"' not in r.text
        no_script(r)
        for name in ("", "queue", "account"):
            r = owner.browser.get(f"{hub.url}/services/ti/{name}", timeout=30)
            assert r.status_code == 200
            no_script(r)
        r = owner.browser.get(url, timeout=30)  # the list is the operators'
        assert r.status_code == 403
        no_script(r)

        # another user: the job is not there for them (as in the API), and no command
        other = hub.person("jpother")
        r = other.browser.get(url, params={"job": job["id"]}, timeout=30)
        assert r.status_code == 404 and expected not in r.text
        no_script(r)

        # an admin sees the owner's running SSH job in full, but no command: SSH into it is the owner's only
        admin = hub.admin
        r = admin.browser.get(url, params={"job": job["id"]}, timeout=30)
        assert r.status_code == 200 and "csp-ssh" in r.text and "running" in r.text
        assert 'id="job-ssh"' not in r.text and expected not in r.text and "+csp-ssh" not in r.text
        no_script(r)
        # and no other page of the service allows a script
        for p in PAGES:
            r = admin.browser.get(f"{hub.url}/services/ti/{p.name}", timeout=60)
            assert r.status_code == 200, (p.name, r.status_code)
            no_script(r)
        r = admin.browser.get(url, params={"job": "999999999"}, timeout=30)
        assert r.status_code == 404
        no_script(r)

        # the job ended: its page has no command any more
        owner.ok("POST", f"/jobs/{job['id']}/kill")
        owner.wait_job(job["id"], states=("killed",))
        r = owner.browser.get(url, params={"job": job["id"]}, timeout=30)
        assert r.status_code == 200 and 'id="job-ssh"' not in r.text
        no_script(r)
    finally:
        for j in (job, plain):
            owner.api("POST", f"/jobs/{j['id']}/kill")
