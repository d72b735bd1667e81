"""People in TiHub's database (ops/people.py): profiles, disabled users, work in progress, a group's rename."""

from __future__ import annotations

import pytest

from ti_hub.domain import scopes as S
from ti_hub.db import models as m
from ti_hub.domain.actor import Actor
from ti_hub.domain.errors import Conflict
from ti_hub.ops import people as P

ADMIN = Actor("root1", frozenset(S.ADMIN_SCOPES))


def test_profiles_disable_and_forget(db):
    with db.begin() as s:
        P.record_created(s, ADMIN, [{"name": "ann", "nickname": "Ann", "email": "ann@example.org", "phone": "",
                                     "groups": ["team"]}])
    with db.begin() as s:
        assert not P.is_disabled(s, "ann") and not P.is_disabled(s, "nobody")
        P.set_enabled(s, ADMIN, "ann", False)
    with db.begin() as s:
        assert P.is_disabled(s, "ann") and P.disabled_names(s) == {"ann"}
        assert P.change_profile(s, ADMIN, "ann", {"phone": "123", "nickname": "Ann"})["phone"] == "123"
        P.forget_user(s, ADMIN, "ann")
    with db.begin() as s:
        assert not P.is_disabled(s, "ann") and P.profiles(s) == {}
        actions = [e.action for e in s.query(m.AuditEntry).order_by(m.AuditEntry.id)]
        details = [e.detail for e in s.query(m.AuditEntry).order_by(m.AuditEntry.id)]
    assert actions == ["user.create", "user.disable", "user.change", "user.delete"]
    assert details[2] == {"phone": "123"}  # the nickname did not change


def test_work_in_progress_holds_a_deletion(db):
    import datetime as dt

    now = dt.datetime.now(dt.timezone.utc)
    with db.begin() as s:
        for name, status, kind in (("train1", "running", "single"), ("box1", "queued", "workspace"),
                                   ("old1", "completed", "single")):
            s.add(m.Job(owner="bob", name=name, kind=kind, status=status, device_type="cpu", devices_per_instance=0,
                        cpu_per_instance=1.0, memory_mib_per_instance=512, spec={}, created_at=now))
    with db.begin() as s, pytest.raises(Conflict) as e:
        P.check_no_live_work(s, "bob")
    assert "job train1 (running)" in e.value.detail and "workspace box1 (queued)" in e.value.detail
    assert "old1" not in e.value.detail
    with db.begin() as s:
        P.check_no_live_work(s, "carol")


def test_a_renamed_group_keeps_its_shares_and_team_templates(db):
    import datetime as dt

    now = dt.datetime.now(dt.timezone.utc)
    with db.begin() as s:
        v1 = m.Volume(owner="ann", name="data1", kind="filesystem", capacity_gib=1, created_at=now)
        v2 = m.Volume(owner="ann", name="data2", kind="filesystem", capacity_gib=1, created_at=now)
        s.add_all([v1, v2])
        s.flush()
        s.add_all([m.VolumeShare(volume_id=v1.id, grantee_kind="group", grantee="team-a", mode="ro"),
                   m.VolumeShare(volume_id=v2.id, grantee_kind="group", grantee="team-a", mode="rw"),
                   m.VolumeShare(volume_id=v2.id, grantee_kind="group", grantee="team-b", mode="ro"),
                   m.Template(owner="ann", name="tpl1", scope="team", group="team-a", spec={}, created_at=now),
                   # TiHub's roles follow the group too (ops/grants.py)
                   m.Grant(role="ti-admin", kind="group", principal="team-a", created_at=now)])
    with db.begin() as s:
        moved = P.rename_group_references(s, ADMIN, "team-a", "team-b", 3)
    assert moved == {"volume_shares": 2, "team_templates": 1, "grants": 1}
    with db.begin() as s:
        assert s.query(m.Grant).filter_by(kind="group", principal="team-b").one().role == "ti-admin"
    with db.begin() as s:
        shares = sorted((x.volume_id, x.grantee, x.mode) for x in s.query(m.VolumeShare))
        assert [(g, mode) for _, g, mode in shares] == [("team-b", "ro"), ("team-b", "rw")]  # the wider mode kept
        assert s.query(m.Template).one().group == "team-b"
        assert P.group_references(s, "team-a") == {"volume_shares": 0, "team_templates": 0}
        P.forget_group(s, ADMIN, "team-b", 3)
    with db.begin() as s:
        assert s.query(m.VolumeShare).count() == 0
        assert s.query(m.Grant).filter_by(kind="group", principal="team-b").count() == 0  # gone with the group
