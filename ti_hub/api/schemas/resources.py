"""Schemas of plans (RES1), quotas (RES3), volumes (STO1-STO7) and the cluster's status."""

from __future__ import annotations

from ...domain import states as st
from ...domain import validation as v
from ...ops.quotas import STORAGE_KINDS
from ...ops.volumes import MAX_GIB
from ..contract import Param
from .common import (BOOL, COUNT, ID, INT, MAYBE_TIME, NAME, NUM, STR, TEXT, TIME, USERNAME, answer, array, enum,
                     exactly_one, flag, integer, limited, nullable, number, obj, page, page_of, ref, string, text,
                     VC_FILTER)

# -- plans -----------------------------------------------------------------------------------------------
PLAN_FIELDS = {
    "name": NAME, "description": TEXT, "kinds": array(enum(st.KINDS), minItems=1),
    "device_type": text(63, True, "cpu, or a device type (a GPU model, an NPU type)"),
    "device_count": integer(0, 64, "devices per instance (some device types accept only some counts)"),
    "cpu": number(0.1, 1024, "CPU cores"), "memory_mib": integer(64, 16 * 1024 * 1024),
    "shm_mib": integer(0, 1024 * 1024), "rdma": BOOL, "pool": NAME,
}
CPU_ONLY = {"properties": {"device_count": integer(0, 0, "a CPU-only plan has no devices")}}
WITH_DEVICES = {"properties": {"device_count": integer(1, 64, "a device plan has 1 or more devices per instance")}}
NOT_CPU = {"properties": {"device_type": {"not": {"const": "cpu"}}}, "required": ["device_type"]}
# a new plan without a device_type is CPU-only; a change without one keeps the plan's (checked against it: 409)
NEW_PLAN = obj(PLAN_FIELDS, ["name", "kinds", "cpu", "memory_mib"], title="NewPlan",
               **{"if": NOT_CPU, "then": WITH_DEVICES, "else": CPU_ONLY})
PLAN_CHANGE = obj(PLAN_FIELDS, description="the fields to change",
                  **{"if": NOT_CPU, "then": WITH_DEVICES,
                     "else": {"if": {"required": ["device_type"]}, "then": CPU_ONLY}})
PLAN = answer({"id": ID, "name": STR, "description": STR, "kinds": array(STR), "device_type": STR,
               "device_count": COUNT, "cpu": NUM, "memory_mib": COUNT, "shm_mib": COUNT, "rdma": BOOL, "pool": STR,
               "runnable": BOOL}, ["runnable"], title="Plan")
PLAN_PAGE = page_of(PLAN)
PLAN_QUERY = {"kind": Param(enum(st.KINDS), "only plans for this kind of work"),
              "all": flag("admins: also plans that cannot run on this cluster now"),
              "vc": Param(VC_FILTER, "plans of this virtual cluster (default: my current one, once I chose one)"),
              **page()}

# -- quotas ----------------------------------------------------------------------------------------------
LIMITS = answer({"devices": COUNT, "cpu": NUM, "memory_mib": COUNT})
MY_QUOTA = answer({"user": STR,
                   "compute": array(answer({"kind": STR, "device_type": STR, "limit": LIMITS, "used": LIMITS})),
                   "storage": array(answer({"kind": STR, "limit_gib": COUNT, "used_gib": COUNT})),
                   "personal": answer({"work": STR, "archive": STR}),
                   "vc": answer({"name": STR, "caps": array(answer({"device_type": STR, "cap": COUNT,
                                                                    "held": COUNT}))})},
                  ["vc"], title="MyQuota")
COMPUTE_QUOTA = answer({"user": STR, "kind": STR, "device_type": STR, "devices": COUNT, "cpu": NUM,
                        "memory_mib": COUNT}, title="ComputeQuota")
