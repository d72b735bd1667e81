"""What one instance's pod says, in plain language: pure functions from raw Pod, Job and Event dicts (as the
watches hold them) to an ``InstanceStatus``; the backend only looks them up.

An instance is ``starting`` until its pod runs (waiting for a node, pulling its image, mounting volumes), with the
reason it waits; it ends (``exited``) when its pod ends or when waiting cannot help: an image that cannot be pulled
after a retry, a container Kubernetes cannot create, a deadline, an eviction. What may still clear by itself (no
room on the node yet, a volume still attaching, a first pull error) keeps it starting, with the reason, until
``start_timeout`` seconds after its pod was created.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from ..base import InstanceStatus
from ..outcome import exit_reason

# kubelet waiting reasons after which a retry does not help: the job fails with the reason
IMAGE_FATAL = frozenset({"ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
CREATE_FATAL = frozenset({"CreateContainerConfigError", "CreateContainerError"})
# kubelet warnings (Events) that say why a pod stays ContainerCreating
MOUNT_EVENTS = frozenset({"FailedMount", "FailedAttachVolume"})
MAIN = "main"


def timestamp(value: str | None) -> float | None:
    if not value:
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return c
    return None


def job_condition(job: dict[str, Any], kind: str) -> str:
    """The message of the Job's condition ``kind`` when it holds, else ''."""
    c = condition(job, kind)
    if c and c.get("status") == "True":
        return c.get("message") or c.get("reason") or kind
    return ""


def job_failure(job: dict[str, Any]) -> str:
    """Why a failed Job failed, in plain language; '' while it has not failed."""
    c = condition(job, "Failed")
    if not c or c.get("status") != "True":
        return ""
    if c.get("reason") == "DeadlineExceeded":
        limit = (job.get("spec") or {}).get("activeDeadlineSeconds")
        return f"ran past its deadline{f' of {limit} s' if limit else ''}: Kubernetes stopped it"
    return c.get("message") or c.get("reason") or "its Kubernetes Job failed"


def _mount_warning(pod: dict[str, Any], events: Iterable[dict[str, Any]]) -> str:
    uid = pod["metadata"].get("uid")
    newest, at = "", ""
    for ev in events:
        obj = ev.get("involvedObject") or {}
        if ev.get("reason") not in MOUNT_EVENTS or obj.get("name") != pod["metadata"]["name"] or \
                (uid and obj.get("uid") and obj["uid"] != uid):
            continue
        when = ev.get("lastTimestamp") or ev.get("eventTime") or ""
        if when >= at:
            newest, at = ev.get("message") or ev["reason"], when
    return newest


def _waiting(pod: dict[str, Any], events: Iterable[dict[str, Any]]) -> tuple[bool, str]:
    """(fatal, reason) of a pod that is not running yet."""
    status = pod.get("status") or {}
    images = {c.get("name"): c.get("image") for c in (pod.get("spec") or {}).get("initContainers") or []}
    images.update({c.get("name"): c.get("image") for c in (pod.get("spec") or {}).get("containers") or []})
    scheduled = condition(pod, "PodScheduled")
    if not (pod.get("spec") or {}).get("nodeName"):
        if scheduled and scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
            return False, f"Kubernetes cannot place it yet: {scheduled.get('message') or 'no node fits'}"
        return False, "waiting for the Kubernetes scheduler"
    for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        w = (cs.get("state") or {}).get("waiting") or {}
        why, msg = w.get("reason") or "", w.get("message") or ""
        img = images.get(cs.get("name")) or cs.get("image") or ""
        if why in IMAGE_FATAL:
            return True, f"image '{img}' cannot be pulled: {msg or why}"
        if why == "ErrImagePull":
            return False, f"image '{img}' cannot be pulled yet (retrying): {msg or why}"
        if why in CREATE_FATAL:
            return True, f"its container cannot be created: {msg or why}"
    mount = _mount_warning(pod, events)
    if mount:
        return False, f"a volume cannot be mounted: {mount}"
    return False, f"its container is being created on {pod['spec']['nodeName']}"


