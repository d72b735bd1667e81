"""Who sees what of a job (SPEC JOB5), secret environment entries, and workspaces decided by the owner's real
permissions -- the operations against real databases (SQLite, and PostgreSQL with TI_TEST_POSTGRES_URL)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select, text

from ti_hub.domain import scopes as S
from ti_hub.db import models as m
from ti_hub.domain.actor import Actor
from ti_hub.domain.errors import Forbidden, NotFound, TiError, ValidationError
from ti_hub.ops import jobs, queue, secretenv, templates, workspaces

ADMIN = Actor("root1", frozenset(S.ADMIN_SCOPES))
SPAWNER = Actor("ti-spawner", frozenset({S.ADMIT_WORKSPACES}), kind="service")
# a custom role: submits, but may not view others' jobs
LONER = Actor("lone", frozenset({S.SUBMIT, S.VIEW_VC}))
DETAIL_ONLY = {"command", "env", "image", "description", "volumes", "ports", "endpoints", "secret_env_names",
               "placement", "events", "warnings", "exit_code", "started_at", "finished_at"}


def user(name: str) -> Actor:
    return Actor(name, frozenset(S.USER_SCOPES))


def job(name: str, **kw) -> dict:
    return {"name": name, "plan": "cpu-small", "image": "python-cpu", "command": "python train.py",
            "env": {"EPOCHS": "3"}, **kw}


def set_status(db, job_id: int, status: str) -> None:
    with db.begin() as s:
        jobs.record(s, s.get(m.Job, job_id), status, status)


def call(db, fn, *args):
    with db.begin() as s:
        return fn(s, *args)


def refusal(db, fn, *args) -> TiError:
    with pytest.raises(TiError) as err:
        call(db, fn, *args)
    return err.value


@pytest.fixture
def alices(seeded, settings):
    with seeded.begin() as s:
        return jobs.submit(s, user("alice"), job("alice-run"), settings)["id"]


@pytest.mark.parametrize("status", ["queued", "scheduling", "paused"])
def test_others_see_a_summary_of_a_waiting_job(seeded, alices, status):
    if status != "queued":
        set_status(seeded, alices, status)
    out = call(seeded, jobs.show, user("bob"), alices)
    assert out["summary"] is True and out["owner"] == "alice" and out["status"] == status
    assert out["cpu_per_instance"] == 1 and out["memory_mib_per_instance"] == 4096 and out["instances"] == 1
    assert not DETAIL_ONLY & set(out), DETAIL_ONLY & set(out)
    if status == "queued":
        assert out["queue"]["position"] == 1
    # the owner and the admin see it all
    for who in (user("alice"), ADMIN):
        full = call(seeded, jobs.show, who, alices)
        assert full["command"] == "python train.py" and full["env"] == {"EPOCHS": "3"} and full["events"]
        assert "summary" not in full
    # without view-all: not there at all
    assert refusal(seeded, jobs.show, LONER, alices).status == 404


@pytest.mark.parametrize("status", ["running", "pausing", "killing", "completed", "failed", "killed"])
def test_others_never_see_running_or_finished_jobs(seeded, alices, status):
    set_status(seeded, alices, status)
    err = refusal(seeded, jobs.show, user("bob"), alices)
    assert err.status == 404 and err.field == "id"
    assert call(seeded, jobs.list_jobs, user("bob"), {"all": "1"})["total"] == 0
    assert call(seeded, jobs.list_jobs, user("bob"), {"owner": "alice"})["total"] == 0
    assert call(seeded, jobs.show, ADMIN, alices)["command"] == "python train.py"
    assert call(seeded, jobs.list_jobs, ADMIN, {"all": "1"})["items"][0]["env"] == {"EPOCHS": "3"}


def test_detail_routes_refuse_summary_viewers_and_hide_the_rest(seeded, settings, alices):
    for fn in (jobs.log_source, jobs.metrics_source):
        err = refusal(seeded, fn, user("bob"), alices)
        assert err.status == 403 and "summary" in err.detail  # bob may see it waits, not what it prints
        assert refusal(seeded, fn, LONER, alices).status == 404
        assert call(seeded, fn, ADMIN, alices)["id"] == alices
    err = refusal(seeded, jobs.clone, user("bob"), alices, {}, settings)
    assert err.status == 403 and S.MANAGE_ALL_JOBS in err.detail
    assert refusal(seeded, jobs.clone, LONER, alices, {}, settings).status == 404
    assert refusal(seeded, jobs.kill, user("bob"), alices).status == 403
    set_status(seeded, alices, "running")
    for fn in (jobs.log_source, jobs.metrics_source, jobs.kill):
        assert refusal(seeded, fn, user("bob"), alices).status == 404  # not even its existence
    assert refusal(seeded, jobs.clone, user("bob"), alices, {}, settings).status == 404
    # the admin clones it in full (it has no secret entries): the admin owns the clone
    clone = call(seeded, jobs.clone, ADMIN, alices, {"name": "admin-copy"}, settings)
    assert clone["owner"] == "root1" and clone["env"] == {"EPOCHS": "3"}


def test_everyones_queue_lists_others_as_summaries(seeded, settings, alices):
    with seeded.begin() as s:
        mine = jobs.submit(s, user("bob"), job("bob-run"), settings)["id"]
    items = {i["id"]: i for i in call(seeded, queue.queue_view, user("bob"), {"all": "1"})["items"]}
    assert items[alices]["summary"] is True and not DETAIL_ONLY & set(items[alices])
    assert items[alices]["queue"]["position"] >= 1 and items[mine]["command"] == "python train.py"
    assert refusal(seeded, queue.queue_view, LONER, {"all": "1"}).status == 403
    assert all("command" in i for i in call(seeded, queue.queue_view, ADMIN, {"all": "1"})["items"])


def test_jobs_ahead_name_others_only_to_those_who_may_view_them(seeded, settings, alices):
    with seeded.begin() as s:
        lone = jobs.submit(s, LONER, job("lone-run"), settings)["id"]
        for jid, pos in ((alices, 1), (lone, 2)):  # as the scheduler writes them
            s.get(m.Job, jid).queue_position = pos
    ahead = call(seeded, jobs.show, LONER, lone)["queue"]["jobs_ahead"]
    assert ahead == [{"position": 1}]
    with seeded.begin() as s:
        s.get(m.Job, lone).owner = "bob"  # the same queue as seen by a holder of view-all
    ahead = call(seeded, jobs.show, user("bob"), lone)["queue"]["jobs_ahead"]
    assert ahead == [{"id": alices, "name": "alice-run", "owner": "alice", "position": 1}]


SECRET = "hunter2-s3cret-value"


def raw_rows(db) -> str:
    """Every job row as the database holds it."""
    with db.begin() as s:
        return json.dumps([dict(r._mapping) for r in s.execute(text("SELECT * FROM ti_jobs"))], default=str)


def test_secret_entries_are_sealed_listed_by_name_and_opened_only_for_launch(seeded, settings):
    with seeded.begin() as s:
        out = jobs.submit(s, user("alice"), job("with-secret", secret_env={"WANDB_API_KEY": SECRET, "N": 7}),
                          settings)
    assert out["secret_env_names"] == ["N", "WANDB_API_KEY"] and out["env"] == {"EPOCHS": "3"}
    assert SECRET not in json.dumps(out) and SECRET not in raw_rows(seeded)
    for who in (user("alice"), ADMIN):  # nobody reads the value back, not the owner, not an admin
        shown = call(seeded, jobs.show, who, out["id"])
        listed = call(seeded, jobs.list_jobs, who, {"all": "1"} if who is ADMIN else {})
        assert SECRET not in json.dumps(shown) + json.dumps(listed)
        assert shown["secret_env_names"] == ["N", "WANDB_API_KEY"]
    with seeded.begin() as s:
        sealed = s.get(m.Job, out["id"]).spec["secret_env"]
    assert secretenv.unseal(settings.secret_key, sealed) == {"WANDB_API_KEY": SECRET, "N": "7"}
    # the owner's clone carries them still sealed; a resume keeps the row's
    clone = call(seeded, jobs.clone, user("alice"), out["id"], {}, settings)
    assert clone["secret_env_names"] == ["N", "WANDB_API_KEY"] and SECRET not in raw_rows(seeded)
    with seeded.begin() as s:
        assert secretenv.unseal(settings.secret_key, s.get(m.Job, clone["id"]).spec["secret_env"])["N"] == "7"
    call(seeded, jobs.pause, user("alice"), out["id"])
    assert call(seeded, jobs.resume, user("alice"), out["id"], settings)["secret_env_names"] == ["N", "WANDB_API_KEY"]
    # an admin's clone would run alice's secrets under the admin's name: refused
    err = refusal(seeded, jobs.clone, ADMIN, out["id"], {}, settings)
    assert err.status == 403 and "secret" in err.detail
    # another key (the key file replaced) cannot open them: the launch fails with a reason, never with garbage
    from cryptography.fernet import Fernet

    with pytest.raises(secretenv.UnsealError):
        secretenv.unseal(Fernet(Fernet.generate_key()), sealed)


@pytest.mark.parametrize("secret_env,field", [
    ("TOKEN=x", "secret_env"),
    ({"1BAD": "x"}, "secret_env.1BAD"),
    ({"EPOCHS": "x"}, "secret_env.EPOCHS"),  # already a plain entry
    ({"CUDA_VISIBLE_DEVICES": "0"}, "secret_env.CUDA_VISIBLE_DEVICES"),
    ({"TOKEN": ["x"]}, "secret_env.TOKEN"),
])
def test_bad_secret_entries_name_the_field_and_store_nothing(seeded, settings, secret_env, field):
    err = refusal(seeded, jobs.submit, user("alice"), job("bad-secret", secret_env=secret_env), settings)
    assert err.status == 400 and err.field == field, err.detail
    with seeded.begin() as s:
        assert s.scalar(select(m.Job.id)) is None


def test_templates_never_hold_secret_values(seeded, settings):
    err = refusal(seeded, templates.save, user("alice"),
                  {"name": "tpl-secret", "spec": {"command": "x", "secret_env": {"T": "v"}}}, settings)
    assert err.status == 400 and err.field == "spec.secret_env"


def test_workspaces_start_with_the_owners_real_permissions(seeded, settings):
    opts = {"plan": "cpu-small", "image": "python-cpu"}
    # a hub role without submit: refused, naming the permission
    err = refusal(seeded, workspaces.start, SPAWNER, "nosub", "dev-box", [], opts, settings, [S.VIEW_VC])
    assert err.status == 403 and S.SUBMIT in err.detail
    # the spawner must say what the owner may do; only the spawner may say it
    err = refusal(seeded, workspaces.start, SPAWNER, "nosub", "dev-box", [], opts, settings, None)
    assert err.status == 400 and err.field == "scopes"
    err = refusal(seeded, workspaces.start, user("nosub"), "nosub", "dev-box", [], opts, settings, [S.SUBMIT])
    assert err.status == 403 and S.ADMIT_WORKSPACES in err.detail
    # a custom role with submit starts one; only TiHub's permissions pass, never the services' own scopes
    out = call(seeded, workspaces.start, SPAWNER, "custom", "dev-box", [], opts, settings,
               [S.SUBMIT, "read:users:name!user=custom", S.ADMIT_WORKSPACES, S.SSH_GATEWAY])
    assert out["status"] == "queued" and out["owner"] == "custom"
    with seeded.begin() as s:
        actor = workspaces.owner_actor(s, SPAWNER, "custom", [], [S.SUBMIT, S.ADMIT_WORKSPACES, S.SSH_GATEWAY,
                                                                  "self"], settings)
        assert actor.scopes == frozenset({S.SUBMIT})
        with pytest.raises(Forbidden):
            workspaces.owner_actor(s, ADMIN, "custom", [], [S.SUBMIT], settings)
        with pytest.raises(ValidationError):
            workspaces.owner_actor(s, SPAWNER, "custom", [], "custom:ti:jobs:submit", settings)
    with pytest.raises(NotFound):
        call(seeded, workspaces.get, SPAWNER, "nosub", "dev-box")  # the refused start stored nothing
