"""Drafts and support requests (JOB4, JOB10), against a real hub.

A job saved as a draft is checked as a submission (bad input: 4xx, nothing stored), holds no quota, is shown to
nobody but its owner and admins, and is never run by the scheduler; starting it checks it again against the present
(quota, plan) and queues it once; a draft is deleted to free its name. A failed job's owner asks support: the
admins see the request with the job's facts and the last 50 log lines (its secret value scrubbed), are notified by
webhook, answer it, and the owner sees the answer; another user sees none of it.
"""

from __future__ import annotations

import json
import time

import pytest
from hubproc import own_hub
from mailkit import Hooks
from tihub_client import wait

pytestmark = pytest.mark.e2e

SECRET = "s3cr3t-support-value-7f3a"


@pytest.fixture(scope="module")
def hooks():
    h = Hooks()
    yield h
    h.server.shutdown()


@pytest.fixture(scope="module")
def hub(tmp_path_factory, hooks):
    yield from own_hub(tmp_path_factory, "drafts", "c.TiService.scheduler_interval = 0.3\n"
                       f"c.Notifier.webhook_urls = ['{hooks.url}']\nc.Notifier.interval = 0.5\n")


def job(name: str, command: str = "echo ran-$((6*7))", **kw) -> dict:
    return {"name": name, "plan": "cpu-small", "image": "python-cpu", "command": command, **kw}


def cpu_used(u) -> float:
    return sum(c["used"]["cpu"] for c in u.ok("GET", "/quota")["compute"] if c["kind"] == "single")


def names(u, **params) -> dict[str, str]:
    return {j["name"]: j["status"] for j in u.ok("GET", "/jobs", params={"limit": "500", **params})["items"]}


def test_a_draft_is_checked_held_back_and_started_once(hub):
    u, other, admin = hub.person("drafter"), hub.person("drnosy"), hub.admin
    # bad input: refused as a submission is, and nothing stored
    bad = [(job("dr-bad1", plan="no-such-plan", draft=True), 404), (job("dr-bad2", command="", draft=True), 400),
           (job("dr-bad3", draft="yes"), 400), (job("dr-bad4", draft=True, ports=[80]), 400),
           ({**job("dr-bad5", draft=True), "surprise": 1}, 400)]
    for body, status in bad:
        r = u.api("POST", "/jobs", json=body)
        assert r.status_code == status, (body, r.text)
    assert u.ok("GET", "/jobs")["total"] == 0

    d = u.ok("POST", "/jobs", json=job("dr-one", draft=True))
    assert d["status"] == "created" and d["queued_at"] is None and "queue" not in d and d["reason"].startswith("draft")
    assert u.api("POST", "/jobs", json=job("dr-one", draft=True)).status_code == 409  # its name is taken
    assert u.api("POST", "/jobs", json=job("dr-one")).status_code == 409
    assert cpu_used(u) == 0  # a draft holds no quota
    # the scheduler runs other work and never the draft: a job submitted after it runs to its end meanwhile
    runner = u.ok("POST", "/jobs", json=job("dr-runner", "echo other"))
    assert u.wait_job(runner["id"])["status"] == "completed"
    time.sleep(1.5)  # five more cycles
    shown = u.ok("GET", f"/jobs/{d['id']}")
    assert shown["status"] == "created" and shown["placement"] is None
    assert [e["status"] for e in shown["events"]] == ["created"]
    assert names(u)["dr-one"] == "created"
    assert all(j["id"] != d["id"] for j in u.ok("GET", "/queue", params={"all": "1"})["items"])
    # nobody else sees it (not even as a waiting job's summary); admins do
    assert other.api("GET", f"/jobs/{d['id']}").status_code == 404
    assert "dr-one" not in names(other, all="1")
    assert admin.ok("GET", f"/jobs/{d['id']}")["status"] == "created"
    # only its owner starts it: another user is not told it exists, an admin is refused
    assert other.api("POST", f"/jobs/{d['id']}/start").status_code == 404
    assert admin.api("POST", f"/jobs/{d['id']}/start").status_code == 403

    started = u.ok("POST", f"/jobs/{d['id']}/start")
    assert started["status"] == "queued" and started["queued_at"]
    r = u.api("POST", f"/jobs/{d['id']}/start")
    assert r.status_code == 409 and "not a draft" in r.json()["detail"]
    done = u.wait_job(d["id"])
    assert done["status"] == "completed", done
    assert "ran-42" in u.ok("GET", f"/jobs/{d['id']}/logs")["text"]
    assert [e["status"] for e in u.ok("GET", f"/jobs/{d['id']}")["events"]][:2] == ["created", "queued"]
    assert u.api("POST", f"/jobs/{d['id']}/start").status_code == 409  # nor once it ran
    assert u.api("DELETE", f"/jobs/{d['id']}").status_code == 409  # only drafts are deleted
    assert u.api("POST", "/jobs/999999/start").status_code == 404


