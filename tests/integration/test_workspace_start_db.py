"""A workspace start in two transactions, as the service runs it: ``workspaces.check_start`` (who, plan, image,
volumes, credential, virtual cluster), read-only and outside TiHub's write lock, then ``workspaces.start`` with
what it found, where name, quota and the insert are decided atomically."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from ti_hub.domain import scopes as S
from ti_hub.db import models as m
from ti_hub.domain.actor import Actor
from ti_hub.domain.errors import Conflict, QuotaExceeded
from ti_hub.ops import images, quotas, volumes, workspaces

ADMIN = Actor("root1", frozenset(S.ADMIN_SCOPES))
SPAWNER = Actor("ti-spawner", frozenset({S.ADMIT_WORKSPACES}), kind="service")
ALICE = Actor("alice", frozenset(S.USER_SCOPES))
WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "SAVEPOINT")


def test_the_checks_of_a_start_only_read_and_the_write_still_decides_name_and_quota(seeded, settings, tmp_path,
                                                                                    statements_during):
    from ti_hub.storage.local import LocalVolumeDriver

    with seeded.begin() as s:
        quotas.set_quota(s, ADMIN, {"user": "alice", "kind": "filesystem", "capacity_gib": 10})
        volumes.create(s, ALICE, {"name": "data", "kind": "filesystem", "capacity_gib": 1},
                       LocalVolumeDriver(root_dir=str(tmp_path), disk_limits="off"), {})
        images.add_credential(s, ALICE, {"name": "my-registry", "registry": "registry.example.com:5000", "username": "al",
                                         "password": "not-shown"}, settings.secret_key)
    options = {"plan": "cpu-small", "image": "python-cpu", "credential": "my-registry",
               "volumes": [{"volume": "data", "mount_path": "/mnt/data"}]}
    found = {}

    def check():
        with seeded.begin() as s:
            found["checked"] = workspaces.check_start(s, SPAWNER, "alice", "desk", [], options, settings,
                                                      scopes=S.USER_SCOPES)

    sent = statements_during(seeded, check)
    assert sent and not [x for x in sent if x in WRITES], sent
    actor, fields = found["checked"]
    assert actor.name == "alice" and fields["spec"]["credential_id"]
    assert [v["mount_path"] for v in fields["spec"]["volumes"]] == ["/mnt/data"]

    with seeded.begin() as s:
        ws = workspaces.start(s, SPAWNER, "alice", "desk", [], options, settings, scopes=S.USER_SCOPES,
                              checked=found["checked"])
    assert ws["status"] == "queued" and ws["queue"]["position"] == 1 and ws["unix_uid"]
    assert ws["name"] == "desk" and ws["jupyter"] is True
    # checked a moment ago, but the name is taken now: the write transaction refuses it, stores nothing
    with pytest.raises(Conflict) as err, seeded.begin() as s:
        workspaces.start(s, SPAWNER, "alice", "desk", [], options, settings, scopes=S.USER_SCOPES,
                         checked=found["checked"])
    assert err.value.field == "name"
    # so is the quota: a limit set between the checks and the write counts
    with seeded.begin() as s:
        checked = workspaces.check_start(s, SPAWNER, "alice", "desk-2", [], options, settings, scopes=S.USER_SCOPES)
    with seeded.begin() as s:
        quotas.set_quota(s, ADMIN, {"user": "alice", "kind": "workspace", "device_type": "cpu", "devices": 0,
                                    "cpu": 1, "memory_mib": 100000})
    with pytest.raises(QuotaExceeded), seeded.begin() as s:
        workspaces.start(s, SPAWNER, "alice", "desk-2", [], options, settings, scopes=S.USER_SCOPES, checked=checked)
    with seeded.begin() as s:
        assert s.scalar(select(func.count()).where(m.Job.owner == "alice")) == 1
