"""Virtual clusters against real databases (RES2): access at submission, the per-user cap at admission under
concurrent submissions, refusals that name the running work a change would strand, drain, rename, delete."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select

from ti_hub.domain import scopes as S
from ti_hub.backends.base import NodeCapacity
from ti_hub.backends.local.slices import split_all
from ti_hub.db import models as m
from ti_hub.domain import states as st
from ti_hub.domain.actor import Actor
from ti_hub.domain.errors import Conflict, Forbidden, NotFound, ValidationError
from ti_hub.ops import jobs, plans, vcdelete, vcs
from ti_hub.ops import queueing

ADMIN = Actor("root1", frozenset(S.ADMIN_SCOPES))
MACHINE = NodeCapacity("n1", "default", {"demo-gpu": [0, 1, 2, 3]}, 16.0, 65536)
NOW = 1_800_000_000.0


def user(name: str, groups=()) -> Actor:
    return Actor(name, frozenset(S.USER_SCOPES), tuple(groups))


def nodes(db) -> list[NodeCapacity]:
    with db.begin() as s:
        return split_all([MACHINE], vcs.assignments(s))


@pytest.fixture
def vc_a(seeded, settings):
    """VC vc-a owning devices 2 and 3 of n1, with a plan of its own."""
    with seeded.begin() as s:
        vcs.create(s, ADMIN, {"name": "vc-a", "caps": {"demo-gpu": 1}})
        vcs.assign(s, ADMIN, "vc-a", {"node": "n1", "device_type": "demo-gpu", "devices": [2, 3]}, [MACHINE])
        plans.create(s, ADMIN, {"name": "a-gpu-1", "kinds": ["single", "workspace"], "device_type": "demo-gpu",
                                "device_count": 1, "cpu": 1, "memory_mib": 1024, "pool": "vc-a"},
                     settings.device_rules)
    settings.nodes = nodes(seeded)
    return seeded


def submit(db, settings, who, name, plan="a-gpu-1", groups=()):
    with db.begin() as s:
        return jobs.submit(s, user(who, groups), {"name": name, "plan": plan, "image": "python-cpu",
                                                  "command": "true"}, settings)["id"]


def decide(db, settings):
    inp = queueing.Inputs(settings.nodes, None, {}, settings.compute_defaults, NOW)
    with db.begin() as s:
        dec = queueing.decide(s, inp)
    with db.begin() as s:
        queueing.apply(s, dec)
    return dec


def job(db, job_id) -> m.Job:
    with db.begin() as s:
        j = s.get(m.Job, job_id)
        s.expunge(j)
        return j


def run(db, job_id):
    with db.begin() as s:
        s.get(m.Job, job_id).status = st.RUNNING


def test_slices_follow_the_assignment(vc_a):
    default, a = nodes(vc_a)
    assert default.devices == {"demo-gpu": [0, 1]} and (a.pool, a.devices) == ("vc-a", {"demo-gpu": [2, 3]})


def test_concurrent_submissions_never_hold_more_than_the_cap(vc_a, settings):
    barrier = threading.Barrier(5)
    ids: list[int] = []

    def go(i):
        barrier.wait()
        ids.append(submit(vc_a, settings, "carol", f"cap-race-{i}"))

    threads = [threading.Thread(target=go, args=(i,)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ids) == 5  # the cap makes jobs wait, it does not refuse them
    for _ in range(3):
        decide(vc_a, settings)
    rows = [job(vc_a, i) for i in ids]
    started = [j for j in rows if j.status == st.SCHEDULING]
    assert len(started) == 1
    assert started[0].placement["instances"][0]["node"].startswith("n1@vc")
    assert started[0].placement["instances"][0]["devices"][0] in (2, 3)
    waiting = [j for j in rows if j.status == st.QUEUED]
    assert waiting and all(j.reason == "cap of 1 demo-gpu in VC vc-a: you hold 1, this job needs 1" for j in waiting)
    other = submit(vc_a, settings, "dora", "dora-job")  # another user is under their own cap
    decide(vc_a, settings)
    assert job(vc_a, other).status == st.SCHEDULING


def test_access_is_checked_at_submission_and_groups_count(vc_a, settings):
    with vc_a.begin() as s:
        vcs.set_access(s, ADMIN, "vc-a", {"group": "team-a"})
    with pytest.raises(Forbidden) as e:
        submit(vc_a, settings, "eve", "eve-job")
    assert "vc-a" in e.value.detail
    assert submit(vc_a, settings, "finn", "finn-job", groups=["team-a"])
    assert submit(vc_a, settings, "eve", "eve-default", plan="demo-gpu-1")  # default stays open to all
    with vc_a.begin() as s:
        assert [p["name"] for p in plans.list_plans(s, user("eve"), settings.nodes)["items"]] == \
            ["cpu-small", "demo-gpu-1"]
        with pytest.raises(Forbidden):
            vcs.use(s, user("eve"), {"vc": "vc-a"})
        assert vcs.use(s, user("finn", ["team-a"]), {"vc": "vc-a"})["vc"] == "vc-a"
        assert [p["name"] for p in plans.list_plans(s, user("finn", ["team-a"]), settings.nodes)["items"]] == \
            ["a-gpu-1"]


def test_revoking_a_user_with_running_work_is_refused_unless_drained(vc_a, settings):
    with vc_a.begin() as s:
        vcs.set_access(s, ADMIN, "vc-a", {"user": "gus"})
    running = submit(vc_a, settings, "gus", "gus-run")
    decide(vc_a, settings)
    run(vc_a, running)
    queued = submit(vc_a, settings, "gus", "gus-next")
    with pytest.raises(Conflict) as e, vc_a.begin() as s:
        vcs.set_access(s, ADMIN, "vc-a", {"user": "gus", "remove": True})
    assert "gus/gus-run" in e.value.detail and e.value.extra["holders"]
    with vc_a.begin() as s:
        vcs.set_access(s, ADMIN, "vc-a", {"user": "gus", "remove": True, "drain": True})
    decide(vc_a, settings)
    assert job(vc_a, running).status == st.RUNNING
    assert job(vc_a, queued).reason.startswith("access to VC vc-a was revoked")
    with pytest.raises(Forbidden):
        submit(vc_a, settings, "gus", "gus-more")


def test_taking_away_a_device_in_use_is_refused_unless_drained_and_moves_when_free(vc_a, settings):
    first = submit(vc_a, settings, "hana", "hana-run")
    decide(vc_a, settings)
    run(vc_a, first)
    dev = job(vc_a, first).placement["instances"][0]["devices"][0]
    body = {"node": "n1", "device_type": "demo-gpu", "devices": [dev], "remove": True}
    with pytest.raises(Conflict) as e, vc_a.begin() as s:
        vcs.assign(s, ADMIN, "vc-a", body, settings.nodes)
    assert "hana/hana-run" in e.value.detail
    with vc_a.begin() as s:
        out = vcs.assign(s, ADMIN, "vc-a", {**body, "drain": True}, settings.nodes)
    assert out["moved"][0]["draining"] is True
    default, a = nodes(vc_a)
    assert dev not in a.devices.get("demo-gpu", []) and dev not in default.devices["demo-gpu"]
    with vc_a.begin() as s:  # given back before it drained: it stays, placements there again
        again = vcs.assign(s, ADMIN, "vc-a", {"node": "n1", "device_type": "demo-gpu", "devices": [dev]},
                           settings.nodes)
        assert again["moved"][0]["to"] == "vc-a" and not any(x["draining"] for x in again["machines"])
    assert dev in nodes(vc_a)[1].devices["demo-gpu"]
    with vc_a.begin() as s:
        vcs.assign(s, ADMIN, "vc-a", {**body, "drain": True}, settings.nodes)
    with vc_a.begin() as s:
        assert vcs.settle(s) == []  # still running
        s.get(m.Job, first).status = st.COMPLETED
    with vc_a.begin() as s:
        assert vcs.settle(s) == [("n1", dev, "default")]
    default, a = nodes(vc_a)
    assert dev in default.devices["demo-gpu"]


def test_lowering_a_cap_under_use_is_refused_unless_drained(vc_a, settings):
    with vc_a.begin() as s:
        vcs.change(s, ADMIN, "vc-a", {"caps": {"demo-gpu": 2}})
    ids = [submit(vc_a, settings, "ivan", f"ivan-{i}") for i in range(2)]
    decide(vc_a, settings)
    assert all(job(vc_a, i).status == st.SCHEDULING for i in ids)
    with pytest.raises(Conflict) as e, vc_a.begin() as s:
        vcs.change(s, ADMIN, "vc-a", {"caps": {"demo-gpu": 1}})
    assert "ivan/ivan-0" in e.value.detail
    with vc_a.begin() as s:
        assert vcs.change(s, ADMIN, "vc-a", {"caps": {"demo-gpu": 1}, "drain": True})["caps"] == {"demo-gpu": 1}
        assert vcs.change(s, ADMIN, "vc-a", {"caps": {"demo-gpu": None}})["caps"] == {}


def test_rename_moves_plans_and_jobs_and_delete_only_when_empty(vc_a, settings):
    j = submit(vc_a, settings, "jo", "jo-job")
    with vc_a.begin() as s:
        vcs.change(s, ADMIN, "vc-a", {"name": "vc-renamed"})
        assert s.scalar(select(m.Plan.pool).where(m.Plan.name == "a-gpu-1")) == "vc-renamed"
        assert s.get(m.Job, j).pool == "vc-renamed"
        assert [e.action for e in s.scalars(select(m.AuditEntry).order_by(m.AuditEntry.id))][-1] == "vc.rename"
    with pytest.raises(Conflict) as e, vc_a.begin() as s:
        vcdelete.delete(s, ADMIN, "vc-renamed")
    assert "machine" in e.value.detail and "active job" in e.value.detail and "a-gpu-1" in e.value.detail
    with vc_a.begin() as s:
        jobs.kill(s, ADMIN, j)
        s.get(m.Job, j).status = st.KILLED
        s.delete(s.scalar(select(m.Plan).where(m.Plan.name == "a-gpu-1")))
        vcs.assign(s, ADMIN, "vc-renamed", {"node": "n1", "device_type": "demo-gpu", "remove": True,
                                            "devices": [2, 3]}, settings.nodes)
    with vc_a.begin() as s:
        vcdelete.delete(s, ADMIN, "vc-renamed")
        with pytest.raises(NotFound):
            vcs.get(s, "vc-renamed")


BAD = [({"name": "x"}, "name"), ({"name": "-vc-bad"}, "name"), ({"name": "vc-bad_"}, "name"),
       ({"name": "vc-bad", "caps": {"demo-gpu": -1}}, "caps.demo-gpu"),
       ({"name": "vc-bad", "caps": {"cpu": 1}}, "caps.cpu"), ({"name": "vc-bad", "caps": []}, "caps"),
       ({"name": "vc-bad", "color": "red"}, "color")]


@pytest.mark.parametrize("body,field", BAD)
def test_bad_input_names_the_field_and_stores_nothing(seeded, body, field):
    with pytest.raises(ValidationError) as e, seeded.begin() as s:
        vcs.create(s, ADMIN, body)
    assert e.value.field == field
    with seeded.begin() as s:
        assert [x.name for x in s.scalars(select(m.VirtualCluster))] == ["default"]


def test_default_cannot_be_renamed_deleted_or_closed_and_users_cannot_manage(seeded):
    with seeded.begin() as s:
        for call in (lambda: vcs.change(s, ADMIN, "default", {"name": "other-name"}),
                     lambda: vcdelete.delete(s, ADMIN, "default"),
                     lambda: vcs.set_access(s, ADMIN, "default", {"user": "x1234"})):
            with pytest.raises(Conflict):  # what default is decides: 409
                call()
        with pytest.raises(Forbidden):
            vcs.create(s, user("mallory"), {"name": "vc-mine"})


def test_the_spawn_forms_vc_becomes_current_and_must_match_the_plan(vc_a, settings):
    from ti_hub.ops import workspaces

    spawner = Actor("ti-spawner", frozenset({S.ADMIT_WORKSPACES}), kind="service")
    with vc_a.begin() as s:
        choices = workspaces.form_options(s, spawner, "kim", [], settings, S.USER_SCOPES)
        assert choices["vc"] == {"vc": "default", "usable": ["default", "vc-a"]}
        assert "a-gpu-1" in [p["name"] for p in choices["plans"]]
    with pytest.raises(ValidationError) as e, vc_a.begin() as s:
        workspaces.start(s, spawner, "kim", "ws-one", [], {"plan": "demo-gpu-1", "vc": "vc-a"}, settings,
                         S.USER_SCOPES)
    assert e.value.field == "plan" and "vc-a" in e.value.detail
    with vc_a.begin() as s:
        workspaces.start(s, spawner, "kim", "ws-one", [], {"plan": "a-gpu-1", "vc": "vc-a"}, settings,
                         S.USER_SCOPES)
        assert vcs.current(s, user("kim"))["vc"] == "vc-a"


def test_lending_in_a_cohort_places_on_the_lenders_slice_and_is_audited(vc_a, settings):
    ids = [submit(vc_a, settings, who, f"{who}-lend") for who in ("hana", "iris", "jun")]
    decide(vc_a, settings)
    assert [job(vc_a, i).status for i in ids] == [st.SCHEDULING, st.SCHEDULING, st.QUEUED]  # vc-a has 2 devices
    with vc_a.begin() as s:
        vcs.change(s, ADMIN, "vc-a", {"cohort": "pair"})
        vcs.change(s, ADMIN, "default", {"cohort": "pair"})
        assert vcs.lending_rules(s) == ({"vc-a": "pair", "default": "pair"}, set())
        acts = s.execute(select(m.AuditEntry.action, m.AuditEntry.target, m.AuditEntry.detail)
                         .where(m.AuditEntry.action == "vc.change")).all()
        assert {(a, t, d["cohort"]) for a, t, d in acts} == {("vc.change", "vc-a", "pair"),
                                                             ("vc.change", "default", "pair")}
    decide(vc_a, settings)
    third = job(vc_a, ids[2])
    assert third.status == st.SCHEDULING and third.placement["lent_by"] == "default"
    assert third.placement["instances"][0]["node"] == "n1"  # default's slice keeps the machine's name
    with vc_a.begin() as s:
        msgs = [e.message for e in s.scalars(select(m.JobEvent).where(m.JobEvent.job_id == ids[2]))]
    assert any("running on lent devices of VC default" in x for x in msgs), msgs
    with pytest.raises(ValidationError) as e, vc_a.begin() as s:
        vcs.change(s, ADMIN, "vc-a", {"lend": "sometimes"})
    assert e.value.field == "lend"
