"""Schemas of jobs (JOB1-JOB9), their logs, metrics, endpoints and the queue (Q3-Q7).

The submission's fields take what ``ops/jobspec.py`` takes (nulls where it reads null as "not given"); the
rules a schema cannot say (a plan exists and runs here, the quota, reserved variable names) stay there.
"""

from __future__ import annotations

from ...domain import states as st
from ...domain import validation as v
from ...ops.jobs import DEVICE_TYPE_PATTERN
from ...ops.images import IMAGE_PATTERN
from ...ops.jobspec import ENDPOINTS, MAX_DURATION
from ..contract import Param
from .common import (BOOL, COUNT, ID, INT, MAYBE_TIME, NAME, NUM, STATUS, STR, TEXT, TIME, NO_NUL, answer,
                     array, enum, exactly_one, flag, integer, limited, nullable, obj, page, page_of, ref, string,
                     text, VC_FILTER)

# -- submissions -----------------------------------------------------------------------------------------
PORT = integer(v.PORT_MIN, v.PORT_MAX, f"an interactive port ({v.PORT_MIN}-{v.PORT_MAX})")
PORT_ITEM = r"4[0-9]{4}"  # PORT_MIN-PORT_MAX, written out


def comma_list(item: str, most: int) -> str:
    """A pattern: ``most`` items at most, separated by commas, with spaces and empty items around them (what
    validation.ports and jobspec._list read)."""
    return rf"^[ ,]*(({item}) *(,[ ,]*({item}) *){{0,{most - 1}}})?[ ,]*$"


assert (v.PORT_MIN, v.PORT_MAX) == (40000, 49999), "PORT_ITEM spells the range out"
PORTS = {"anyOf": [array(PORT, maxItems=32, uniqueItems=True),
                   string(400, pattern=comma_list(PORT_ITEM, 32)), {"type": "null"}],
         "description": f"a list of ports {v.PORT_MIN}-{v.PORT_MAX}, or a comma-separated string of them (a port "
                        "named twice there counts once)"}
ENV = obj({}, extra={"type": ["string", "number", "null"], "maxLength": v.MAX_ENV_VALUE, **NO_NUL},
          description="environment variables NAME: value (names the platform sets are refused)",
          propertyNames={"pattern": v.ENV_PATTERN, "not": {"enum": sorted(v.RESERVED_ENV)},
                         "description": "letters, digits and '_', not starting with a digit, at most 128, and not "
                                        "one the platform sets: " + ", ".join(sorted(v.RESERVED_ENV))},
          maxProperties=v.MAX_ENV)
# a path component other than '.' and '..' (validation.mount_path); '//' and a final '/' are normalized away
_COMPONENT = r"([A-Za-z0-9_.-]*[A-Za-z0-9_-][A-Za-z0-9_.-]*|\.{3,})"
MOUNT_PATH = string(255, description=f"an absolute path under {', '.join(v.MOUNT_ROOTS)} of letters, digits, '_', "
                                     "'-', '.' and '/' (no '.' or '..' component)",
                    pattern=rf"^/({'|'.join(r.strip('/') for r in v.MOUNT_ROOTS)})(/+{_COMPONENT})+/*$")
MOUNT_REQUEST = obj({"volume": ref("volume", 320), "mount_path": MOUNT_PATH, "read_only": BOOL}, ["volume"])
VOLUMES = nullable(array(MOUNT_REQUEST, maxItems=32))
ENDPOINT_LIST = {"anyOf": [array(enum(ENDPOINTS)), string(100, pattern=comma_list("|".join(ENDPOINTS), 50)),
                           {"type": "null"}],
                 "description": "a list of: ssh, tensorboard; or a comma-separated string of them (Jupyter "
                                "runs in workspaces, not jobs)"}
WORKERS_MAX, PS_MAX = "TiService.max_workers", "TiService.max_ps"
WORKERS = nullable(limited(integer(0, description="instances of a distributed job: all-reduce 2 or more, parameter "
                                                  f"server 1 or more; at most {WORKERS_MAX}"), WORKERS_MAX))