STORAGE_QUOTA = answer({"user": STR, "kind": STR, "capacity_gib": COUNT}, title="StorageQuota")
QUOTA = {"anyOf": [COMPUTE_QUOTA, STORAGE_QUOTA]}
QUOTA_PAGE = page_of(QUOTA)
SET_QUOTA = obj({"user": text(255, True, "a user, or * for everyone's default"),
                 "kind": enum((*st.KINDS, *STORAGE_KINDS), "a kind of work (compute) or of storage"),
                 "device_type": text(63, True, "a device type, or * for all (compute; default *)"),
                 "devices": integer(0, 1 << 20), "cpu": number(0, 1 << 20), "memory_mib": integer(0, 1 << 40),
                 "capacity_gib": integer(0, 1 << 30, "storage kinds")}, ["user", "kind"], title="SetQuota",
                description="a compute quota (devices, cpu, memory_mib) or a storage quota (capacity_gib)",
                **{"if": {"properties": {"kind": {"enum": list(STORAGE_KINDS)}}},
                   "then": {"required": ["capacity_gib"]}, "else": {"required": ["devices", "cpu", "memory_mib"]}})
USER_QUERY = {"user": Param(USERNAME, "another user (custom:ti:users:manage)")}
# DEV6: my dashboard for one pool (ops/home.py)
HOME_JOB = answer({"id": ID, "name": STR, "kind": STR, "status": STR, "reason": STR, "device_type": STR,
                   "devices": COUNT, "queue_position": nullable(INT), "estimated_start": MAYBE_TIME,
                   "started_at": MAYBE_TIME, "created_at": TIME})
HOME = answer({"user": STR, "pool": STR, "running": array(HOME_JOB), "queued": array(HOME_JOB),
               "quota": answer({"compute": MY_QUOTA["properties"]["compute"],
                                "storage": MY_QUOTA["properties"]["storage"]}),
               "paths": answer({"work": STR, "archive": STR}),
               "devices": array(answer({"device_type": STR, "total": COUNT, "used": COUNT, "free": COUNT})),
               "resources": nullable(answer({"pool": STR, "cpu_total": NUM, "cpu_used": NUM, "cpu_free": NUM,
                                             "memory_mib_total": COUNT, "memory_mib_used": COUNT,
                                             "memory_mib_free": COUNT}))}, title="Home")
HOME_QUERY = {"pool": Param(string(63, pattern=v.NAME_PATTERN), "the pool (virtual cluster); default: my current VC")}

# -- volumes ---------------------------------------------------------------------------------------------
SHARE = answer({"id": ID, "kind": enum(("user", "group")), "grantee": STR, "mode": enum(("ro", "rw"))})
VOLUME_FIELDS = {"id": ID, "owner": STR, "name": STR, "kind": STR, "capacity_gib": COUNT, "cluster": STR,
                 "description": STR, "public": BOOL, "source_volume_id": nullable(ID), "created_at": TIME,
                 "shares": array(SHARE), "access": nullable(enum(("ro", "rw"))),
                 "over_capacity": BOOL,
                 "state": {**enum(("ready", "copying", "failed")),
                           "description": "a dataset is copying until its snapshot is complete, failed (with "
                                          "state_reason) if it could not be made; only ready volumes mount"},
                 "state_reason": STR,
                 "copy": answer({"total_bytes": nullable(COUNT), "done_bytes": COUNT})}
VOLUME_OPTIONAL = ("state_reason", "copy")
VOLUME = answer(VOLUME_FIELDS, VOLUME_OPTIONAL, title="Volume")
VOLUME_DETAIL = answer({**VOLUME_FIELDS, "used_bytes": nullable(COUNT), "mounted_by": array(STR)},
                       VOLUME_OPTIONAL, title="VolumeDetail")
VOLUME_PAGE = page_of(VOLUME)
# issue 30: a share removed or made read-only stops the grantee's work that used it (ops/revoke.py)
STOPPED_WORK = answer({"id": ID, "kind": enum(st.KINDS), "owner": STR, "name": STR}, title="StoppedWork")
VOLUME_SHARES = answer({**VOLUME_FIELDS, "stopped": array(STOPPED_WORK, description=(
    "the jobs and workspaces stopped because their owner lost the access they mount the volume with (none when "
    "a share is added or widened); queued ones fail when they would start"))}, VOLUME_OPTIONAL,
    title="VolumeShares")
