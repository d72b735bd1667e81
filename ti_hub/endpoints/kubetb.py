"""TensorBoard for a job's log directory on Kubernetes: one pod per (job, logdir) in the user namespace.

The pod mounts the volume behind the logdir read-only (the PersistentVolumeClaim, at the logdir's sub-path, so
it sees nothing else of the volume), runs ``python3 -m tensorboard.main`` from ``TiService.tensorboard_image``
under the endpoint's path prefix, and is reached by the endpoints proxy at its pod IP on ``TB_PORT`` (inside the
interactive range 40000-49999 that the chart's NetworkPolicy opens from the hub's pod).

The cluster is the record: every API process finds the pod by name and labels, so nothing is kept in files. A
pod lives at most ``TiService.tensorboard_idle_timeout`` seconds (``activeDeadlineSeconds``; there is no idle
clock across processes here), then a new start request replaces it. Its labels keep it out of TiHub's own
accounting (no installation or job-id label): capacity counts its small requests like any other pod's.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..backends.k8s.names import label_value, safe_name
from ..backends.k8s.objects import (ANN_OWNER, LABEL_KIND, LABEL_OWNER, MANAGED_BY, KubeSettings,
                                    container_security_context, pod_security_context, pvc_name, quantity_cpu)
from ..domain.errors import BadGateway, Conflict, Unavailable

TB_PORT = 46006
LABEL_TB_OF = "ti-hub.io/tensorboard-of"  # the installation (not LABEL_INSTALLATION: capacity must count it)
LABEL_TB_JOB = "ti-hub.io/tensorboard-job"
ANN_LOGDIR = "ti-hub.io/logdir"
ANN_PREFIX = "ti-hub.io/prefix"
ANN_KEY = "ti-hub.io/tensorboard-key"
ENDED = ("Succeeded", "Failed")
FIND_TTL = 5.0


# -- pure ----------------------------------------------------------------------------------------------------
def pod_name(s: KubeSettings, job_id: int, key: str) -> str:
    return safe_name("ti-tb", job_id, key, s.installation)


def selector(s: KubeSettings, job_id: int | None = None) -> str:
    sel = f"{MANAGED_BY}=ti-hub,{LABEL_KIND}=tensorboard,{LABEL_TB_OF}={label_value(s.installation)}"
    return sel + (f",{LABEL_TB_JOB}={int(job_id)}" if job_id is not None else "")


def tensorboard_pod(s: KubeSettings, *, job_id: int, owner: str, key: str, logdir: str, claim: str, sub_path: str,
                    prefix: str, image: str, lifetime_s: int, cpu: float = 0.5, memory_mib: int = 1024
                    ) -> dict[str, Any]:
    labels = {MANAGED_BY: "ti-hub", LABEL_KIND: "tensorboard", LABEL_TB_OF: label_value(s.installation),
              LABEL_TB_JOB: str(int(job_id)), LABEL_OWNER: label_value(owner)}
    mount: dict[str, Any] = {"name": "logs", "mountPath": "/logs", "readOnly": True}
    if sub_path:
        mount["subPath"] = sub_path
    limits = {"cpu": quantity_cpu(cpu), "memory": f"{int(memory_mib)}Mi"}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name(s, job_id, key), "namespace": s.namespace, "labels": labels,
                     "annotations": {ANN_OWNER: owner, ANN_LOGDIR: logdir, ANN_PREFIX: prefix, ANN_KEY: key}},
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": max(60, int(lifetime_s)),
            "automountServiceAccountToken": False,  # TensorBoard needs no Kubernetes API
            "enableServiceLinks": False,
            "securityContext": pod_security_context(s),
            **({"imagePullSecrets": [{"name": n} for n in s.image_pull_secrets]} if s.image_pull_secrets else {}),
            "containers": [{
                "name": "tensorboard", "image": image,
                "command": ["python3", "-m", "tensorboard.main"],
                "args": ["--logdir", "/logs", "--path_prefix", prefix, "--host", "0.0.0.0", "--port", str(TB_PORT),
                         "--load_fast", "false"],
                "env": [{"name": "HOME", "value": "/tmp"}],
                "ports": [{"name": "http", "containerPort": TB_PORT}],
                "readinessProbe": {"httpGet": {"path": prefix + "/", "port": TB_PORT}, "periodSeconds": 2},
                "resources": {"requests": dict(limits), "limits": limits},
                "securityContext": container_security_context(s),
                "volumeMounts": [mount, {"name": "tmp", "mountPath": "/tmp"}],
            }],
            "volumes": [{"name": "logs", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}}],
        },
    }


def _ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and bool(status.get("podIP")) and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def record_of(pod: dict[str, Any]) -> dict[str, Any] | None:
    """What the API and the proxy use (the local TensorBoards' record shape), for a pod that answers."""
    if not _ready(pod):
        return None
    meta = pod["metadata"]
    ann = meta.get("annotations") or {}
    started = (pod.get("status") or {}).get("startTime") or meta.get("creationTimestamp") or ""
    return {"job_id": int(meta["labels"][LABEL_TB_JOB]), "key": ann.get(ANN_KEY, ""), "owner": ann.get(ANN_OWNER),
            "logdir": ann.get(ANN_LOGDIR, ""), "prefix": ann.get(ANN_PREFIX, ""), "host": pod["status"]["podIP"],
            "port": TB_PORT, "pod": meta["name"], "started_at": started}


def why_waiting(pod: dict[str, Any]) -> str:
    """A pod that does not answer yet, in a few words (image pulls, mounts, scheduling)."""
    status = pod.get("status") or {}
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return f"{waiting['reason']}: {waiting.get('message', '')}".strip(": ")
    for cond in status.get("conditions") or []:
        if cond.get("status") == "False" and cond.get("message"):
            return cond["message"]
    return status.get("reason") or status.get("phase") or "starting"


# -- I/O -----------------------------------------------------------------------------------------------------
class KubeTensorBoards:
    """The local ``TensorBoards``' interface (``find``, ``list_of``, ``start_on_volume``, ``stop_some``)."""

    def __init__(self, backend: Any, image: str, lifetime_s: float = 3600.0, max_running: int = 8,
                 ready_timeout: float = 25.0, cpu: float = 0.5, memory_mib: int = 1024, log: Any = None):
        self.backend, self.image, self.lifetime_s = backend, image, lifetime_s
        self.max_running, self.ready_timeout, self.cpu, self.memory_mib = max_running, ready_timeout, cpu, memory_mib
        self.log = log
        self._found: dict[str, tuple[float, dict[str, Any]]] = {}  # pod name -> (when, record)

    async def _core(self):
        from kubernetes_asyncio import client as k8s

        return k8s.CoreV1Api(await self.backend.api())

    async def _pods(self, job_id: int | None = None) -> list[dict[str, Any]]:
        core = await self._core()
        listing = await core.list_namespaced_pod(self.backend.namespace, label_selector=selector(
            self.backend.settings, job_id))
        api = core.api_client
        return [api.sanitize_for_serialization(p) for p in listing.items]

    async def _read(self, name: str) -> dict[str, Any] | None:
        from kubernetes_asyncio.client.exceptions import ApiException

        core = await self._core()
        try:
            pod = await core.read_namespaced_pod(name, self.backend.namespace)
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return core.api_client.sanitize_for_serialization(pod)

    async def _delete(self, name: str) -> None:
        from kubernetes_asyncio.client.exceptions import ApiException

        core = await self._core()
        try:
            await core.delete_namespaced_pod(name, self.backend.namespace, grace_period_seconds=0)
        except ApiException as e:
            if e.status != 404:
                raise

    async def find(self, job_id: int, key: str, max_age: float = FIND_TTL) -> dict[str, Any] | None:
        """The running TensorBoard; the proxy asks at every request (TensorBoard's page polls), so an answer is
        reused for ``max_age`` seconds: a pod deleted meanwhile costs a 502, not an API read per request."""
        name = pod_name(self.backend.settings, job_id, key)
        now = time.monotonic()
        hit = self._found.get(name)
        if hit is not None and now - hit[0] < max_age:
            return hit[1]
        self._found.pop(name, None)
        pod = await self._read(name)
        rec = record_of(pod) if pod else None
        if len(self._found) > 1000:
            self._found.clear()
        if rec is not None:  # a miss is asked again: the pod may answer any moment
            self._found[name] = (now, rec)
        return rec

    async def list_of(self, job_id: int) -> list[dict[str, Any]]:
        recs = [r for p in await self._pods(job_id) if (r := record_of(p))]
        return sorted(recs, key=lambda r: r["logdir"])

    def touch(self, rec: dict[str, Any]) -> None:
        pass  # a pod's lifetime is fixed (activeDeadlineSeconds)

    async def start_on_volume(self, job_id: int, owner: str, logdir: str, volume_id: int, volume: str, rel: str,
                              prefix: str, key: str, uid: int | None = None) -> tuple[dict[str, Any], bool]:
        """(the record, whether it was started now); waits until it answers (``ready_timeout``: an image pull may
        take longer, then a 503 says why it waits and the next request finds the pod)."""
        s = self.backend.settings
        name = pod_name(s, job_id, key)
        pod = await self._read(name)
        if pod is not None and (pod.get("status") or {}).get("phase") in ENDED:
            await self._delete(name)  # its lifetime ended: a new one
            await self._wait_gone(name)
            pod = None
        started = pod is None
        if started:
            running = [p for p in await self._pods() if (p.get("status") or {}).get("phase") not in ENDED]
            if len(running) >= self.max_running:
                raise Conflict(f"{self.max_running} TensorBoards already run on this TiHub (the most at once); stop "
                               "one with DELETE /jobs/ID/tensorboard, or wait until one ends "
                               f"(each runs at most {self.lifetime_s:g} s)", field="logdir")
            body = tensorboard_pod(s, job_id=job_id, owner=owner, key=key, logdir=logdir,
                                   claim=pvc_name(volume_id, volume), sub_path=rel, prefix=prefix, image=self.image,
                                   lifetime_s=int(self.lifetime_s), cpu=self.cpu, memory_mib=self.memory_mib)
            from kubernetes_asyncio.client.exceptions import ApiException

            core = await self._core()
            try:
                await core.create_namespaced_pod(s.namespace, body)
            except ApiException as e:
                if e.status != 409:  # 409: another API process created it first
                    raise BadGateway(f"Kubernetes refused TensorBoard's pod ({e.status} {e.reason})",
                                     field="logdir") from None
        return await self._wait_ready(name), started

    async def _wait_ready(self, name: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.ready_timeout
        pod = None
        while time.monotonic() < deadline:
            pod = await self._read(name)
            if pod is None:
                raise BadGateway("TensorBoard's pod was deleted while it started", field="logdir")
            if (rec := record_of(pod)) is not None:
                return rec
            if (pod.get("status") or {}).get("phase") in ENDED:
                raise BadGateway(f"TensorBoard's pod ended at start: {why_waiting(pod)}", field="logdir")
            await asyncio.sleep(0.5)
        raise Unavailable(f"TensorBoard's pod {name} does not answer yet ({why_waiting(pod or {})}); "
                          "ask again in a moment", field="logdir")

    async def _wait_gone(self, name: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and await self._read(name) is not None:
            await asyncio.sleep(0.2)

    async def stop_some(self, job_id: int, key: str | None = None) -> int:
        self._found.clear()
        n = 0
        for pod in await self._pods(job_id):
            if key is not None and (pod["metadata"].get("annotations") or {}).get(ANN_KEY) != key:
                continue
            if (pod.get("status") or {}).get("phase") not in ENDED:
                n += 1
            await self._delete(pod["metadata"]["name"])
        return n

    def stop_all(self) -> None:
        pass  # pods outlive a service process (other API processes may serve them); their lifetime ends them