PS = nullable(limited(integer(0, description=f"parameter servers (strategy ps): 1 or more, at most {PS_MAX}"), PS_MAX))
# what a kind and a strategy make of workers and ps (jobspec.parse_job); absent or null: the default
SHAPE_RULES = {"if": {"properties": {"kind": {"const": "distributed"}}, "required": ["kind"]},
               "then": {"if": {"properties": {"strategy": {"const": "ps"}}, "required": ["strategy"]},
                        "then": {"properties": {"workers": nullable(limited(integer(1), WORKERS_MAX)),
                                                "ps": nullable(limited(integer(1), PS_MAX))}},
                        "else": {"properties": {"workers": nullable(limited(integer(2), WORKERS_MAX)),
                                                "ps": {**nullable(integer(0, 0)),
                                                       "description": "the all-reduce strategy has none"}}}},
               "else": {"properties": {"strategy": {"enum": [None, ""], "description": "distributed jobs only"},
                                       "workers": nullable(integer(0, 1, "distributed jobs only")),
                                       "ps": nullable(integer(0, 1, "distributed jobs only"))}}}
# an image: a public image's name (which must exist) or an address (ops/images.py)
IMAGE_REF = string(512, 1, "a public image's name, or an image address like registry/name:tag (lowercase)",
                   pattern=rf"^({v.NAME_PATTERN[1:-1]}|{IMAGE_PATTERN[1:-1]})$")

# what a template may hold: a submission without its name (a name given there is ignored)
SPEC_FIELDS = {
    "description": nullable(TEXT),
    "kind": enum(st.JOB_KINDS),
    "strategy": {"type": ["string", "null"], "enum": ["allreduce", "ps", "", None],
                 "description": "distributed jobs: allreduce (default) or ps"},
    "workers": WORKERS,
    "ps": PS,
    "plan": ref("plan"),
    "image": IMAGE_REF,
    "command": text(v.MAX_COMMAND, filled=True),
    "env": nullable(ENV),
    "volumes": VOLUMES,
    "ports": PORTS,
    "endpoints": ENDPOINT_LIST,
    "credential": nullable(ref("registry credential")),
    "preemptible": BOOL,
    "estimated_duration": nullable(integer(1, MAX_DURATION, "seconds")),
    "on_overrun": enum(("alert", "stop"), "past estimated_duration: alert (default) or stop"),
}
SUBMISSION = obj({"name": NAME, **SPEC_FIELDS,
                  "secret_env": nullable({**ENV, "description": "secret environment variables NAME: value, sealed "
                                                                "at once and never shown again (not in env too)"}),
                  "template": nullable(ref("template")),
                  "priority": nullable(integer(1, 1000, "1-1000 (admins only; default 100)")),
                  "draft": {**BOOL, "description": "true: save the job as a draft (state created): checked as a "
                                                   "submission, not queued, no quota used; POST /jobs/{id}/start "
                                                   "queues it"}},
                 ["name"], title="Submission",
                 description="A training job to run. plan, image and command are required unless a template gives "
                             "them; the submission's own fields win over the template's.",
                 allOf=[SHAPE_RULES, {"if": {"properties": {"template": {"type": "null"}}},
                                      "then": {"required": ["plan", "image", "command"]}}])
SUPPORT = obj({"message": text(v.MAX_TEXT, filled=True, description="what to ask the admins")}, ["message"],
              description="a message to the admins; the job's facts and the last lines of its log (secret "
                          "environment values scrubbed) go with it")
CLONE = obj({"name": nullable(string(63))}, description="the clone's name (default: the job's, numbered)")
PRIORITY = obj({"priority": integer(1, 1000)}, ["priority"])
MOVE = obj({"to": nullable(enum(("top", "bottom"))), "before": nullable(ID), "after": nullable(ID)},
           description="exactly one of: to, before (a queued job of mine), after",
           oneOf=exactly_one("to", "before", "after"))
ADD_PORT = obj({"port": PORT}, ["port"])
SET_SSH = obj({"enabled": BOOL}, ["enabled"])
# an absolute, normalized path (domain/endpoints.check_logdir): no '.' or '..' component, no '//', no NUL or newline
_LOGDIR_PART = r"([^/\x00\n]*[^/.\x00\n][^/\x00\n]*|\.{3,})"
LOGDIR_PATH = string(4096, 1, "a directory inside one of the job's volume mounts: an absolute path without '.', "
                              "'..' or '//'", pattern=rf"^(/|(/{_LOGDIR_PART})+/?)$")