def _ended(index: int, status: dict[str, Any], memory_mib: int | None) -> InstanceStatus:
    phase = status.get("phase")
    term = {}
    for cs in status.get("containerStatuses") or []:
        if cs.get("name") == MAIN:
            term = (cs.get("state") or {}).get("terminated") or {}
    code = term.get("exitCode")
    if term.get("reason") == "OOMKilled":
        return InstanceStatus(index, "exited", code if code is not None else 137,
                              exit_reason(oom=True, memory_limit_mib=memory_mib))
    if code is not None:
        return InstanceStatus(index, "exited", int(code), "")
    if phase == "Succeeded":
        return InstanceStatus(index, "exited", 0, "")
    why, msg = status.get("reason") or "", status.get("message") or ""
    if why == "Evicted":
        return InstanceStatus(index, "exited", None, f"was evicted from its node: {msg or why}")
    if why == "DeadlineExceeded":
        return InstanceStatus(index, "exited", None, f"ran past its deadline: {msg or why}")
    why = why or "Failed"
    return InstanceStatus(index, "exited", None, f"{why.lower()}: {msg}" if msg else why.lower())


def instance_status(index: int, pod: dict[str, Any] | None, job: dict[str, Any] | None, memory_mib: int | None,
                    *, events: Iterable[dict[str, Any]] = (), now: float | None = None,
                    start_timeout: float | None = None) -> InstanceStatus:
    """The instance ``index`` as its newest pod and its Kubernetes Job show it. ``events``: Warning events of the
    namespace (any pod's); ``now`` and ``start_timeout`` (seconds): how long a pod may stay starting."""
    if pod is None:
        return missing_pod(index, job)
    status = pod.get("status") or {}
    phase = status.get("phase")
    if phase in ("Succeeded", "Failed"):
        return _ended(index, status, memory_mib)
    failed = condition(job, "Failed") if job is not None else None
    if failed and failed.get("status") == "True" and failed.get("reason") == "DeadlineExceeded":
        # the Job's deadline ended it, not the pod: it is being deleted (other failures are the pods' own)
        return InstanceStatus(index, "exited", None, job_failure(job))
    if phase == "Running" or pod["metadata"].get("deletionTimestamp"):
        return InstanceStatus(index, "running")
    fatal, reason = _waiting(pod, events)
    if fatal:
        return InstanceStatus(index, "exited", None, reason)
    created = timestamp(pod["metadata"].get("creationTimestamp"))
    if start_timeout and now is not None and created is not None and now - created > start_timeout:
        return InstanceStatus(index, "exited", None, f"did not start within {start_timeout:g} s: {reason}")
    return InstanceStatus(index, "starting", None, reason)


def missing_pod(index: int, job: dict[str, Any] | None) -> InstanceStatus:
    """The instance whose pod is not (or no longer) there."""
    if job is None:
        return InstanceStatus(index, "lost", None, "its Kubernetes Job was deleted")
    failed = job_failure(job)
    if failed:
        return InstanceStatus(index, "exited", None, failed)
    return InstanceStatus(index, "starting", None, "waiting for its pod to be created")


def ended_at(pod: dict[str, Any]) -> float | None:
    """When a pod that ended did (its containers' last finish; else its Ready condition's last change), else None."""
    status = pod.get("status") or {}
    if status.get("phase") not in ("Succeeded", "Failed"):
        return None
    ends = [t for cs in status.get("containerStatuses") or []
            if (t := timestamp(((cs.get("state") or {}).get("terminated") or {}).get("finishedAt"))) is not None]
    if ends:
        return max(ends)
    ready = timestamp((condition(pod, "Ready") or {}).get("lastTransitionTime"))
    return ready if ready is not None else timestamp(pod["metadata"].get("creationTimestamp"))


def expired(pods: Iterable[dict[str, Any]], now: float, ttl: float) -> list[str]:
    """Names of the pods that ended more than ``ttl`` seconds before ``now`` (what the Job TTL controller does
    for a Job's pods, done by TiHub for the pods it owns)."""
    out = []
    for pod in pods:
        end = ended_at(pod)
        if end is not None and now - end >= ttl and not pod["metadata"].get("deletionTimestamp"):
            out.append(pod["metadata"]["name"])
    return out