def test_start_checks_the_present_quota_and_plan(hub):
    u, admin = hub.person("drquota"), hub.admin
    admin.ok("PUT", "/quotas", json={"user": u.name, "kind": "single", "devices": 0, "cpu": 0.5,
                                     "memory_mib": 1 << 20})
    d = u.ok("POST", "/jobs", json=job("dr-big", draft=True))  # saved over the quota: it holds nothing
    r = u.api("POST", f"/jobs/{d['id']}/start")
    assert r.status_code == 403 and r.json()["error"] == "quota_exceeded", r.text
    assert u.ok("GET", f"/jobs/{d['id']}")["status"] == "created"  # still a draft
    admin.ok("PUT", "/quotas", json={"user": u.name, "kind": "single", "devices": 0, "cpu": 8,
                                     "memory_mib": 1 << 20})
    # a plan no longer offered for jobs when the draft starts
    plan = admin.ok("POST", "/plans", json={"name": "dr-plan", "kinds": ["single"], "cpu": 1, "memory_mib": 512})
    d2 = u.ok("POST", "/jobs", json=job("dr-planned", plan="dr-plan", draft=True))
    admin.ok("PATCH", f"/plans/{plan['id']}", json={"kinds": ["workspace"]})
    r = u.api("POST", f"/jobs/{d2['id']}/start")
    assert r.status_code == 409 and r.json()["field"] == "plan", r.text
    assert u.ok("GET", f"/jobs/{d2['id']}")["status"] == "created"
    # deleted, its name is free for a corrected draft; another user cannot delete it, an admin can (audited)
    assert hub.person("drother").api("DELETE", f"/jobs/{d2['id']}").status_code == 404
    assert u.api("DELETE", f"/jobs/{d2['id']}").status_code == 204
    assert u.api("GET", f"/jobs/{d2['id']}").status_code == 404
    d3 = u.ok("POST", "/jobs", json=job("dr-planned", draft=True))
    assert admin.api("DELETE", f"/jobs/{d3['id']}").status_code == 204
    assert any(e["action"] == "job.delete" for e in admin.ok("GET", "/audit", params={
        "target": f"{u.name}/dr-planned"})["items"])
    # the quota is checked at start, atomically: the started draft now runs
    assert u.ok("POST", f"/jobs/{d['id']}/start")["status"] == "queued"
    assert u.wait_job(d["id"])["status"] == "completed"


def test_drafts_from_the_cli(hub):
    u = hub.person("drcli")
    r = u.ti("job", "submit", "--draft", "--name", "dr-cli", "--plan", "cpu-small", "--image", "python-cpu",
             "--", "echo from-cli")
    assert r.returncode == 0 and "saved draft" in r.stdout and "ti job start" in r.stdout, r.stderr
    assert names(u)["dr-cli"] == "created"
    r = u.ti("job", "submit", "--draft", "--wait", "--name", "dr-cli2", "--plan", "cpu-small", "--image",
             "python-cpu", "--", "true")
    assert r.returncode != 0 and "--draft" in r.stderr
    r = u.ti("job", "start", "dr-cli")
    assert r.returncode == 0, r.stderr
    assert u.wait_job("dr-cli")["status"] == "completed"
    r = u.ti("job", "start", "dr-cli")
    assert r.returncode != 0 and "not a draft" in r.stderr
    u.ti("job", "submit", "--draft", "--name", "dr-cli3", "--plan", "cpu-small", "--image", "python-cpu", "--", "true")
    r = u.ti("job", "delete", "dr-cli3")
    assert r.returncode == 0 and "deleted" in r.stdout, r.stderr
    assert "dr-cli3" not in names(u)


def support_posts(hooks, key: str) -> list[dict]:
    return [p for p in hooks.posts if p.get("key") == key]


