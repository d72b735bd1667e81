"""Turning a submission (JOB2) or workspace options (WS1) into validated Job fields.

Nothing is stored here; every problem is a ValidationError naming the field and the rule.
"""

from __future__ import annotations

import secrets
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..db import models as m
from ..domain import validation as v
from ..domain.actor import Actor
from ..domain.errors import Conflict, Forbidden
from ..domain.mounts import MountRequest, check_capacity, check_request, over_capacity_reason
from ..scheduler.capacity import machine_shapes, unfit
from ..domain import personal
from . import images, plans, secretenv, templatelookup, volumes
from .mountaccess import GROUPS
from .settings import OpsSettings

JOB_FIELDS = ("name", "description", "kind", "strategy", "workers", "ps", "plan", "image", "command", "env",
              "secret_env", "volumes", "ports", "endpoints", "credential", "preemptible", "estimated_duration",
              "template", "priority", "on_overrun")
WORKSPACE_FIELDS = ("name", "display_name", "description", "plan", "image", "volumes", "env", "jupyter", "ssh",
                    "ports", "credential", "vc")
ENDPOINTS = ("ssh", "tensorboard", "jupyter")
# spec["jupyter"]: {"port": the platform's choice, "token": sealed} -- a Jupyter server beside instance 0's command
JUPYTER = "jupyter"
MAX_DURATION = 366 * 24 * 3600


def merge_template(session: Session, actor: Actor, data: dict[str, Any]) -> dict[str, Any]:
    """JOB7: a template's fields first, the submission's own fields win."""
    ref = data.get("template")
    if ref is None:
        return dict(data)
    tpl = templatelookup.find(session, actor, ref, "template")
    merged = {**tpl.spec, **{k: val for k, val in data.items() if k != "template"}}
    return merged