LOGDIR = obj({"logdir": LOGDIR_PATH}, ["logdir"])

# -- answers ---------------------------------------------------------------------------------------------
MOUNT = answer({"volume_id": ID, "volume": STR, "kind": STR, "mount_path": STR, "read_only": BOOL})
QUEUE_PLACE = answer({"queue": string(description="POOL/DEVICE_TYPE/KIND"), "position": nullable(INT),
                      "ahead": nullable(INT), "estimated_start": MAYBE_TIME, "pinned": BOOL, "provisional": BOOL,
                      "jobs_ahead": array(answer({"id": ID, "name": STR, "owner": STR, "position": nullable(INT)}))},
                     ["provisional", "jobs_ahead"], title="QueuePlace")
TENSORBOARD = answer({"logdir": STR, "url": STR, "key": STR, "started_at": {"type": ["number", "string", "null"]}},
                     title="TensorBoard")
EVENT = answer({"at": TIME, "status": STR, "message": STR})
JOB_FIELDS = {
    "id": ID, "name": STR, "display_name": STR, "owner": STR, "kind": enum(st.KINDS),
    "strategy": nullable(STR), "status": STATUS, "reason": STR, "plan_id": nullable(ID), "pool": STR,
    "device_type": STR, "devices_per_instance": COUNT, "cpu_per_instance": NUM, "memory_mib_per_instance": COUNT,
    "workers": COUNT, "ps": COUNT, "shm_mib": COUNT, "image": STR, "command": STR, "description": STR,
    "preemptible": BOOL, "priority": INT, "exit_code": nullable(INT), "placement": nullable({"type": "object"}),
    "instances": COUNT, "env": obj({}, extra=STR), "secret_env_names": array(STR), "volumes": array(MOUNT), "ports": array(INT),
    "endpoints": array(STR), "estimated_duration": nullable(INT), "warnings": array(STR),
    "on_overrun": nullable(enum(("alert", "stop"))),
    "credential_id": nullable(ID),
    "created_at": TIME, "queued_at": MAYBE_TIME, "started_at": MAYBE_TIME, "finished_at": MAYBE_TIME,
    "queue": QUEUE_PLACE,
    # the detail adds the history; for the owner, the endpoint URLs and TensorBoards (JOB6)
    "events": array(EVENT), "endpoint_urls": obj({}, extra=STR), "tensorboards": array(TENSORBOARD),
    # the jupyter endpoint (JOB2): its port (a job that asked for it), its URL for the owner (null until it runs)
    "jupyter_port": INT, "jupyter_url": nullable(STR),
}
DETAIL_ONLY = ("queue", "events", "endpoint_urls", "tensorboards", "jupyter_port", "jupyter_url")
JOB = answer(JOB_FIELDS, DETAIL_ONLY, title="Job",
             description="A training job or a workspace (kind workspace) and where it stands")
# another user's waiting job, as those with custom:ti:jobs:view-all see it (JOB5): ops/jobs.SUMMARY_PLAIN
SUMMARY_KEYS = ("id", "name", "owner", "kind", "strategy", "status", "reason", "plan_id", "pool", "device_type",
                "devices_per_instance", "cpu_per_instance", "memory_mib_per_instance", "workers", "ps", "shm_mib",
                "preemptible", "priority", "created_at", "queued_at", "instances")
JOB_SUMMARY = answer({**{k: JOB_FIELDS[k] for k in SUMMARY_KEYS}, "summary": {"const": True},
                      "queue": QUEUE_PLACE}, ["queue"], title="JobSummary",
                     description="Another user's queued, scheduling or paused job: who, what state, how much and "
                                 "where in the queue; never its image, command, environment, volumes or logs")
JOB_SEEN = {"anyOf": [JOB, JOB_SUMMARY], "description": "a job in full, or another user's job as its summary"}
JOB_PAGE = page_of(JOB_SEEN)

