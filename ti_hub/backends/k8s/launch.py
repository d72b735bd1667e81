"""How KubernetesBackend creates a job's objects, all of a gang or none, and takes them back.

A one-pod job is, by default (``launch_pods``), a bare Pod TiHub owns: the Job controller would add about seven
API writes to it (its status updates, a finalizer, events), and TiHub already decides retries and ends. Gangs stay
Indexed Jobs (one per role): their pods' stable names and per-index pinning come with them. A bare pod's Secrets
are owned by the pod, as a gang's are by its first Job, and finished bare pods are deleted after
``finished_job_ttl`` by the sweep here (the Job TTL controller's work for Jobs).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from ..base import LaunchSpec
from . import objects as ob
from . import podstate
from .client import json_of

ENDED = ("Succeeded", "Failed")


def is_bare(pod: dict[str, Any]) -> bool:
    """A pod TiHub created itself (a one-pod job's), not a Job controller's."""
    meta = pod["metadata"]
    return ob.LABEL_RUN in (meta.get("labels") or {}) and not meta.get("ownerReferences")


def is_live(pod: dict[str, Any]) -> bool:
    """Neither ended nor being deleted: it holds its node's room until deleted."""
    return (pod.get("status") or {}).get("phase") not in ENDED and not pod["metadata"].get("deletionTimestamp")


def owner_ref(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The ownerReferences that make ``obj`` (a Job or a Pod) take an object along when it goes."""
    return [{"apiVersion": obj.get("apiVersion") or ("batch/v1" if obj.get("kind") == "Job" else "v1"),
             "kind": obj.get("kind") or "Job", "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
             "controller": False, "blockOwnerDeletion": False}]


class Launching:
    """The launch half of KubernetesBackend (a mixin: it uses the backend's traits, client and watches)."""

    async def launch(self, spec: LaunchSpec) -> dict[str, Any]:
        await self.start_watches()
        self._start_sweeping()
        # once, where it matters (only the process that launches), and every launch waits for it: the first cycle
        # launches concurrently, and a Job created before the pin policy is in force has unpinned pods. A failure
        # (the API server unreachable) fails the launches waiting for it; the next one tries again
        if self._ready is None or (self._ready.done() and (self._ready.cancelled() or self._ready.exception())):
            self._ready = asyncio.ensure_future(self._prepare())
        await asyncio.shield(self._ready)
        s = self.settings
        objs = ob.job_objects(s, spec)
        jobs = [o for o in objs if o["kind"] == "Job"]
        service = next((o for o in objs if o["kind"] == "Service"), None)
        policy = next((o for o in objs if o["kind"] == "NetworkPolicy"), None)
        secret = next((o for o in objs if o["kind"] == "Secret"), None)
        as_pod = self.launch_pods and len(jobs) == 1 and jobs[0]["spec"]["completions"] == 1
        for j in jobs:
            j["spec"]["ttlSecondsAfterFinished"] = self.finished_job_ttl
        api = await self.api()
        batch, core, net = k8s.BatchV1Api(api), k8s.CoreV1Api(api), k8s.NetworkingV1Api(api)
        created: list[tuple[str, str]] = []
        # the Secrets come before the pods: a pod started without one fails (an image it cannot pull, a container
        # it cannot create); each is owned by the first Job (or the pod) once that exists, so none outlives its job
        early = [o for o in (ob.pull_secret(s, spec), secret) if o is not None]
        try:
            for obj in early:
                await self._create_owned(core.create_namespaced_secret, core.delete_namespaced_secret, obj)
            if as_pod:
                first = await self._create_pod(core, ob.bare_pod(jobs[0]), spec.job_id, jobs[0]["metadata"]["name"])
                created.append(("Pod", first["metadata"]["name"]))
            else:
                first = await self._create_job(batch, jobs[0], spec.job_id)
                created.append(("Job", jobs[0]["metadata"]["name"]))
            # owned by the first Job: deleting the job's Jobs (kill, or their TTL) takes them along. The policy
            # comes first, right after the Job: its pods need it to talk, and they take seconds to start
            owner = owner_ref(first)
            for obj in early:
                self.writes += 1
                await core.patch_namespaced_secret(obj["metadata"]["name"], self.namespace,
                                                   {"metadata": {"ownerReferences": owner}})
            if policy is not None:
                policy["metadata"]["ownerReferences"] = owner
                await self._create_owned(net.create_namespaced_network_policy, net.delete_namespaced_network_policy,
                                         policy)
            if service is not None:
                service["metadata"]["ownerReferences"] = owner
                await self._create_owned(core.create_namespaced_service, core.delete_namespaced_service, service)
            for j in jobs[1:]:
                await self._create_job(batch, j, spec.job_id)
                created.append(("Job", j["metadata"]["name"]))
        except BaseException:
            # all of a gang or none: take back what was created
            for kind, name in created:
                await (self._delete_pod(core, name) if kind == "Pod" else self._delete_job(batch, name))
            for obj in early:
                try:
                    await core.delete_namespaced_secret(obj["metadata"]["name"], self.namespace)
                except ApiException as e:
                    if e.status != 404:
                        raise
            raise
        roles = [{"job": j["metadata"]["name"], "offset": int(j["metadata"]["annotations"][ob.ANN_ROLE_OFFSET]),
                  "count": j["spec"]["completions"]} for j in jobs]
        if as_pod:
            roles[0]["pod"] = True  # no Kubernetes Job: the role's pod is found by its run label
        return {"backend": "kubernetes", "namespace": s.namespace, "roles": roles,
                "service": service["metadata"]["name"] if service else None,
                "memory_mib": spec.instances[0].memory_mib}

    async def workspace_pull_secret(self, ws_id: int, owner: str, name: str, auth: tuple[str, str, str]) -> str:
        """Made at admission, before the spawner makes the pod (TiKubeSpawner names it by the same rule); a
        leftover of the workspace's last start is replaced (the password may have changed). Not owned by the pod,
        which does not exist yet: the workspace's stop deletes it (``drop_workspace_pull_secret``)."""
        obj = ob.registry_secret(self.settings, ws_id, owner, name, auth, kind="workspace")
        core = k8s.CoreV1Api(await self.api())
        await self._create_owned(core.create_namespaced_secret, core.delete_namespaced_secret, obj)
        return obj["metadata"]["name"]

    async def drop_workspace_pull_secret(self, ws_id: int, owner: str, name: str) -> None:
        core = k8s.CoreV1Api(await self.api())
        self.writes += 1
        try:
            await core.delete_namespaced_secret(ob.pull_secret_name(ws_id, owner, name), self.namespace)
        except ApiException as e:
            if e.status != 404:
                raise

    async def _create_owned(self, create, delete, obj: dict[str, Any]) -> None:
        """Create a Service, NetworkPolicy or Secret of a job (or a workspace's pull Secret). Its name is the job's
        own, so a 409 is a leftover of this very job whose old Job was just replaced (``_create_job``) and which the
        garbage collector has not taken yet, or of the workspace's last start: it is deleted and made again."""
        name = obj["metadata"]["name"]
        for attempt in range(3):
            self.writes += 1
            try:
                await create(self.namespace, obj)
                return
            except ApiException as e:
                if e.status != 409 or attempt == 2:
                    raise
            self.log.warning("replacing leftover %s %s", obj["kind"], name)
            self.writes += 1
            try:
                await delete(name, self.namespace)
            except ApiException as e:
                if e.status != 404:
                    raise

    async def _create_job(self, batch: k8s.BatchV1Api, job: dict[str, Any], job_id: int) -> dict[str, Any]:
        for attempt in range(2):
            self.writes += 1
            try:
                created = await json_of(await batch.create_namespaced_job(self.namespace, job, _preload_content=False))
                # known at once: the next cycle may look before the watch delivers it (and must not call it lost)
                self.jobs.items.setdefault(f"{self.namespace}/{created['metadata']['name']}", created)
                return created
            except ApiException as e:
                if e.status != 409 or attempt:
                    raise
                # a leftover of this very job (the service died between creating it and recording it)
                name = job["metadata"]["name"]
                self.log.warning("job %d: replacing leftover Kubernetes Job %s", job_id, name)
                await self._delete_job(batch, name)
                await self._wait_gone(name)
        raise AssertionError("unreachable")

    async def _delete_job(self, batch: k8s.BatchV1Api, name: str) -> None:
        self.writes += 1
        try:
            await batch.delete_namespaced_job(name, self.namespace, propagation_policy="Background",
                                              grace_period_seconds=0)
        except ApiException as e:
            if e.status != 404:
                raise

    async def _wait_gone(self, name: str, timeout: float = 10.0) -> None:
        key = f"{self.namespace}/{name}"
        deadline = time.monotonic() + timeout
        while key in self.jobs.items and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    # -- bare pods ------------------------------------------------------------------------------------------
    def run_pods(self, job_id: int, run: str) -> list[dict[str, Any]]:
        """The pods of one role (``run``: its name) of a TiHub job, as the pod watch holds them."""
        return [p for p in self.pods_by_job.get(int(job_id), {}).values()
                if (p["metadata"].get("labels") or {}).get(ob.LABEL_RUN) == run]

    async def _create_pod(self, core: k8s.CoreV1Api, pod: dict[str, Any], job_id: int, run: str) -> dict[str, Any]:
        # a live pod of this very role is a leftover (the service died between creating it and recording it):
        # it would hold its node's room beside the new one
        for old in self.run_pods(job_id, run):
            if is_live(old):
                self.log.warning("job %d: deleting leftover pod %s", job_id, old["metadata"]["name"])
                await self._delete_pod(core, old["metadata"]["name"], grace=0)
        self.writes += 1
        created = await json_of(await core.create_namespaced_pod(self.namespace, pod, _preload_content=False))
        # known at once: the next cycle may look before the watch delivers it (and must not call it lost)
        self.pods_by_job[int(job_id)].setdefault(created["metadata"]["name"], created)
        return created

    async def _delete_pod(self, core: k8s.CoreV1Api, name: str, grace: int | None = None) -> None:
        """Delete one pod: ``grace`` None is the pod's own grace period (its container gets SIGTERM first)."""
        self.writes += 1
        kw = {} if grace is None else {"grace_period_seconds": grace}
        try:
            await core.delete_namespaced_pod(name, self.namespace, **kw)
        except ApiException as e:
            if e.status != 404:
                raise

    async def sweep_finished_pods(self, now: float | None = None) -> list[str]:
        """Delete the bare pods that ended ``finished_job_ttl`` seconds ago or more (their logs go with them)."""
        bare = [p for by in list(self.pods_by_job.values()) for p in by.values() if is_bare(p)]
        names = podstate.expired(bare, time.time() if now is None else now, self.finished_job_ttl)
        if names:
            core = k8s.CoreV1Api(await self.api())
            for name in names:
                await self._delete_pod(core, name)
        return names

    def _start_sweeping(self) -> None:
        """In the process that launches and reconciles (the leader) only: the API processes also watch pods (for
        logs), and a sweep in each would delete every finished pod once per process."""
        if self._sweeper is None:
            self._sweeper = asyncio.ensure_future(self._sweep_loop())

    async def _sweep_loop(self) -> None:
        while True:
            await asyncio.sleep(min(60.0, max(1.0, self.finished_job_ttl / 10)))
            try:
                await self.sweep_finished_pods()
            except (ApiException, OSError) as e:  # the API server away for a while: the next sweep tries again
                self.log.warning("could not delete finished pods: %s", e)
