"""Job lists with the render cache: byte for byte the uncached answer, never a stale job, bounded."""

from __future__ import annotations

import orjson
import pytest
from sqlalchemy import select

from ti_hub.domain import scopes as S
from ti_hub.db import models as m
from ti_hub.domain.actor import Actor
from ti_hub.domain.errors import Forbidden
from ti_hub.ops import jobs, workspaces
from ti_hub.ops.rendercache import RenderCache

SPAWNER = Actor("ti-spawner", frozenset({S.ADMIT_WORKSPACES}), kind="service")
ADMIN = Actor("root1", frozenset(S.ADMIN_SCOPES))


def user(name: str) -> Actor:
    return Actor(name, frozenset(S.USER_SCOPES))


def job(name: str, **kw) -> dict:
    return {"name": name, "plan": "cpu-small", "image": "python-cpu", "command": "true", **kw}


def listing(db, actor: Actor, args: dict, cache: RenderCache | None) -> bytes:
    with db.begin() as s:
        return orjson.dumps(jobs.list_jobs(s, actor, args, cache=cache))


@pytest.fixture
def history(seeded, settings):
    """carol: jobs in every kind of state; dan: one job."""
    with seeded.begin() as s:
        for i in range(12):
            out = jobs.submit(s, user("carol"), job(f"carol-job-{i:02d}", description=f"run {i}"), settings)
            j = s.get(m.Job, out["id"])
            if i % 4 == 0:
                jobs.record(s, j, "completed", "done")
            elif i % 4 == 1:
                j.exit_code = 3
                jobs.record(s, j, "failed", "exit 3")
            elif i % 4 == 2:
                jobs.kill(s, user("carol"), j.id)
        jobs.submit(s, user("dan"), job("dan-job"), settings)
    return seeded


@pytest.mark.parametrize("args", [
    {}, {"limit": "5"}, {"limit": "5", "offset": "5"}, {"status": "completed,failed"}, {"kind": "single"},
    {"name": "job-0"}, {"limit": "500"},
])
def test_cached_list_is_the_uncached_list(history, args):
    cache = RenderCache()
    plain = listing(history, user("carol"), args, None)
    assert listing(history, user("carol"), args, cache) == plain  # cold: read in full, cached
    assert listing(history, user("carol"), args, cache) == plain  # warm: from the cache
    if orjson.loads(plain)["items"] and "status" not in args:
        assert cache.hits > 0
    assert not any(i["owner"] != "carol" for i in orjson.loads(plain)["items"])


def test_all_jobs_need_the_scope_and_match_uncached(history):
    cache = RenderCache()
    plain = listing(history, ADMIN, {"all": "1"}, None)
    assert orjson.loads(plain)["total"] == 13
    assert listing(history, ADMIN, {"all": "1"}, cache) == plain
    nobody = Actor("eve", frozenset({S.SUBMIT}))
    with pytest.raises(Forbidden), history.begin() as s:
        jobs.list_jobs(s, nobody, {"all": "1"}, cache=cache)


def test_others_get_summaries_of_waiting_jobs_only_never_a_cached_document(history):
    """JOB5: dan (the User role: view-all) lists everyone's: carol's queued jobs as summaries, none of her finished
    ones -- even after carol's own listing filled the cache with their full documents."""
    cache = RenderCache()
    listing(history, user("carol"), {"limit": "500"}, cache)  # warm: carol's finished jobs are cached in full
    plain = listing(history, user("dan"), {"all": "1", "limit": "500"}, None)
    assert listing(history, user("dan"), {"all": "1", "limit": "500"}, cache) == plain
    items = orjson.loads(plain)["items"]
    carols = [i for i in items if i["owner"] == "carol"]
    assert sorted(i["name"] for i in carols) == ["carol-job-03", "carol-job-07", "carol-job-11"]
    for i in carols:
        assert i["summary"] is True and i["status"] == "queued" and i["devices_per_instance"] == 0
        assert not {"command", "env", "image", "description", "volumes", "ports", "endpoints",
                    "secret_env_names", "placement"} & set(i)
    (mine,) = [i for i in items if i["owner"] == "dan"]
    assert mine["command"] == "true" and "summary" not in mine
    # ?owner= is the same rule; the admin (manage-all) sees all of carol's, in full
    assert orjson.loads(listing(history, user("dan"), {"owner": "carol"}, cache))["total"] == 3
    full = orjson.loads(listing(history, ADMIN, {"owner": "carol", "limit": "500"}, cache))["items"]
    assert len(full) == 12 and all("command" in i for i in full)


def test_a_restarted_workspace_is_never_served_from_the_cache(seeded, settings):
    cache = RenderCache()
    opts = {"plan": "cpu-small", "image": "python-cpu"}
    with seeded.begin() as s:
        workspaces.start(s, SPAWNER, "frank", "dev-box", [], opts, settings, scopes=S.USER_SCOPES)
        workspaces.stop(s, SPAWNER, "frank", "dev-box", "stopped by frank")

    def status() -> str:
        (item,) = orjson.loads(listing(seeded, user("frank"), {}, cache))["items"]
        return item["status"]

    assert status() == "stopped" and len(cache) == 1
    assert status() == "stopped" and cache.hits == 1
    with seeded.begin() as s:  # started again with another description: same row, no longer final
        workspaces.start(s, SPAWNER, "frank", "dev-box", [], {**opts, "description": "second life"}, settings,
                         scopes=S.USER_SCOPES)
    assert status() == "queued"
    with seeded.begin() as s:
        workspaces.stop(s, SPAWNER, "frank", "dev-box", "stopped again")
        finished = s.scalar(select(m.Job.finished_at).where(m.Job.owner == "frank"))
    (item,) = orjson.loads(listing(seeded, user("frank"), {}, cache))["items"]
    assert item["status"] == "stopped" and item["description"] == "second life"
    assert item["reason"] == "stopped again" and item["finished_at"].startswith(finished.isoformat()[:19])


def test_cache_is_bounded_and_checks_the_version():
    cache = RenderCache(max_entries=2)
    for i in range(3):
        cache.put(i, ("completed", i), {"id": i})
    assert len(cache) == 2 and cache.get(0, ("completed", 0)) is None  # the oldest went
    assert orjson.dumps([cache.get(2, ("completed", 2))]) == b'[{"id":2}]'
    assert cache.get(2, ("stopped", 2)) is None  # another version of the job: a miss
    off = RenderCache(max_entries=0)
    off.put(1, "k", {"id": 1})
    assert len(off) == 0