LOGS = answer({"text": STR, "offset": COUNT, "instance": COUNT, "instances": COUNT, "status": STATUS,
               "finished": BOOL}, title="Logs")
GPU = answer({"index": INT, "utilization_percent": nullable(INT), "memory_used_mib": nullable(INT),
              "memory_total_mib": nullable(INT)})
DISK_IO = answer({"read_bytes": INT, "write_bytes": INT, "read_bytes_per_s": NUM, "write_bytes_per_s": NUM},
                 title="DiskIO")  # what the instance's processes made the kernel read from or send to storage
NETWORK_IO = answer({"rx_bytes": INT, "tx_bytes": INT, "rx_bytes_per_s": NUM, "tx_bytes_per_s": NUM},
                    title="NetworkIO")  # the job's network namespace, loopback excepted
METRICS = answer({"job": ID, "status": STATUS, "note": STR, "at": TIME,
                  "instances": array(answer({"instance": COUNT, "cpu_cores": nullable(NUM),
                                             "memory_bytes": nullable(INT), "gpus": nullable(array(GPU)),
                                             "disk": nullable(DISK_IO), "network": nullable(NETWORK_IO),
                                             "note": STR}))}, title="Metrics")
TENSORBOARDS = answer({"items": array(TENSORBOARD), "total": COUNT})
TENSORBOARD_STARTED = answer({**TENSORBOARD["properties"], "job": ID, "started": BOOL})
STOPPED = answer({"stopped": COUNT})
SCORES = page_of(answer({"user": STR, "device_type": STR, "score": NUM, "held": NUM, "held_devices": COUNT,
                         "saved_at": TIME}),
                 settling_time_s=NUM)
PANEL = answer({"mine": array(answer({"kind": STR, "device_type": STR, "running": COUNT, "queued": COUNT,
                                      "devices": COUNT, "gap": COUNT})),
                "cluster": array(answer({"device_type": STR, "total": COUNT, "occupied": COUNT, "gap": COUNT,
                                         "free": COUNT})),
                "pools": array(answer({"pool": STR, "cpu_total": NUM, "cpu_used": NUM, "cpu_free": NUM,
                                       "memory_mib_total": COUNT, "memory_mib_used": COUNT,
                                       "memory_mib_free": COUNT}))}, title="Panel")

# -- query parameters ------------------------------------------------------------------------------------
STATUSES = "|".join(st.ALL)
KINDS = "|".join(st.KINDS)
JOB_FILTERS = {
    "status": Param(string(200, pattern=rf"^({STATUSES})(,({STATUSES}))*$"), "states, comma-separated"),
    "kind": Param(string(100, pattern=rf"^({KINDS})(,({KINDS}))*$"), "kinds, comma-separated"),
    "name": Param(string(63), "a part of the name"),
    "owner": Param(string(255), "the owner (others' need custom:ti:jobs:view-all)"),
    "all": flag("everyone's jobs (custom:ti:jobs:view-all)"),
    "pool": Param(string(63, pattern=v.NAME_PATTERN), "one pool (virtual cluster)"),
    "device_type": Param(string(63, pattern=DEVICE_TYPE_PATTERN), "one device type (cpu, a100, ...)"),
    **page(),
}
LOG_QUERY = {"instance": Param(integer(0, 99_999), "the instance (default 0)"),
             "offset": Param(integer(0, 2**53), "byte offset to read from (default 0)"),
             "tail": Param(integer(1, 2000), "the last N lines instead")}
QUEUE_QUERY = {"all": flag("everyone's queued jobs (custom:ti:jobs:view-all)"),
               "queue": Param(string(200, pattern=r"^[^/]+/[^/]+/[^/]+$"), "one queue: POOL/DEVICE_TYPE/KIND"),
               "vc": Param(VC_FILTER,
                           "jobs of this virtual cluster (default: my current one, once I chose one)"),
               **page(200, 1000)}
SCORES_QUERY = {"all": flag("everyone's scores (custom:ti:jobs:view-all)"),
                "user": Param(string(255), "one user's scores"), "device_type": Param(string(63), "one device type"),
                **page(200, 10000)}
LOGDIR_QUERY = {"logdir": Param(LOGDIR_PATH, "only the TensorBoard of this logdir")}
