"""WS3 on the ti service's job page: who is shown an SSH command, which one, and the pages' script policy (pure)."""

from __future__ import annotations

import re

from ti_hub.ops.sshaccess import takes_ssh
from ti_hub.pages.base import CSP, csp
from ti_hub.pages.sshcopy import SCRIPT, block, command_for, wants_command
from ti_hub.pages.html import Safe
from ti_hub.ssh.logins import parse_login

JOB = {"owner": "alice", "name": "train-1", "kind": "single", "status": "running"}


def test_only_the_owner_of_a_running_job_with_the_gateway_on_is_shown_a_command():
    assert wants_command("alice", JOB, gateway_on=True)
    assert not wants_command("admin", JOB, gateway_on=True)  # an admin never logs in as the owner
    assert not wants_command("alice", JOB, gateway_on=False)
    for status in ("queued", "paused", "completed", "killed"):
        assert not wants_command("alice", {**JOB, "status": status}, gateway_on=True)


def test_the_switch_is_the_gateways_rule():
    assert takes_ssh("single", {"endpoints": ["tensorboard", "ssh"]})
    assert not takes_ssh("single", {"endpoints": ["tensorboard"]}) and not takes_ssh("single", {})
    assert takes_ssh("workspace", {}) and not takes_ssh("workspace", {"ssh": False})


def test_the_command_is_the_apis_for_instance_0_of_a_job():
    cmd = command_for(JOB, "hub.example.org", 8022)
    assert cmd == "ssh -p 8022 alice+train-1.0@hub.example.org"
    login = parse_login(cmd.split()[-1].rpartition("@")[0])
    assert (login.user, login.target, login.instance) == ("alice", "train-1", 0)
    assert command_for({**JOB, "kind": "workspace", "name": "desk"}, "h", 22) == "ssh alice+desk@h"


def test_only_a_nonce_lets_a_script_run():
    assert "script-src 'none'" in CSP and csp() == CSP
    with_nonce = csp("abc123")
    script_src = re.search(r"script-src ([^;]*)", with_nonce).group(1)
    assert script_src == "'nonce-abc123'"  # never 'self' (user servers share the origin) nor 'unsafe-inline'
    assert with_nonce.replace("'nonce-abc123'", "'none'") == CSP


def test_the_markup_shows_the_command_without_script_and_hides_the_button_until_scripted():
    html = block("ssh -p 8022 alice+train-1.0@h", "single", Safe("<script nonce=x></script>"))
    assert '<code id="job-ssh-command">ssh -p 8022 alice+train-1.0@h</code>' in html
    assert re.search(r'<button[^>]*id="job-ssh-copy"[^>]*hidden', html)
    assert not re.search(r"\son[a-z]+=", html)  # no inline event handler: the CSP allows none
    assert "</" not in SCRIPT
