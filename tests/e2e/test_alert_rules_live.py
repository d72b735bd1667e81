"""Machine alert rules and cordoning (MON2, ADM3) on a live hub whose health readings come from the TEST SOURCE
(a file this test writes): uncorrectable ECC errors and a hot GPU open alerts; with the dry run off the ECC rule
takes the machine out of scheduling (a queued GPU job waits, naming the cordon) until an admin uncordons it and
the job starts; a hub in dry run only reports. The built-in rules about jobs and workspaces are managed the same
way: job-overrun disabled opens no alert for a job past its duration, enabled again it does."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from hubproc import readings_hub

pytestmark = pytest.mark.e2e


def hub_with_readings(tmp_path_factory, name: str, dry_run: bool):
    hub_gen = readings_hub(tmp_path_factory, name, "c.TiService.scheduler_interval = 0.3\n"
                           f"c.AlertRules.cordon_dry_run = {dry_run}\nc.AlertRules.builtin_ttl = 1\n")
    return next(hub_gen), hub_gen


@pytest.fixture(scope="module")
def ahub(tmp_path_factory):
    hub, gen = hub_with_readings(tmp_path_factory, "alerthub", dry_run=False)
    yield hub
    next(gen, None)


def write(path: Path, ecc: int, temp: float) -> None:
    path.write_text(json.dumps({"devices": [{"device_type": "demo-gpu", "device": 0, "ecc_uncorrectable": ecc,
                                             "temperature_c": temp}]}))


def rules_by_name(admin) -> dict:
    return {r["name"]: r for r in admin.ok("GET", "/alert-rules")["items"]}


def quicken(admin) -> dict:
    """Evaluate the ECC and temperature rules every second over the last 5 s (the defaults take minutes)."""
    rules = rules_by_name(admin)
    for name in ("gpu-ecc-errors", "gpu-temperature"):
        changed = admin.ok("PATCH", f"/alert-rules/{rules[name]['id']}",
                           json={"step": 1, "interval": 5, "percent": 1})
        assert (changed["step"], changed["interval"], changed["percent"]) == (1, 5, 1.0)
    return rules


def wait_for(what, timeout: float = 60, every: float = 0.5):
    end = time.monotonic() + timeout
    while True:
        got = what()
        if got:
            return got
        assert time.monotonic() < end, f"timed out waiting for {what.__doc__ or what}"
        time.sleep(every)


def test_ecc_errors_cordon_the_machine_until_an_admin_puts_it_back(ahub):
    admin = ahub.admin
    rules = quicken(admin)
    assert {"gpu-ecc-errors", "gpu-temperature", "cpu-busy", "memory-full", "disk-free-low"} <= set(rules)
    ecc_id, hot_id = rules["gpu-ecc-errors"]["id"], rules["gpu-temperature"]["id"]
    machine = admin.ok("GET", "/cluster")["nodes"][0]["name"]
    write(ahub.readings, ecc=2, temp=95.0)

    def ecc_firing():
        """the ECC rule to fire"""
        return admin.ok("GET", f"/alert-rules/{ecc_id}")["firing"]
    (fire,) = wait_for(ecc_firing)
    assert fire["machine"] == machine and fire["figures"]["worst"] == 2 and fire["figures"]["cordon"] == "cordoned"
    (hot,) = wait_for(lambda: admin.ok("GET", f"/alert-rules/{hot_id}")["firing"])
    assert hot["figures"]["worst"] == 95 and "cordon" not in hot["figures"]  # the temperature rule only alerts
    (cordon,) = admin.ok("GET", "/machines/cordoned")["items"]
    assert (cordon["machine"], cordon["by"], cordon["rule"]) == (machine, "ti-alerts", "gpu-ecc-errors")
    assert cordon["cordoned"] and "gpu_ecc > 0" in cordon["reason"]
    wait_for(lambda: not admin.ok("GET", "/cluster")["nodes"][0]["schedulable"])

    # a GPU job waits, naming the cordon; the running work of others would keep running
    user = ahub.person("cordoned")
    job = user.ok("POST", "/jobs", json={"name": "after-ecc", "plan": "demo-gpu-1", "image": "python-cpu",
                                         "command": "sleep 30"})

    def waits_for_the_cordon():
        """the job's reason to name the cordoned machines"""
        j = user.ok("GET", f"/jobs/{job['id']}")
        return j if "cordoned" in j["reason"] else None
    waiting = wait_for(waits_for_the_cordon, timeout=30)
    assert waiting["status"] == "queued", waiting

    # the errors are still counted, but the admin puts the machine back: it stays back, and the job starts
    out = admin.ti("admin", "machine", "uncordon", machine)
    assert out.returncode == 0 and "schedulable" in out.stdout, out.stderr
    assert admin.ok("GET", "/machines/cordoned")["items"] == []
    user.wait_job(job["id"], ("running",), timeout=60)
    assert admin.ok("GET", "/cluster")["nodes"][0]["schedulable"]
    time.sleep(2.5)  # two more evaluations: the admin's word stands while the alert stays open
    assert admin.ok("GET", "/machines/cordoned")["items"] == []
    assert admin.ok("GET", f"/alert-rules/{ecc_id}")["firing"][0]["figures"]["cordon"].startswith("not cordoned")
    log = [(e["actor"], e["action"], e["target"])
           for e in admin.ok("GET", "/audit", params={"action": "machine"})["items"]]
    assert log == [(admin.name, "machine.uncordon", machine), ("ti-alerts", "machine.cordon", machine)]

    # the readings recover: both alerts close
    write(ahub.readings, ecc=0, temp=40.0)
    wait_for(lambda: not admin.ok("GET", f"/alert-rules/{ecc_id}")["firing"]
             and not admin.ok("GET", f"/alert-rules/{hot_id}")["firing"], timeout=30)
    user.api("POST", f"/jobs/{job['id']}/kill")

    # by hand, through the CLI: cordon, list, uncordon
    out = admin.ti("admin", "machine", "cordon", machine, "--reason", "fan noise")
    assert out.returncode == 0 and "cordoned" in out.stdout, out.stderr
    listed = admin.ti("admin", "machine", "list", "--json")
    assert [(c["machine"], c["by"], c["reason"]) for c in json.loads(listed.stdout)] == \
        [(machine, admin.name, "fan noise")]
    assert admin.ti("admin", "machine", "uncordon", machine).returncode == 0


