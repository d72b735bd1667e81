"""A job submission in two transactions, as the API runs it: ``jobs.check_submit`` (may submit, the document,
template, image, volumes, sealed secrets, the virtual cluster's access), read-only and outside TiHub's write lock,
then ``jobs.submit`` with what it found, where name, quota and the insert are decided atomically; the queue
position is counted after the commit (``jobs.queue_of``)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from ti_hub.domain import scopes as S
from ti_hub.db import models as m
from ti_hub.domain.actor import Actor
from ti_hub.domain.errors import Conflict, Forbidden, QuotaExceeded
from ti_hub.ops import jobs, quotas, secretenv, vcs, volumes

ADMIN = Actor("root1", frozenset(S.ADMIN_SCOPES))
ALICE = Actor("alice", frozenset(S.USER_SCOPES))
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "SAVEPOINT")


def test_the_checks_of_a_submission_only_read_and_the_write_still_decides_name_and_quota(
        seeded, settings, tmp_path, statements_during):
    from ti_hub.storage.local import LocalVolumeDriver

    with seeded.begin() as s:
        quotas.set_quota(s, ADMIN, {"user": "alice", "kind": "filesystem", "capacity_gib": 10})
        volumes.create(s, ALICE, {"name": "data", "kind": "filesystem", "capacity_gib": 1},
                       LocalVolumeDriver(root_dir=str(tmp_path), disk_limits="off"), {})
    body = {"name": "train", "plan": "cpu-small", "image": "python-cpu", "command": "python train.py",
            "env": {"EPOCHS": "3"}, "secret_env": {"API_KEY": "s3cret-value"},
            "volumes": [{"volume": "data", "mount_path": "/mnt/data"}]}
    found = {}

    def check():
        with seeded.begin() as s:
            found["fields"] = jobs.check_submit(s, ALICE, dict(body), settings)

    sent = statements_during(seeded, check)
    assert sent and not [x for x in sent if x in WRITES], sent
    fields = found["fields"]
    assert fields["spec"][secretenv.FIELD]["API_KEY"] != "s3cret-value"  # sealed already, outside the lock
    assert [v["mount_path"] for v in fields["spec"]["volumes"]] == ["/mnt/data"]

    with seeded.begin() as s:
        out = jobs.submit(s, ALICE, body, settings, checked=dict(fields), position=False)
    assert out["status"] == "queued" and "queue" not in out and out["secret_env_names"] == ["API_KEY"]
    with seeded.begin() as s:  # the API reads it after the commit
        assert jobs.queue_of(s, out["id"]) == {"queue": "default/cpu/single", "position": 1, "ahead": 0,
                                               "estimated_start": None, "pinned": False, "provisional": True}
        assert jobs.queue_of(s, out["id"] + 1000) is None
    # checked a moment ago, but the name is taken now: the write transaction refuses it, stores nothing
    with pytest.raises(Conflict) as err, seeded.begin() as s:
        jobs.submit(s, ALICE, body, settings, checked=dict(fields))
    assert err.value.field == "name"
    # so is the quota: a limit set between the checks and the write counts
    second = {**body, "name": "train-2"}
    with seeded.begin() as s:
        checked = jobs.check_submit(s, ALICE, second, settings)
    with seeded.begin() as s:
        quotas.set_quota(s, ADMIN, {"user": "alice", "kind": "single", "device_type": "cpu", "devices": 0,
                                    "cpu": 1, "memory_mib": 100000})
    with pytest.raises(QuotaExceeded), seeded.begin() as s:
        jobs.submit(s, ALICE, second, settings, checked=checked)
    with seeded.begin() as s:
        assert s.scalar(select(func.count()).select_from(m.Job).where(m.Job.owner == "alice")) == 1
        # a second job waits behind the first: counted after the commit too
        quotas.set_quota(s, ADMIN, {"user": "alice", "kind": "single", "device_type": "cpu", "devices": 0,
                                    "cpu": 8, "memory_mib": 100000})
    with seeded.begin() as s:
        out2 = jobs.submit(s, ALICE, second, settings, position=False)
    with seeded.begin() as s:
        assert jobs.queue_of(s, out2["id"])["position"] == 2


def test_virtual_cluster_access_is_read_without_loading_the_vc(seeded, settings, statements_during):
    """Every submission asks whether its VC lets the caller in: the VC's row, and its grants only when it is
    restricted (a grant to the user or to one of their groups)."""
    with seeded.begin() as s:
        vcs.create(s, ADMIN, {"name": "vc-a"})
        vcs.set_access(s, ADMIN, "vc-a", {"group": "team-a"})
        vcs.create(s, ADMIN, {"name": "vc-open"})

    def check(who: Actor, pool: str):
        with seeded.begin() as s:
            vcs.check_access(s, who, pool)

    sent = statements_during(seeded, lambda: check(Actor("finn", frozenset(S.USER_SCOPES), ("team-a",)), "vc-a"))
    assert sent.count("SELECT") == 2, sent  # the VC's columns, then one grant
    with pytest.raises(Forbidden) as e:
        check(Actor("eve", frozenset(S.USER_SCOPES), ("team-b",)), "vc-a")
    assert "vc-a" in e.value.detail and e.value.field == "plan"
    sent = statements_during(seeded, lambda: check(Actor("eve", frozenset(S.USER_SCOPES)), "vc-open"))
    assert sent.count("SELECT") == 1, sent  # open: no grant to look for
    check(Actor("eve", frozenset(S.USER_SCOPES)), "no-such-vc")  # a pool no VC names is open
    with seeded.begin() as s:
        vcs.set_access(s, ADMIN, "vc-a", {"user": "eve"})
    check(Actor("eve", frozenset(S.USER_SCOPES)), "vc-a")