def parse_volumes(session: Session, actor: Actor, value: Any, instances: int, plan: m.Plan | None = None,
                  *, workspace: bool = False) -> list[dict[str, Any]]:
    """``plan``: the work's plan, whose pool every mounted volume that names a cluster must be (SPEC Q9).
    ``workspace``: a workspace may mount a volume over its capacity read-write (to clean it up); jobs not."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise v.ValidationError("volumes must be a list of {volume, mount_path, read_only}", field="volumes")
    if len(value) > 32:
        raise v.ValidationError("volumes: at most 32 mounts", field="volumes")
    out, paths = [], set()
    for i, item in enumerate(value):
        f = f"volumes[{i}]"
        v.check_fields(item, ("volume", "mount_path", "read_only"), f)
        vol = volumes.find(session, actor, item.get("volume"), f"{f}.volume")
        mode = volumes.access_mode(vol, actor)
        if vol.state != "ready":
            what = ("is still being copied: mount it when it is ready" if vol.state == "copying"
                    else f"failed ({vol.state_reason}): delete it and snapshot again")
            raise Conflict(f"{f}.volume: dataset {vol.owner}/{vol.name} {what}", field=f"{f}.volume")
        if plan is not None and vol.cluster and vol.cluster != plan.pool:  # what the volume is decides: 409
            raise Conflict(
                f"{f}.volume: volume {vol.owner}/{vol.name} is storage of cluster {vol.cluster!r}, so work that "
                f"mounts it runs in pool {vol.cluster!r}; plan {plan.name!r} runs in pool {plan.pool!r}: choose "
                f"a plan of pool {vol.cluster!r}", field=f"{f}.volume")
        path = v.mount_path(item.get("mount_path", f"/mnt/{vol.name}"), f"{f}.mount_path")
        ro = v.boolean(item.get("read_only", vol.kind in ("bucket", "dataset") or mode == "ro"), f"{f}.read_only")
        if path in paths or any(path.startswith(p + "/") or p.startswith(path + "/") for p in paths):
            raise v.ValidationError(f"{f}.mount_path {path} overlaps another mount", field=f"{f}.mount_path")
        if (mine := personal.clash(path, actor.name)) is not None:
            raise v.ValidationError(f"{f}.mount_path {path} overlaps your {personal.WHAT[mine]} "
                                    f"{personal.mount_path(mine, actor.name)}, mounted in every workspace and job; "
                                    "pick another path", field=f"{f}.mount_path")
        paths.add(path)
        req = MountRequest(vol.id, f"{vol.owner}/{vol.name}", vol.kind, ro)
        check_request(req, mode or "ro", instances, f"{f}.read_only")
        if vol.over_capacity_since is not None and not workspace:
            check_capacity([req], {vol.id: over_capacity_reason(req.volume_label, vol.used_bytes or 0,
                                                                vol.capacity_gib)}, f"{f}.volume")
        out.append({"volume_id": vol.id, "volume": f"{vol.owner}/{vol.name}", "kind": vol.kind,
                    "mount_path": path, "read_only": ro})
    return out


def _plan_fields(session: Session, data: dict[str, Any], kind: str) -> tuple[m.Plan, dict[str, Any]]:
    plan = plans.find(session, v.require(data, "plan"))
    if kind not in plan.kinds:  # what the plan is decides (the request names an existing one): 409
        raise Conflict(f"plan {plan.name!r} is not offered for {kind} work (it is for: {', '.join(plan.kinds)})",
                       field="plan")
    return plan, {"plan_id": plan.id, "pool": plan.pool, "device_type": plan.device_type,
                  "devices_per_instance": plan.device_count, "cpu_per_instance": plan.cpu,
                  "memory_mib_per_instance": plan.memory_mib, "shm_mib": plan.shm_mib}


def _with_rdma(spec: dict[str, Any], plan: m.Plan | None) -> None:
    """The plan's rdma goes with the job as its shm does (kept in its spec: a later change of the plan does not
    change what a submitted job asks for)."""
    if plan is not None and plan.rdma:
        spec["rdma"] = True


def _check_plan_runs(plan: m.Plan, instances: int, settings: OpsSettings) -> None:
    """RES4: the plan's device count follows its type's rules now (they may have changed since the plan was
    made), and a distributed job of a whole-node type takes whole nodes; one instance fits some machine of the
    plan's pool; and Q4: a gang runs all at once or not at all, so one its pool can never hold at once would queue
    forever."""
    try:
        v.device_count(plan.device_count, plan.device_type, settings.device_rules, "devices_per_instance")
        v.whole_nodes(plan.device_count, instances, plan.device_type, settings.devices_per_node,
                      "devices_per_instance")
    except v.ValidationError as e:
        # the plan is what the submitter chose (and can change): the error names it; the plan and this cluster's
        # rules decide, not the request alone (409)
        raise Conflict(f"plan {plan.name!r}: {e.detail}", field="plan") from None
    # cordoned machines count: they are expected back, and the job waits for them (ADM3; scheduler/core.py)
    if not plans.fits_somewhere(plan, settings.nodes, cordoned=True):
        raise Conflict(f"plan {plan.name!r} cannot run on this cluster: no machine in pool {plan.pool!r} has "
                       f"{plan.device_count} x {plan.device_type}, {plan.cpu:g} CPU and {plan.memory_mib} MiB",
                       field="plan")
    if instances > 1:
        why = unfit(machine_shapes(settings.nodes, cordoned=True), plan.pool, plan.device_type, plans.instance_of(plan), instances)
        if why is not None:
            raise Conflict(f"workers: {instances} instances of plan {plan.name!r} can never run at once: {why}",
                           field="workers")


def parse_job(session: Session, actor: Actor, raw: dict[str, Any], settings: OpsSettings,
              partial: bool = False) -> dict[str, Any]:
    """``partial``: a template's spec (ops/templates.py), checked field by field as a submission is; what it
    leaves out (name, plan, image, command) is not required: the submission that applies it gives the rest."""
    v.check_fields(raw, JOB_FIELDS)
    data = raw if partial else merge_template(session, actor, raw)
    v.check_fields(data, JOB_FIELDS)
    out: dict[str, Any] = {}
    if not partial or "name" in data:
        out["name"] = v.name(data.get("name"))
    out["description"] = v.text(data.get("description", ""), "description")
    kind = out["kind"] = v.choice(data.get("kind", "single"), "kind", ("single", "distributed"))
    if kind == "single":
        for f in ("strategy", "workers", "ps"):
            if data.get(f) not in (None, 0, 1, "") or (f == "strategy" and data.get(f)):
                raise v.ValidationError(f"{f} applies to distributed jobs only", field=f)
        out.update(strategy=None, workers=1, ps=0)
    else:  # null or "" is the default, as the document says (api/schemas/jobs.SHAPE_RULES)
        strategy = out["strategy"] = v.choice(data.get("strategy") or "allreduce", "strategy", ("allreduce", "ps"))
        workers, ps = _given(data, "workers"), _given(data, "ps")
        if strategy == "allreduce":
            out["workers"] = v.integer(2 if workers is None else workers, "workers", 2, settings.max_workers)
            if ps not in (None, 0):
                raise v.ValidationError("ps applies to the parameter-server strategy only", field="ps")
            out["ps"] = 0
        else:
            out["workers"] = v.integer(1 if workers is None else workers, "workers", 1, settings.max_workers)
            out["ps"] = v.integer(1 if ps is None else ps, "ps", 1, settings.max_ps)
    if not partial and raw.get("template") is not None:
        # a schema-valid submission that leaves these to its template: the template's content decides (409)
        for f in ("plan", "image", "command"):
            if data.get(f) in (None, ""):
                raise Conflict(f"{f} is required: neither the submission nor template {raw['template']!r} gives it",
                               field=f)
    plan = None
    if not partial or "plan" in data:
        plan, fields = _plan_fields(session, data, kind)
        _check_plan_runs(plan, out["workers"] + out["ps"], settings)
        out.update(fields)
    warning = None
    if not partial or "image" in data:
        if data.get("image") in (None, ""):
            raise v.ValidationError("image is required (a public image name or an image address)", field="image")
        out["image"], warning = images.resolve(session, data["image"])
    if not partial or "command" in data:
        out["command"] = v.command(data.get("command"))
    instances = out["workers"] + out["ps"]
    env = v.env(data.get("env"))
    secret = secretenv.parse(data.get("secret_env"), env)
    spec: dict[str, Any] = {
        "env": env,
        "volumes": parse_volumes(session, actor, data.get("volumes"), instances, plan),
        "ports": v.ports(data.get("ports")),
        "endpoints": _endpoints(data.get("endpoints")),
        "warnings": image_warnings(out.get("image"), warning, settings),
    }
    _with_credential(session, actor, data, spec)
    if spec["volumes"]:
        spec[GROUPS] = sorted(actor.groups)
    if data.get("estimated_duration") is not None:
        spec["estimated_duration"] = v.integer(data["estimated_duration"], "estimated_duration", 1, MAX_DURATION)
    spec["on_overrun"] = v.choice(data.get("on_overrun", "alert"), "on_overrun", ("alert", "stop"))
    if secret:  # sealed at once: the value is never stored, logged or shown in clear
        spec[secretenv.FIELD] = secretenv.seal(settings.secret_key, secret)
    _with_rdma(spec, plan)
    if not partial and "jupyter" in spec["endpoints"]:
        _with_jupyter(spec, settings)
    out["spec"] = spec
    out["preemptible"] = v.boolean(data.get("preemptible", False), "preemptible")
    if data.get("priority") is not None:
        # JOB8: priorities are set by admins
        if not actor.can("custom:ti:jobs:manage-all"):
            raise Forbidden("only admins set priority (1-1000)", field="priority")
        out["priority"] = v.integer(data["priority"], "priority", 1, 1000)
    return out


def _given(data: dict[str, Any], field: str) -> Any:
    """A count as given: None when absent, null or "" (the document's "the default")."""
    value = data.get(field)
    return None if value in (None, "") else value


def _with_jupyter(spec: dict[str, Any], settings: OpsSettings) -> None:
    """A port of the platform's choosing (one the job did not declare), added to the job's ports so the owner-only
    endpoint proxy serves it, and a token of the job's own: the proxy sends it upstream, so other processes that
    reach the job's loopback (jobs sharing the host's network) cannot use the server, nor does the user see it."""
    declared = spec["ports"]
    if len(declared) >= 32:  # validation.ports: at most 32 in all
        raise v.ValidationError("endpoints: jupyter takes a port of its own; declare at most 31 ports with it",
                                field="endpoints")
    free = [p for p in range(v.PORT_MIN, v.PORT_MAX + 1) if p not in declared]
    port = secrets.choice(free)
    token = secretenv.seal(settings.secret_key, {"token": secrets.token_urlsafe(32)})["token"]
    spec[JUPYTER] = {"port": port, "token": token}
    spec["ports"] = [*declared, port]


def jupyter_port(spec: dict[str, Any]) -> int | None:
    """The jupyter endpoint's port; None for a job without it (and for a workspace, whose "jupyter" is a flag)."""
    rec = spec.get(JUPYTER)
    return rec.get("port") if isinstance(rec, dict) else None


def _endpoints(value: Any) -> list[str]:
    names = _list(value, "endpoints")
    return sorted({v.choice(e, "endpoints", ENDPOINTS) for e in names})


def parse_workspace(session: Session, actor: Actor, data: dict[str, Any], settings: OpsSettings) -> dict[str, Any]:
    v.check_fields(data, WORKSPACE_FIELDS)
    out: dict[str, Any] = {"name": v.name(data.get("name")), "kind": "workspace", "strategy": None,
                           "workers": 1, "ps": 0}
    out["display_name"] = v.text(data.get("display_name", ""), "display_name", 255)
    out["description"] = v.text(data.get("description", ""), "description")
    plan, fields = _plan_fields(session, data, "workspace")
    if data.get("vc") is not None and v.name(data["vc"], "vc") != plan.pool:
        # RES2: the spawn form's VC and plan are chosen apart (no script re-lists the plans)
        raise v.ValidationError(f"plan {plan.name!r} runs in virtual cluster {plan.pool!r}, not {data['vc']!r}: "
                                f"choose a plan of {data['vc']}, or {plan.pool} as the virtual cluster", field="plan")
    _check_plan_runs(plan, 1, settings)
    out.update(fields)
    image = data.get("image")
    out["image"], warning = images.resolve(session, image) if image else ("", None)
    out["command"] = ""
    out["spec"] = {
        "env": v.env(data.get("env")),
        "volumes": parse_volumes(session, actor, data.get("volumes"), 1, plan, workspace=True),
        "jupyter": v.boolean(data.get("jupyter", True), "jupyter"),
        "ssh": v.boolean(data.get("ssh", True), "ssh"),
        "ports": v.ports(data.get("ports")),
        "warnings": image_warnings(out.get("image"), warning, settings),
    }
    if out["spec"]["volumes"]:
        out["spec"][GROUPS] = sorted(actor.groups)
    if not (out["spec"]["jupyter"] or out["spec"]["ssh"]):
        raise v.ValidationError("jupyter: a workspace without Jupyter is reached by SSH only: it needs ssh true",
                                field="jupyter")
    _with_rdma(out["spec"], plan)
    _with_credential(session, actor, data, out["spec"])
    return out


def _with_credential(session: Session, actor: Actor, data: dict[str, Any], spec: dict[str, Any]) -> None:
    """The registry login the image is pulled with: one of the submitter's own (by name or id), never another's."""
    if data.get("credential") is not None:
        spec["credential_id"] = images.find_credential(session, actor, data["credential"]).id


def image_warnings(image: str | None, warning: str | None, settings: OpsSettings) -> list[str]:
    """What the submitter must know about the image picked: not a public one; not run at all (the embedded
    platform)."""
    return [w for w in (warning, settings.image_note if image else None) if w]


def _list(value: Any, field: str) -> list[Any]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [p.strip() for p in value.split(",") if p.strip()]
    if not isinstance(value, list):
        raise v.ValidationError(f"{field} must be a list", field=field)
    return value


def name_taken(session: Session, owner: str, name: str) -> bool:
    return session.scalar(select(m.Job.id).where(m.Job.owner == owner, m.Job.name == name)) is not None