def test_rules_are_managed_through_the_api_and_the_cli_and_bad_ones_are_refused(ahub):
    admin = ahub.admin
    bad = admin.api("POST", "/alert-rules", json={"name": "too-hot", "metric": "gpu_temperature", "op": ">",
                                                  "threshold": 900})
    assert bad.status_code == 400 and bad.json()["field"] == "threshold" and "degrees C" in bad.json()["detail"]
    bad = admin.api("POST", "/alert-rules", json={"name": "bad-pct", "metric": "cpu", "op": ">", "threshold": 50,
                                                  "percent": 0})
    assert bad.status_code == 400 and bad.json()["field"] == "percent"
    assert "too-hot" not in rules_by_name(admin) and "bad-pct" not in rules_by_name(admin)  # nothing stored

    made = admin.ti("admin", "alert-rule", "create", "load-high", "--metric", "cpu", "--op", ">", "--threshold",
                    "95", "--percent", "50", "--json")
    assert made.returncode == 0, made.stderr
    rule = json.loads(made.stdout)
    assert (rule["metric"], rule["threshold"], rule["percent"], rule["enabled"]) == ("cpu", 95.0, 50.0, True)
    changed = admin.ti("admin", "alert-rule", "update", "load-high", "--no-enabled", "--threshold", "97")
    assert changed.returncode == 0 and "load-high" in changed.stdout, changed.stderr
    listed = json.loads(admin.ti("admin", "alert-rule", "list", "--json").stdout)
    mine = next(r for r in listed if r["name"] == "load-high")
    assert (mine["enabled"], mine["threshold"]) == (False, 97.0)
    refused = admin.ti("admin", "alert-rule", "update", "load-high", "--percent", "0")
    assert refused.returncode != 0 and "percent" in refused.stderr
    assert admin.ti("admin", "alert-rule", "delete", "load-high").returncode == 0
    assert "load-high" not in rules_by_name(admin)
    actions = [e["action"] for e in admin.ok("GET", "/audit", params={"target": "load-high"})["items"]]
    assert actions == ["alert_rule.delete", "alert_rule.change", "alert_rule.create"]

    user = ahub.person("nosy")
    assert user.api("GET", "/alert-rules").status_code == 403
    assert user.api("POST", "/machines/anything/cordon", json={}).status_code == 403
    assert admin.api("POST", "/machines/no-such-machine/cordon", json={}).status_code == 404

    # the Alerts page: the rules, the mode, forms that change them; cordon and uncordon a machine
    html = page(admin, "alerts")
    assert 'id="alert-rules-table"' in html and "gpu-ecc-errors" in html
    assert "AlertRules.cordon_dry_run = False" in html
    cpu = rules_by_name(admin)["cpu-busy"]
    html = post(admin, "alerts", action="disable", rule=str(cpu["id"]))
    assert "Alert rule cpu-busy disabled." in html and rules_by_name(admin)["cpu-busy"]["enabled"] is False
    html = post(admin, "alerts", action="change", rule=str(cpu["id"]), threshold="93", percent="60", step="30",
                interval="120")
    assert (rules_by_name(admin)["cpu-busy"]["threshold"], rules_by_name(admin)["cpu-busy"]["step"]) == (93.0, 30)
    html = post(admin, "alerts", action="change", rule=str(cpu["id"]), threshold="120")
    assert "Not done: threshold of a cpu rule is a percent" in html
    post(admin, "alerts", action="enable", rule=str(cpu["id"]))
    machine = admin.ok("GET", "/cluster")["nodes"][0]["name"]
    html = post(admin, "alerts", action="cordon", machine=machine, reason="page test")
    assert f"Machine {machine} cordoned" in html and 'id="cordoned-table"' in html and "page test" in html
    html = post(admin, "alerts", action="uncordon", machine=machine)
    assert "back in scheduling" in html and admin.ok("GET", "/machines/cordoned")["items"] == []
    assert page(user, "alerts", 403)