def test_support_request_reaches_the_admins_who_answer_it(hub, hooks):
    u, other, admin = hub.person("asker"), hub.person("asknosy"), hub.admin
    command = "for i in $(seq 1 80); do echo line-$i; done; echo \"key=$API_KEY in use\"; exit 3"
    j = u.ok("POST", "/jobs", json=job("sup-fail", command, secret_env={"API_KEY": SECRET}))
    assert u.wait_job(j["id"])["status"] == "failed"
    # only finished jobs, only their owner
    d = u.ok("POST", "/jobs", json=job("sup-draft", draft=True))
    r = u.api("POST", f"/jobs/{d['id']}/support", json={"message": "help"})
    assert r.status_code == 409 and "finished" in r.json()["detail"]
    assert other.api("POST", f"/jobs/{j['id']}/support", json={"message": "help"}).status_code == 404
    assert admin.api("POST", f"/jobs/{j['id']}/support", json={"message": "help"}).status_code == 403
    assert u.api("POST", f"/jobs/{j['id']}/support", json={"message": ""}).status_code == 400
    assert u.api("POST", f"/jobs/{j['id']}/support", json={}).status_code == 400

    a = u.ok("POST", f"/jobs/{j['id']}/support", json={"message": "Why does it exit 3?"})
    assert a["kind"] == "support" and a["open"] and a["job_id"] == j["id"] and a["users"] == [u.name]
    assert u.api("POST", f"/jobs/{j['id']}/support", json={"message": "again"}).status_code == 409

    seen = {x["id"]: x for x in admin.ok("GET", "/alerts")["items"]}[a["id"]]
    f = seen["figures"]
    assert seen["message"] == "Why does it exit 3?"
    assert (f["job"], f["name"], f["owner"], f["state"], f["exit_code"], f["plan"], f["image"]) == (
        j["id"], "sup-fail", u.name, "failed", 3, "cpu-small", j["image"])
    assert f["reason"]
    tail = f["log_tail"].splitlines()
    # the last 50 lines of the log as the owner reads it (the platform may end it with a line of its own)
    assert len(tail) == 50 and tail == u.ok("GET", f"/jobs/{j['id']}/logs", params={"tail": "50"}
                                            )["text"].replace(SECRET, "[secret]").splitlines(), tail
    assert "line-80" in tail and "line-20" not in tail and "key=[secret] in use" in tail, tail
    assert SECRET not in admin.api("GET", "/alerts").text and SECRET not in u.api("GET", "/alerts").text
    # notified like every alert (the webhook here), with the facts, never the secret
    wait(lambda: support_posts(hooks, a["key"]), 30, "the request's notice")
    assert SECRET not in json.dumps(hooks.posts)
    assert support_posts(hooks, a["key"])[0]["figures"]["log_tail"] == f["log_tail"]
    # the owner sees their request; another user sees nothing of it, and cannot answer it
    assert [x["id"] for x in u.ok("GET", "/alerts")["items"]] == [a["id"]]
    assert all(x["id"] != a["id"] for x in other.ok("GET", "/alerts", params={"open": "false"})["items"])
    r = other.api("POST", f"/alerts/{a['id']}/answer", json={"answer": "me"})
    assert r.status_code == 403
    assert u.api("POST", f"/alerts/{a['id']}/answer", json={"answer": "me"}).status_code == 403

    answered = admin.ok("POST", f"/alerts/{a['id']}/answer",
                        json={"answer": "Exit 3 is your script's own: see its last line."})
    assert not answered["open"] and answered["answered_by"] == admin.name and answered["answered_at"]
    assert admin.api("POST", f"/alerts/{a['id']}/answer", json={"answer": "twice"}).status_code == 409
    assert admin.api("POST", "/alerts/999999/answer", json={"answer": "x"}).status_code == 404
    assert u.ok("GET", "/alerts")["items"] == []  # closed
    mine = {x["id"]: x for x in u.ok("GET", "/alerts", params={"open": "false"})["items"]}
    assert mine[a["id"]]["answer"] == "Exit 3 is your script's own: see its last line."
    # the answer goes out once more, to the owner and the admins
    wait(lambda: any(p.get("answer") for p in support_posts(hooks, a["key"])), 30, "the answer's notice")
    assert next(p for p in support_posts(hooks, a["key"]) if p.get("answer"))["text"].count("Answered") == 1

    # (the owner asks again from the CLI; the admin answers from the CLI; the owner reads it there)
    r = u.ti("job", "support", str(j["id"]), "-m", "Still failing after the fix")
    assert r.returncode == 0 and "support request" in r.stdout, r.stderr
    again = u.ok("GET", "/alerts")["items"][0]
    assert again["message"] == "Still failing after the fix" and again["id"] != a["id"]
    r = admin.ti("alert", "answer", str(again["id"]), "-m", "Fixed on our side")
    assert r.returncode == 0, r.stderr
    r = u.ti("alert", "list", "--all", "--json")
    assert r.returncode == 0 and any(x["answer"] == "Fixed on our side" for x in json.loads(r.stdout)), r.stdout
