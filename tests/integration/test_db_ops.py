"""Operations against real databases: validation stores nothing, quotas are atomic, mount rules hold."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, select

from ti_hub.domain import scopes as S
from ti_hub.db import models as m
from ti_hub.domain.actor import Actor
from ti_hub.domain.errors import Conflict, NotFound, QuotaExceeded, TiError, ValidationError
from ti_hub.ops import jobs, plans, quotas, templates, volumes, workspaces

ADMIN = Actor("root1", frozenset(S.ADMIN_SCOPES))
SPAWNER = Actor("ti-spawner", frozenset({S.ADMIT_WORKSPACES}), kind="service")


def user(name: str, groups=()) -> Actor:
    return Actor(name, frozenset(S.USER_SCOPES), tuple(groups))


def job(job_name: str, **kw) -> dict:
    return {"name": job_name, "plan": "demo-gpu-1", "image": "python-cpu", "command": "true", **kw}


def count_jobs(db) -> int:
    with db.begin() as s:
        return s.scalar(select(func.count()).select_from(m.Job))


BAD_SUBMISSIONS = [
    ({"name": "ab"}, "name"),
    ({"name": "bad name!"}, "name"),
    ({"name": "x" * 64}, "name"),
    ({"ports": [80]}, "ports"),
    ({"ports": "40000,abc"}, "ports"),
    ({"ports": [40001, 40001]}, "ports"),
    ({"env": {"1BAD": "x"}}, "env.1BAD"),
    ({"env": {"CUDA_VISIBLE_DEVICES": "0"}}, "env.CUDA_VISIBLE_DEVICES"),
    ({"command": ""}, "command"),
    ({"command": "echo \x00"}, "command"),
    ({"command": "x" * (64 * 1024 + 1)}, "command"),
    ({"kind": "distributed", "workers": 1}, "workers"),
    ({"kind": "distributed", "workers": 65}, "workers"),
    ({"kind": "distributed", "workers": True}, "workers"),
    ({"kind": "distributed", "strategy": "ps", "ps": 0, "workers": 2}, "ps"),
    ({"kind": "distributed", "workers": 2.5}, "workers"),
    ({"kind": "single", "workers": 4}, "workers"),
    ({"kind": "quantum"}, "kind"),
    ({"unknown": 1}, "unknown"),
    ({"plan": "no-such-plan"}, "plan"),
    ({"image": "Not An Image!"}, "image"),
    ({"estimated_duration": float("nan")}, "estimated_duration"),
    ({"estimated_duration": 10**30}, "estimated_duration"),
    ({"priority": 5}, "priority"),
    ({"endpoints": ["notebook"]}, "endpoints"),
    ({"endpoints": "ssh,notebook"}, "endpoints"),
    ({"endpoints": ["jupyter"], "ports": list(range(40000, 40032))}, "endpoints"),  # its port makes 33
    ({"volumes": [{"volume": "nope", "mount_path": "/mnt/x"}]}, "volumes[0].volume"),
    # ids past the databases' range were a 500 (OverflowError in the SQLite driver), not a refusal
    ({"plan": 2**64}, "plan"),
    ({"plan": -1}, "plan"),
    ({"plan": "\u00b2"}, "plan"),  # '²'.isdigit() is true; int('²') raised
    ({"volumes": [{"volume": 2**70, "mount_path": "/mnt/x"}]}, "volumes[0].volume"),
    ({"credential": 2**64}, "credential"),
    ({"template": 2**63}, "template"),
    ({"name": "good-name\n"}, "name"),  # Python's $ matched before a final newline
    ({"volumes": [{"volume": "nope", "mount_path": "/mnt/x\n"}]}, "volumes[0].volume"),
]


@pytest.mark.parametrize("patch,field", BAD_SUBMISSIONS)
def test_bad_submissions_name_the_field_and_store_nothing(seeded, settings, patch, field):
    with pytest.raises(TiError) as err:
        with seeded.begin() as s:
            jobs.submit(s, user("alice"), job("good-name", **patch), settings)
    assert err.value.status in (400, 403, 404)
    assert err.value.field == field, err.value.detail
    assert count_jobs(seeded) == 0


@pytest.mark.parametrize("ref,error", [("\u00b2", ValidationError), ("9" * 20, NotFound), (2**64, ValidationError),
                                       (0, ValidationError), ("0", NotFound), ("bad name!", ValidationError)])
def test_job_references_outside_the_id_range_are_refused_not_crashed(seeded, ref, error):
    # digits that are no id name no job (404: the API document allows them in a URL); other numbers are bad input
    with pytest.raises(error) as err, seeded.begin() as s:
        jobs.show(s, user("alice"), ref)
    assert err.value.field == "id"


BAD_TEMPLATES = [
    ({"plan": "no-such-plan"}, "spec.plan"),
    ({"kind": "distributed", "workers": -5}, "spec.workers"),
    ({"kind": "distributed", "plan": "demo-gpu-1", "workers": 1000}, "spec.workers"),
    ({"workers": 4}, "spec.workers"),  # a single-node job has one worker
    ({"ports": [80]}, "spec.ports"),
    ({"env": {"CUDA_VISIBLE_DEVICES": "0"}}, "spec.env.CUDA_VISIBLE_DEVICES"),
    ({"image": "Not An Image!"}, "spec.image"),
    ({"command": ""}, "spec.command"),
    ({"volumes": [{"volume": "nope", "mount_path": "/mnt/x"}]}, "spec.volumes[0].volume"),
    ({"credential": "nope"}, "spec.credential"),
    ({"estimated_duration": -1}, "spec.estimated_duration"),
    ({"plan": 2**64}, "spec.plan"),
    ({"priority": 5}, "spec.priority"),
]


@pytest.mark.parametrize("spec,field", BAD_TEMPLATES)
def test_templates_are_checked_as_submissions_and_store_nothing(seeded, settings, spec, field):
    with pytest.raises(TiError) as err, seeded.begin() as s:
        templates.save(s, user("alice"), {"name": "my-template", "spec": spec}, settings)
    assert err.value.status in (400, 403, 404) and err.value.field == field, err.value.detail
    with seeded.begin() as s:
        assert s.scalar(select(func.count()).select_from(m.Template)) == 0


def test_a_template_may_leave_out_what_the_submission_gives(seeded, settings):
    with seeded.begin() as s:
        templates.save(s, user("alice"), {"name": "tpl-plan", "spec": {"plan": "demo-gpu-1", "env": {"A": "1"}}},
                       settings)
        templates.save(s, user("alice"), {"name": "tpl-cmd", "spec": {"name": "x", "command": "python t.py"}},
                       settings)
    with seeded.begin() as s:
        out = jobs.submit(s, user("alice"), {"name": "from-template", "template": "tpl-plan", "image": "python-cpu",
                                             "command": "true"}, settings)
    assert out["env"] == {"A": "1"} and out["plan_id"] is not None


def test_device_count_rules_per_device_type(seeded, settings):
    with seeded.begin() as s:
        with pytest.raises(ValidationError) as err:
            plans.create(s, ADMIN, {"name": "npu-3", "kinds": ["single"], "device_type": "npu", "device_count": 3,
                                    "cpu": 1, "memory_mib": 1024}, settings.device_rules)
    assert err.value.field == "device_count" and "0, 1, 2, 4, 8" in err.value.detail
    with seeded.begin() as s:
        assert plans.create(s, ADMIN, {"name": "npu-4", "kinds": ["single"], "device_type": "npu",
                                       "device_count": 4, "cpu": 1, "memory_mib": 1024}, settings.device_rules)


def test_names_are_unique_per_user_across_jobs_and_workspaces(seeded, settings):
    with seeded.begin() as s:
        jobs.submit(s, user("alice"), job("shared-name"), settings)
    with pytest.raises(Conflict) as err, seeded.begin() as s:  # job after job
        jobs.submit(s, user("alice"), job("shared-name"), settings)
    assert err.value.field == "name"
    ws = {"plan": "cpu-small", "image": "python-cpu"}
    with pytest.raises(Conflict) as err, seeded.begin() as s:  # a workspace named like a job of hers
        workspaces.start(s, SPAWNER, "alice", "shared-name", [], ws, settings, scopes=S.USER_SCOPES)
    assert err.value.field == "name" and "training job" in err.value.detail
    with seeded.begin() as s:
        workspaces.start(s, SPAWNER, "alice", "her-desk", [], ws, settings, scopes=S.USER_SCOPES)
    with pytest.raises(Conflict) as err, seeded.begin() as s:  # a job named like a workspace of hers
        jobs.submit(s, user("alice"), job("her-desk"), settings)
    assert err.value.field == "name"
    with seeded.begin() as s:  # another user may use both names
        jobs.submit(s, user("bob"), job("shared-name"), settings)
        jobs.submit(s, user("bob"), job("her-desk"), settings)
        assert s.scalar(select(func.count()).where(m.Job.name.in_(("shared-name", "her-desk")))) == 4


def test_quota_error_names_resource_request_usage_and_limit(seeded, settings):
    with seeded.begin() as s:
        quotas.set_quota(s, ADMIN, {"user": "alice", "kind": "single", "device_type": "demo-gpu", "devices": 1,
                                    "cpu": 10, "memory_mib": 100000})
        jobs.submit(s, user("alice"), job("first-job"), settings)
    with pytest.raises(QuotaExceeded) as err, seeded.begin() as s:
        jobs.submit(s, user("alice"), job("second-job"), settings)
    e = err.value.to_json()
    assert (e["requested"], e["used"], e["limit"]) == (1, 1, 1)
    assert "demo-gpu devices" in e["detail"] and e["resource"] == "single/demo-gpu/devices"


def test_racing_submissions_for_the_last_quota_never_both_succeed(seeded, settings):
    with seeded.begin() as s:
        quotas.set_quota(s, ADMIN, {"user": "carol", "kind": "single", "device_type": "demo-gpu", "devices": 1,
                                    "cpu": 10, "memory_mib": 100000})
    barrier = threading.Barrier(6)
    results: list[str] = []

    def submit(i: int):
        barrier.wait()
        try:
            with seeded.begin() as s:
                jobs.submit(s, user("carol"), job(f"race-job-{i}"), settings)
            results.append("ok")
        except QuotaExceeded:
            results.append("quota")
        except Exception as e:  # a serialization failure is a refusal too, never a double grant
            results.append(type(e).__name__)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("ok") == 1, results
    assert count_jobs(seeded) == 1


def test_lowering_a_quota_never_stops_running_work(seeded, settings):
    with seeded.begin() as s:
        out = jobs.submit(s, user("dave"), job("keeps-running"), settings)
        s.get(m.Job, out["id"]).status = "running"
    with seeded.begin() as s:
        quotas.set_quota(s, ADMIN, {"user": "dave", "kind": "single", "device_type": "demo-gpu", "devices": 0,
                                    "cpu": 0, "memory_mib": 0})
    with seeded.begin() as s:
        assert s.get(m.Job, out["id"]).status == "running"
        with pytest.raises(QuotaExceeded):
            jobs.submit(s, user("dave"), job("refused-now"), settings)


def test_finished_jobs_release_quota_at_once(seeded, settings):
    with seeded.begin() as s:
        out = jobs.submit(s, user("erin"), job("short-job", kind="distributed", workers=2), settings)
        used = quotas.compute_usage(s, "erin", "distributed", "demo-gpu")
        assert used.devices == 2
        j = s.get(m.Job, out["id"])
        jobs.record(s, j, "completed", "done")
    with seeded.begin() as s:
        assert quotas.compute_usage(s, "erin", "distributed", "demo-gpu").devices == 0


def test_storage_quota_and_sharing_rules(seeded, settings, tmp_path):
    from ti_hub.storage.local import LocalVolumeDriver

    driver = LocalVolumeDriver(root_dir=str(tmp_path), disk_limits="off")
    alice, bob = user("alice"), user("bob", groups=["team-a"])
    with seeded.begin() as s:
        quotas.set_quota(s, ADMIN, {"user": "alice", "kind": "block", "capacity_gib": 10})
        volumes.create(s, alice, {"name": "blockvol", "kind": "block", "capacity_gib": 8}, driver, {})
    with pytest.raises(QuotaExceeded), seeded.begin() as s:
        volumes.create(s, alice, {"name": "blockvol2", "kind": "block", "capacity_gib": 3}, driver, {})
    with seeded.begin() as s:
        assert s.scalar(select(func.count()).select_from(m.Volume)) == 1
        # bob cannot see it until it is shared, then only read-only
        with pytest.raises(TiError):
            volumes.find(s, bob, "alice/blockvol")
        volumes.share(s, alice, "blockvol", {"group": "team-a", "mode": "ro"})
        vol = volumes.find(s, bob, "alice/blockvol")
        assert volumes.access_mode(vol, bob) == "ro"
    with pytest.raises(Conflict) as err, seeded.begin() as s:  # how it is shared decides: 409
        jobs.submit(s, bob, job("writes-shared", volumes=[{"volume": "alice/blockvol", "mount_path": "/mnt/b",
                                                           "read_only": False}]), settings)
    assert "read-only" in err.value.detail
    with pytest.raises(ValidationError) as err, seeded.begin() as s:
        jobs.submit(s, alice, job("escape-path", volumes=[{"volume": "blockvol", "mount_path": "/mnt/../etc"}]),
                    settings)
    assert err.value.field == "volumes[0].mount_path"
    with pytest.raises(Conflict) as err, seeded.begin() as s:
        jobs.submit(s, alice, job("two-writers", kind="distributed", workers=2,
                                  volumes=[{"volume": "blockvol", "mount_path": "/mnt/b"}]), settings)
    assert "one instance" in err.value.detail


def test_block_volume_mount_conflict_names_the_holder():
    from ti_hub.domain.mounts import HeldMount, MountRequest, check_conflicts

    rw = MountRequest(7, "alice/blockvol", "block", False)
    ro = MountRequest(7, "alice/blockvol", "block", True)
    check_conflicts([ro], [HeldMount(7, True, "job 3 (bob/reader)")])  # many readers are fine
    with pytest.raises(Conflict) as err:
        check_conflicts([rw], [HeldMount(7, True, "job 3 (bob/reader)")])
    assert "job 3 (bob/reader)" in err.value.detail
    with pytest.raises(Conflict):
        check_conflicts([ro], [HeldMount(7, False, "workspace alice/dev")])
    # filesystem volumes are shared read-write by many
    check_conflicts([MountRequest(8, "a/fs", "filesystem", False)], [HeldMount(8, False, "job 1")])


def test_a_volume_of_a_cluster_places_the_work_that_mounts_it(seeded, settings, tmp_path):
    """Issue 17, item 6 / SPEC Q9: a job or workspace that mounts a cluster's storage runs in that pool; a plan of
    another pool is refused naming the volume; a cluster no plan runs in is refused at creation."""
    from ti_hub.backends.base import NodeCapacity
    from ti_hub.ops import jobspec
    from ti_hub.storage.local import LocalVolumeDriver

    driver = LocalVolumeDriver(root_dir=str(tmp_path), disk_limits="off")
    settings.nodes.append(NodeCapacity("farm1", "farm", {}, 8.0, 16384))
    alice = user("alice")
    with seeded.begin() as s:
        plans.create(s, ADMIN, {"name": "farm-cpu", "kinds": ["single", "workspace"], "device_type": "cpu",
                                "device_count": 0, "cpu": 1, "memory_mib": 1024, "pool": "farm"},
                     settings.device_rules)
    with pytest.raises(NotFound) as err, seeded.begin() as s:  # no such pool: 404
        volumes.create(s, alice, {"name": "nowhere-vol", "kind": "block", "capacity_gib": 1, "cluster": "mars"},
                       driver, {"block": 10})
    assert err.value.field == "cluster" and "default, farm" in err.value.detail
    with seeded.begin() as s:
        assert volumes.create(s, alice, {"name": "farm-data", "kind": "block", "capacity_gib": 1, "cluster": "farm"},
                              driver, {"block": 10})["cluster"] == "farm"
        assert volumes.create(s, alice, {"name": "any-data", "kind": "block", "capacity_gib": 1}, driver,
                              {"block": 10})["cluster"] == ""
    mount = [{"volume": "any-data"}, {"volume": "farm-data"}]
    with pytest.raises(Conflict) as err, seeded.begin() as s:  # where the volume lives decides: 409
        jobs.submit(s, alice, job("wrong-pool", volumes=mount), settings)
    assert err.value.field == "volumes[1].volume", err.value.field
    assert "alice/farm-data" in err.value.detail and "pool 'farm'" in err.value.detail
    with pytest.raises(Conflict) as err, seeded.begin() as s:
        jobspec.parse_workspace(s, alice, {"name": "ws-wrong", "plan": "cpu-small", "volumes": mount}, settings)
    assert err.value.field == "volumes[1].volume"
    with seeded.begin() as s:
        placed = jobs.submit(s, alice, job("right-pool", plan="farm-cpu", volumes=mount), settings)
    assert placed["pool"] == "farm" and placed["status"] == "queued"


def test_the_jupyter_endpoint_gets_a_port_and_a_sealed_token_of_its_own(seeded, settings):
    from ti_hub.ops import secretenv

    alice = user("alice")
    with seeded.begin() as s:
        out = jobs.submit(s, alice, job("jupyter-job", endpoints=["ssh", "jupyter"], ports=[40001]), settings)
        rec = s.get(m.Job, out["id"]).spec["jupyter"]
    port = out["jupyter_port"]
    assert port == rec["port"] and 40000 <= port <= 49999 and port != 40001
    assert out["ports"] == [40001, port] and out["endpoints"] == ["jupyter", "ssh"]
    assert len(secretenv.unseal(settings.secret_key, {"t": rec["token"]})["t"]) >= 32
    assert rec["token"] not in str(out)  # the API never shows it, not even sealed
    with seeded.begin() as s:  # a clone declares the user's ports only, and gets a jupyter port of its own
        clone = jobs.clone(s, alice, out["id"], {}, settings)
    assert clone["ports"][0] == 40001 and len(clone["ports"]) == 2 and clone["jupyter_port"] == clone["ports"][1]