def overrun_alerts(who, job_id: int) -> list[dict]:
    return [a for a in who.ok("GET", "/alerts")["items"] if a["key"] == f"job:{job_id}:overrun" and a["open"]]


def test_built_in_job_rules_are_managed_with_the_others_and_followed_without_a_restart(ahub):
    admin, user = ahub.admin, ahub.person("overrunner")
    rules = rules_by_name(admin)
    over, wait, idle = rules["job-overrun"], rules["job-wait"], rules["workspace-idle"]
    assert (over["builtin"], over["enabled"], over["threshold"]) == (True, True, 0.0)
    assert (wait["threshold"], idle["enabled"], idle["grace"]) == (60.0, False, 1800)
    # refusals name the field and why (409: the same change suits another rule); nothing changes
    r = admin.api("PATCH", f"/alert-rules/{wait['id']}", json={"op": "<"})
    assert r.status_code == 409 and r.json()["field"] == "op" and "built-in rule job-wait" in r.json()["detail"]
    r = admin.api("PATCH", f"/alert-rules/{over['id']}", json={"cordon": True})
    assert r.status_code == 409 and r.json()["field"] == "cordon"
    r = admin.api("PATCH", f"/alert-rules/{idle['id']}", json={"threshold": 150})
    assert r.status_code == 409 and r.json()["field"] == "threshold" and "percent" in r.json()["detail"]
    r = admin.api("POST", "/alert-rules", json={"name": "wait2", "metric": "job_wait", "op": ">", "threshold": 1})
    assert r.status_code == 409 and r.json()["field"] == "metric" and "built in" in r.json()["detail"]
    r = admin.api("DELETE", f"/alert-rules/{over['id']}")
    assert r.status_code == 409 and "cannot be deleted" in r.json()["detail"]
    assert admin.ti("admin", "alert-rule", "delete", "job-overrun").returncode != 0
    assert rules_by_name(admin)["job-overrun"] == over
    # the CLI changes one; the page lists them in their own table with forms
    out = admin.ti("admin", "alert-rule", "update", "job-wait", "--threshold", "120", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["threshold"] == 120.0, out.stderr
    html = page(admin, "alerts")
    assert 'id="job-rules-table"' in html and "Jobs and workspaces" in html and "workspace-idle" in html
    html = post(admin, "alerts", action="change", rule=str(wait["id"]), builtin="1", threshold="90",
                severity="critical", notify_owners="on")
    assert "Alert rule job-wait changed." in html
    assert (rules_by_name(admin)["job-wait"]["threshold"], rules_by_name(admin)["job-wait"]["severity"]) == \
        (90.0, "critical")
    html = post(admin, "alerts", action="change", rule=str(idle["id"]), builtin="1", threshold="5", interval="0",
                severity="warning")
    assert "Not done: " in html and "interval" in html

    # job-overrun disabled: a job past its declared duration opens no alert
    assert admin.ok("PATCH", f"/alert-rules/{over['id']}", json={"enabled": False})["enabled"] is False
    try:
        j = user.ok("POST", "/jobs", json={"name": "overrun", "plan": "cpu-small", "image": "python-cpu",
                                           "command": "sleep 300", "estimated_duration": 1})
        user.wait_job(j["id"], states=("running",))
        time.sleep(5)  # several overrun checks past the declared second
        assert not overrun_alerts(admin, j["id"])
        assert not [e for e in user.ok("GET", f"/jobs/{j['id']}")["events"] if e["status"] == "alert"]
        # enabled again: it does, to the owner and the admins, with the rule's severity
        admin.ok("PATCH", f"/alert-rules/{over['id']}", json={"enabled": True, "severity": "critical"})
        (a,) = wait_for(lambda: overrun_alerts(user, j["id"]), 30)
        assert (a["rule"], a["severity"], a["users"]) == ("overrun", "critical", [user.name])
        assert [f["alert"] for f in rules_by_name(admin)["job-overrun"]["firing"]] == [a["id"]]
        user.ok("POST", f"/jobs/{j['id']}/kill")
        user.wait_job(j["id"])
        wait_for(lambda: not overrun_alerts(admin, j["id"]), 30)  # the job's end closes it
    finally:
        admin.ok("PATCH", f"/alert-rules/{over['id']}", json={"enabled": True, "severity": "warning"})
        admin.ok("PATCH", f"/alert-rules/{wait['id']}", json={"threshold": 60, "severity": "warning"})


def page(who, name: str, status: int = 200) -> str:
    r = who.browser.get(f"{who.hub.url}/services/ti/{name}", timeout=30)
    assert r.status_code == status, (name, r.status_code, r.text[:500])
    return r.text


def post(who, where: str, /, **fields) -> str:
    """Post one of the page's forms as a browser does, follow the redirect back."""
    token = re.search(r'name="_xsrf" value="([^"]+)"', page(who, where)).group(1)
    r = who.browser.post(f"{who.hub.url}/services/ti/{where}", data={"_xsrf": token, **fields},
                         allow_redirects=False, timeout=30)
    assert r.status_code == 303, (r.status_code, r.text[:500])
    return page(who, where)


def test_a_dry_run_hub_only_reports(tmp_path_factory):
    hub, gen = hub_with_readings(tmp_path_factory, "dryhub", dry_run=True)
    try:
        admin = hub.admin
        rules = quicken(admin)
        write(hub.readings, ecc=5, temp=30.0)
        (fire,) = wait_for(lambda: admin.ok("GET", f"/alert-rules/{rules['gpu-ecc-errors']['id']}")["firing"])
        assert fire["figures"]["cordon"].startswith("would cordon")
        time.sleep(2)
        assert admin.ok("GET", "/machines/cordoned")["items"] == []
        assert all(n["schedulable"] for n in admin.ok("GET", "/cluster")["nodes"])
        assert admin.ok("GET", "/audit", params={"action": "machine"})["items"] == []
    finally:
        next(gen, None)