NEW_VOLUME = obj({"name": NAME, "kind": enum(STORAGE_KINDS), "capacity_gib": integer(1, MAX_GIB),
                  "description": nullable(TEXT),
                  "cluster": nullable({**NAME, "description": "the pool whose machines this storage serves: jobs "
                                       "and workspaces that mount it run in that pool (SPEC Q9); none: any"}),
                  "source": ref("volume", 320),
                  "public": BOOL}, ["name", "kind", "capacity_gib"], title="NewVolume",
                 description="a dataset (kind dataset) is a snapshot of source, which only datasets name; bucket "
                             "volumes and public datasets are for admins",
                 **{"if": {"properties": {"kind": {"const": "dataset"}}},
                    "then": {"required": ["source"]},
                    "else": {"properties": {"source": {"not": {}, "description": "datasets only"}}}})
VOLUME_CHANGE = obj({"capacity_gib": integer(1, MAX_GIB, "the new size: only grows"),
                     "description": nullable(TEXT)})
NEW_SHARE = obj({"user": text(255, True, "a hub user name"), "group": text(255, True, "a hub group"),
                 "mode": enum(("ro", "rw"))},
                description="exactly one of user and group, each of which must exist in the hub; mode ro "
                            "(default) or rw", oneOf=exactly_one("user", "group"))
ENTRY = answer({"name": STR, "type": enum(("dir", "file")), "size": COUNT, "modified": NUM, "path": STR})
LISTING = answer({"path": STR, "type": enum(("dir", "file", "link", "other")), "size": COUNT,
                  "entries": array(ENTRY)},
                 ["size"], title="Listing")
_PART = r"([^/\x00]*[^/.\x00][^/\x00]*|\.{3,})"  # a path component, not '.' nor '..' (storage/fsworker.browse)
FILES_QUERY = {"path": Param(string(4096, description="a path inside the volume: no '.' or '..' component",
                                    pattern=rf"^/*({_PART}(/+{_PART})*)?/*$"),
                             "a directory or file inside the volume (default: its root)")}

# -- cluster ---------------------------------------------------------------------------------------------
CLUSTER = answer({
    "nodes": array(answer({"name": STR, "pool": STR, "schedulable": BOOL, "cpu": NUM, "cpu_used": NUM,
                           "memory_mib": COUNT,
                           "devices": {"type": "object",
                                       "additionalProperties": answer({"total": COUNT, "used": COUNT})}})),
    "device_types": array(answer({"device_type": STR, "total": COUNT, "used": COUNT, "gap": COUNT, "free": INT})),
    "running": COUNT, "queued": COUNT}, title="Cluster")

# -- cluster usage (MON1): idle now, booked/idle device-hours, machines and what runs there --------------
_HOURS = {"booked_hours": NUM, "idle_hours": NUM, "unmeasured_hours": NUM,
          "idle_percent": nullable(number(0, 100, "idle / booked device-hours in the window, in percent"))}
_NOW = {"used": COUNT, "idle": COUNT, "unmeasured": COUNT}
CLUSTER_USAGE = answer({
    "days": COUNT, "since": TIME, "idle_threshold": NUM, "sampled_at": MAYBE_TIME, "measuring": BOOL,
    "vcs": array(answer({"vc": STR, "device_type": STR, "total": COUNT, "unschedulable": COUNT, "free": COUNT,
                         **_NOW, **_HOURS})),
    "users": array(answer({"user": STR, **_NOW, **_HOURS})),
    "machines": array(answer({
        "machine": STR, "address": STR, "pools": array(STR), "device_types": array(STR), "total": COUNT,
        "unschedulable": COUNT, "free": COUNT, **_NOW, **_HOURS,
        "running": array(answer({"id": nullable(ID), "name": nullable(STR), "owner": nullable(STR), "kind": STR,
                                 "device_type": STR, "devices": array(COUNT), "since": MAYBE_TIME}))}))},
    title="ClusterUsage")
CLUSTER_USAGE_QUERY = {"days": Param(limited(integer(1), "ClusterAccounting.keep_days"),
                                     "the window of booked/idle device-hours in days (default 30, or "
                                     "ClusterAccounting.keep_days if fewer are kept; at most that)")}
