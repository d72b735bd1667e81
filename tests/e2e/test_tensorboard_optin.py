"""JOB2/JOB6: TensorBoard is an endpoint a job asks for (`endpoints: ["tensorboard"]`, `--endpoint tensorboard`, the
form's checkbox); a job that did not ask gets none, even with a volume holding logs (issue 31)."""

from __future__ import annotations

import pytest
import requests

pytestmark = pytest.mark.e2e

LOGS = "mkdir -p /mnt/out/tb && echo x > /mnt/out/tb/marker && sleep 300"


@pytest.fixture(scope="module")
def tbhub(hub):
    """The session's hub: a volume and jobs of this module's own user, killed at the end (a hub of its own cost a
    start and a stop)."""
    return hub


def submit(user, name: str, **kw) -> dict:
    return user.ok("POST", "/jobs", json={"name": name, "plan": "cpu-small", "image": "python-cpu", "command": LOGS,
                                          "volumes": [{"volume": "tb-optin", "mount_path": "/mnt/out"}], **kw})


def test_tensorboard_only_for_jobs_that_ask_for_it(tbhub):
    user = tbhub.person("tboptin")
    user.ok("POST", "/volumes", json={"name": "tb-optin", "kind": "filesystem", "capacity_gib": 1})
    plain = submit(user, "no-tb")
    asked = submit(user, "with-tb", endpoints=["tensorboard"])
    try:
        assert plain["endpoints"] == [] and asked["endpoints"] == ["tensorboard"]
        user.wait_job(plain["id"], states=("running",))
        user.wait_job(asked["id"], states=("running",))

        # not asked for: refused (409 naming endpoints, saying how to ask), and nothing runs for it
        r = user.api("POST", f"/jobs/{plain['id']}/tensorboard", json={"logdir": "/mnt/out/tb"})
        assert r.status_code == 409 and r.json()["field"] == "endpoints", r.text
        assert "--endpoint tensorboard" in r.json()["detail"]
        assert user.ok("GET", f"/jobs/{plain['id']}/tensorboard")["items"] == []
        assert user.ok("GET", f"/jobs/{plain['id']}")["tensorboards"] == []
        # the CLI says the same and fails
        cli = user.ti("job", "tensorboard", "no-tb", "--logdir", "/mnt/out/tb")
        assert cli.returncode != 0 and "tensorboard endpoint" in cli.stderr and "(field: endpoints)" in cli.stderr, \
            cli.stderr

        # asked for: it starts, and its URL answers the owner
        r = user.api("POST", f"/jobs/{asked['id']}/tensorboard", json={"logdir": "/mnt/out/tb"})
        assert r.status_code == 201, r.text
        tb = r.json()
        page = requests.get(tbhub.url + tb["url"], headers={"Authorization": f"token {user.token}"}, timeout=60)
        assert page.status_code == 200 and "<html" in page.text.lower()
        assert [t["url"] for t in user.ok("GET", f"/jobs/{asked['id']}")["tensorboards"]] == [tb["url"]]
        # a clone keeps what the job asked for
        clone = user.ok("POST", f"/jobs/{asked['id']}/clone", json={"name": "with-tb-2"})
        assert clone["endpoints"] == ["tensorboard"]
        user.api("POST", f"/jobs/{clone['id']}/kill")
    finally:
        user.api("DELETE", f"/jobs/{asked['id']}/tensorboard")
        for j in (plain, asked):
            user.api("POST", f"/jobs/{j['id']}/kill")
