"""KubernetesBackend: TiHub's jobs as pods and batch/v1 Jobs on a real cluster.

The scheduler decides; this shell only creates, watches and deletes. Per admitted job: one pod TiHub owns (a
one-pod job, ``launch_pods``), or one Indexed Job (all-reduce, or any job with launch_pods off) or one per role
(parameter server), plus a headless Service and, where NetworkPolicies
close user pods, the gang's own NetworkPolicy, and the job's Secrets when it has secret environment entries or a
registry credential -- all of a gang or none (a failed create rolls the others back; the Service, the policy and
the Secrets belong to the first Job). Status comes from shared
watches (``reflector.py``), never from polling; capacity is the nodes' allocatable minus what other
workloads request. After a restart, objects are matched to TiHub's jobs by labels: the known ones are
re-adopted, unfinished ones nobody knows are deleted.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Any

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException
from traitlets import Bool, Dict, Float, Integer, List, Unicode, validate

from ..base import ExecutionBackend, InstanceStatus, JobObservation, NodeCapacity
from . import devicetypes
from . import objects as ob
from . import podstate
from .capacity import capacity
from .client import checked, json_of, new_api_client
from .launch import ENDED, Launching, is_bare, is_live
from .reflector import Reflector
from .usage import KubeletUsage

FINISHED = ("Complete", "Failed", "SuccessCriteriaMet", "FailureTarget")
POD_WARNINGS = "type=Warning,involvedObject.kind=Pod"


class KubernetesBackend(KubeletUsage, Launching, ExecutionBackend):
    vc_whole_nodes = True  # RES2: a VC owns nodes, labelled with the pool label
    reports_start = True  # a launched job is starting until its pods run (observe_job says why they wait)

    kubeconfig = Unicode("", config=True,
                         help="Kubeconfig file to use; empty: the in-cluster service account, else ~/.kube/config.")
    namespace = Unicode("default", config=True, help="Namespace where TiHub creates jobs' Jobs, Services and pods.")
    installation = Unicode("ti-hub", config=True,
                           help="Name of this TiHub installation, labelled on everything it creates: two "
                                "installations sharing a namespace never touch each other's objects.")
    device_resource = Unicode("nvidia.com/gpu", config=True,
                              help="Extended resource that counts devices of the types device_types does not list.")
    device_types = Dict(config=True, help=devicetypes.HELP)
    device_type_label = Unicode("ti-hub.io/device-type", config=True,
                                help="Node label naming the node's device type (e.g. A100); nodes without it "
                                     "offer no devices to TiHub.")
    pool_label = Unicode("ti-hub.io/pool", config=True,
                         help="Node label naming the node's resource pool; unlabelled nodes are in 'default'.")
    run_as_uid = Integer(1000, config=True, help="User id every job container runs as (never 0).")
    run_as_gid = Integer(100, config=True, help="Group id of job containers and of their volumes (fsGroup).")
    tolerations = List(Dict(), config=True, help="Tolerations added to every job pod (device tolerations are added "
                                                 "automatically for pods that ask for devices).")
    image_pull_secrets = List(Unicode(), config=True, help="Image pull secrets every job pod may use.")
    scheduler_name = Unicode("", config=True, help="schedulerName of job pods; empty: the cluster's default.")
    pin_to_placement = Bool(True, config=True,
                            help="Restrict each job's pods to the nodes TiHub's scheduler placed it on (node "
                                 "affinity); off, the kube-scheduler picks among matching nodes.")
    install_pin_policy = Bool(False, config=True,
                              help="Before the first launch, create (or update) the MutatingAdmissionPolicy that pins "
                                   "each job pod to the node TiHub placed it on (needs Kubernetes 1.36, or 1.34 "
                                   "with the beta API on, and the right to manage admission policies). The Helm "
                                   "chart installs it instead. Without it pods are only kept to their gang's set "
                                   "of nodes, where gangs sharing a node can take each other's room.")
    pin_policy_name = Unicode("", config=True,
                              help="Name of the pin policy and its binding; empty: ti-hub-pin-<namespace>.")
    network_policy_per_job = Bool(False, config=True,
                                  help="Give each distributed job a NetworkPolicy that lets its pods, and only its "
                                       "pods, reach each other; owned by the job's first Job, it goes with the job. "
                                       "Needed where a policy closes user pods (the Helm chart's networkPolicy); "
                                       "needs RBAC to create and delete networkpolicies.")
    launch_pods = Bool(True, config=True,
                       help="Run a one-pod job as a pod TiHub creates and deletes itself instead of a batch/v1 Job: "
                            "about half the API server's writes per job (no Job status, finalizer or events). "
                            "TiHub deletes its finished pods after finished_job_ttl. Off: every job is a Job.")
    termination_grace_seconds = Integer(10, config=True, help="Grace period of job pods when stopped.")
    finished_job_ttl = Integer(3600, config=True,
                               help="Seconds a finished job's Job and pods (and so its logs) are kept before they "
                                    "are deleted (a Job's ttlSecondsAfterFinished; TiHub's sweep for its own pods).")
    capacity_all_namespaces = Bool(True, config=True,
                                   help="Subtract what pods in every namespace request from node capacity (needs "
                                        "cluster-wide pod list/watch); off: only pods in TiHub's namespace.")
    connection_limit = Integer(64, config=True, help="Most concurrent connections to the API server.")
    extra_pod_annotations = Dict(Unicode(), config=True, help="Annotations added to every job pod (admin-set).")
    rdma_resource = Unicode("rdma/hca_shared_devices_a", config=True,
                            help="Extended resource every pod of a job whose plan has rdma asks one of: the RDMA "
                                 "shared device plugin's (k8s-rdma-shared-dev-plugin, resource prefix 'rdma' and "
                                 "its configured resourceName). Empty: plans with rdma are refused.")
    start_timeout = Float(900.0, config=True,
                          help="Seconds a job's pod may wait to start (no room on its node yet, a volume that does "
                               "not mount, an image pull still retrying) before the job fails with that reason; "
                               "0: wait forever (the job shows why it waits).")

    @validate("device_types")
    def _check_device_types(self, proposal):
        return devicetypes.checked(proposal["value"], "KubernetesBackend")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._api: k8s.ApiClient | None = None
        self._started: asyncio.Lock | None = None
        self.nodes: Reflector | None = None
        self.pods: Reflector | None = None
        self.jobs: Reflector | None = None
        self.events: Reflector | None = None  # Warning events of pods (why one waits: a volume that does not mount)
        self.pods_by_job: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
        self.writes = 0  # API writes so far (create/delete), for tests and benchmarks
        self._ready: asyncio.Future | None = None  # the namespace checked, the pin policy installed (if asked), once
        self.unpinned_pods = 0  # job pods created without their node (no pin policy), for tests and benchmarks
        self.pod_security_enforced: bool | None = None  # what the first launch's check found
        self._sweeper: asyncio.Future | None = None  # deletes finished bare pods (launch.py)

    @property
    def settings(self) -> ob.KubeSettings:
        return ob.KubeSettings(
            namespace=self.namespace, installation=self.installation, device_resource=self.device_resource,
            device_type_label=self.device_type_label, pool_label=self.pool_label, uid=self.run_as_uid,
            gid=self.run_as_gid, termination_grace_seconds=self.termination_grace_seconds,
            pin_to_placement=self.pin_to_placement, tolerations=tuple(self.tolerations),
            image_pull_secrets=tuple(self.image_pull_secrets), scheduler_name=self.scheduler_name,
            extra_pod_annotations=dict(self.extra_pod_annotations), network_policy=self.network_policy_per_job,
            rdma_resource=self.rdma_resource, device_types=devicetypes.parse(self.device_types))

    @property
    def device_count_rules(self) -> dict[str, list[int]]:
        return devicetypes.count_rules(devicetypes.parse(self.device_types))

    @property
    def devices_per_node(self) -> dict[str, int]:
        return devicetypes.per_node_rules(devicetypes.parse(self.device_types))

    @property
    def supports_rdma(self) -> bool:
        return bool(self.rdma_resource)

    # -- connection and watches ----------------------------------------------------------------------------
    async def api(self) -> k8s.ApiClient:
        if self._api is None:
            self._api = await new_api_client(self.kubeconfig, self.connection_limit)
        return self._api

    async def start_watches(self, jobs: bool = True) -> None:
        """Start the shared watches once (nodes and pods for capacity; Jobs for launched work)."""
        if self._started is None:
            self._started = asyncio.Lock()
        async with self._started:
            api = await self.api()
            core, batch = k8s.CoreV1Api(api), k8s.BatchV1Api(api)
            if self.nodes is None:
                self.nodes = Reflector("nodes", core.list_node, log=self.log, on_event=self._node_event)
                if self.capacity_all_namespaces:
                    lister = core.list_pod_for_all_namespaces
                else:
                    def lister(**kw):
                        return core.list_namespaced_pod(self.namespace, **kw)
                self.pods = Reflector("pods", lister, log=self.log, on_event=self._pod_event)
                await asyncio.gather(self.nodes.start(), self.pods.start())
            if jobs and self.jobs is None:
                sel = ob.job_selector(self.settings)

                def list_jobs(**kw):
                    return batch.list_namespaced_job(self.namespace, label_selector=sel, **kw)
                self.jobs = Reflector("jobs", list_jobs, log=self.log, on_event=self._job_event)

                def list_events(**kw):
                    return core.list_namespaced_event(self.namespace, field_selector=POD_WARNINGS, **kw)
                self.events = Reflector("events", list_events, log=self.log, on_event=self._warning_event)
                await asyncio.gather(self.jobs.start(), self._start_events())

    async def _start_events(self) -> None:
        """Events only add reasons (a volume that does not mount): without the right to read them, jobs still run."""
        try:
            await self.events.start()
        except ApiException as e:
            if e.status != 403:
                raise
            self.log.warning("may not watch events in namespace %s: jobs waiting on a volume mount will not say "
                             "so (grant list and watch on events)", self.namespace)
            self.events = None

    async def _install_pin_policy(self, api: k8s.ApiClient) -> None:
        adm = k8s.AdmissionregistrationV1Api(api)
        name = self.pin_policy_name or ob.safe_name("ti-hub-pin", self.namespace)
        policy, binding = ob.pin_policy(name, self.namespace)
        for obj, create, patch in ((policy, adm.create_mutating_admission_policy, adm.patch_mutating_admission_policy),
                                   (binding, adm.create_mutating_admission_policy_binding,
                                    adm.patch_mutating_admission_policy_binding)):
            try:
                await create(obj)
            except ApiException as e:
                if e.status != 409:
                    raise
                await patch(name, {"spec": obj["spec"]})
        self.log.info("pin policy %s installed for namespace %s", name, self.namespace)

    async def _prepare(self) -> None:
        core = k8s.CoreV1Api(await self.api())
        self.pod_security_enforced = await self._check_pod_security(core)
        if not self.pin_to_placement:
            return
        if self.install_pin_policy:
            await self._install_pin_policy(await self.api())
        await self._check_pin_policy(core, wait=10.0 if self.install_pin_policy else 0.0)

    async def _check_pod_security(self, core: k8s.CoreV1Api) -> bool:
        """Whether the API server itself refuses pods that are not restricted in this namespace (Pod Security
        admission): a dry-run create (nothing is stored) of a probe pod that breaks only the restricted profile.
        TiHub's pods are restricted either way; this says whether the cluster checks it too."""
        try:
            await core.create_namespaced_pod(self.namespace, ob.pod_security_probe(self.settings), dry_run="All")
        except ApiException as e:
            if e.status == 403 and "PodSecurity" in str(e.body or ""):
                return True
            self.log.warning("could not check Pod Security admission in namespace %s (%s %s)", self.namespace,
                             e.status, e.reason)
            return False
        self.log.warning("namespace %s does not enforce Pod Security 'restricted': the API server would admit a "
                         "pod that is not restricted there. Label it: kubectl label namespace %s "
                         "pod-security.kubernetes.io/enforce=restricted (see docs/kubernetes.md)",
                         self.namespace, self.namespace)
        return False

    async def _check_pin_policy(self, core: k8s.CoreV1Api, wait: float) -> bool:
        """Whether a job pod created now would get its node: a dry-run create (nothing is stored) of a probe pod,
        retried for ``wait`` seconds while a just-installed policy reaches the API server's cache."""
        probe = ob.pin_probe(self.settings)
        deadline = time.monotonic() + wait
        while True:
            try:
                pod = await json_of(await core.create_namespaced_pod(self.namespace, probe, dry_run="All",
                                                                     _preload_content=False))
                if (pod.get("spec", {}).get("nodeSelector") or {}).get(ob.HOSTNAME_LABEL) == ob.PIN_PROBE_NODE:
                    return True
            except ApiException as e:
                self.log.warning("could not check the pin policy (%s %s)", e.status, e.reason)
                return False
            if time.monotonic() >= deadline:
                self.log.warning("no pin policy for namespace %s: job pods are kept to their gang's nodes only, and "
                                 "gangs sharing a node may take each other's room (see docs/kubernetes.md)",
                                 self.namespace)
                return False
            await asyncio.sleep(0.2)

    def _poke(self) -> None:
        poke = getattr(self.parent, "poke", None)
        if poke:
            poke()

    def _node_event(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if kind != "MODIFIED" or (old and old.get("status", {}).get("allocatable") !=
                                  obj.get("status", {}).get("allocatable")):
            self._poke()

    def _pod_event(self, kind: str, pod: dict[str, Any], old: dict[str, Any] | None) -> None:
        labels = pod["metadata"].get("labels") or {}
        job_id = labels.get(ob.LABEL_JOB_ID)
        if job_id is None or pod["metadata"].get("namespace") != self.namespace:
            return
        by = self.pods_by_job[int(job_id)]
        name = pod["metadata"]["name"]
        if kind == "DELETED":
            by.pop(name, None)
            if not by:
                self.pods_by_job.pop(int(job_id), None)
            if is_bare(pod):
                self._poke()  # a bare pod gone (a Job's pod is replaced or goes with its Job, seen in _job_event)
        else:
            if kind == "ADDED" and old is None and ob.ANN_PLACEMENT in (pod["metadata"].get("annotations") or {}) \
                    and ob.HOSTNAME_LABEL not in (pod.get("spec", {}).get("nodeSelector") or {}):
                self.unpinned_pods += 1
                if self.unpinned_pods == 1:
                    self.log.warning("pod %s was created without its node: the pin policy is missing, so gangs "
                                     "sharing a node may take each other's room (see docs/kubernetes.md)", name)
            by[name] = pod
        phase, was = pod.get("status", {}).get("phase"), (old or {}).get("status", {}).get("phase")
        if (phase != was and phase in ("Succeeded", "Failed", "Running")) or \
                (phase == "Pending" and pod.get("status") != (old or {}).get("status")):
            self._poke()  # an end, a start, or a new reason to wait

    def _warning_event(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if kind != "DELETED" and obj.get("reason") in podstate.MOUNT_EVENTS:
            self._poke()

    def _job_event(self, kind: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if kind == "DELETED":
            self._poke()

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for r in (self.nodes, self.pods, self.jobs, self.events):
            if r:
                await r.stop()
        if getattr(self, "_kubelet_reader", None) is not None:
            self._kubelet_reader.forget()
            self._kubelet_reader = None
        if self._api:
            await self._api.close()
            self._api = None

    # -- capacity ------------------------------------------------------------------------------------------
    async def capacity(self) -> list[NodeCapacity]:
        await self.start_watches(jobs=False)
        return capacity(self.nodes.items.values(), self.pods.items.values(), self.settings)

    async def assign_machine(self, node: str, vc: str) -> None:
        """RES2: label the node with its virtual cluster (the pool label capacity reads)."""
        core = k8s.CoreV1Api(await self.api())
        await core.patch_node(node, ob.pool_label_patch(self.pool_label, vc),
                              _content_type="application/merge-patch+json")

    async def set_schedulable(self, node: str, schedulable: bool) -> None:
        """ADM3: cordon or uncordon the node (what `kubectl cordon` does); its running pods keep running."""
        core = k8s.CoreV1Api(await self.api())
        await core.patch_node(node, {"spec": {"unschedulable": None if schedulable else True}},
                              _content_type="application/merge-patch+json")

    # -- observation ----------------------------------------------------------------------------------------
    def job_pods(self, job_id: int) -> list[dict[str, str]]:
        return sorted(({"name": p["metadata"]["name"], "phase": str(p.get("status", {}).get("phase", "")),
                        "node": str(p.get("spec", {}).get("nodeName") or "")}
                       for p in self.pods_by_job.get(int(job_id), {}).values()), key=lambda p: p["name"])

    def _pods_of(self, job_id: int, job_name: str) -> dict[int, dict[str, Any]]:
        """Newest pod of each completion index of one role (its Kubernetes Job, or its bare pod)."""
        out: dict[int, dict[str, Any]] = {}
        for pod in self.pods_by_job.get(job_id, {}).values():
            if not ob.runs_role(pod, job_name):
                continue
            idx = ob.completion_index(pod)
            cur = out.get(idx)
            if cur is None or pod["metadata"]["creationTimestamp"] > cur["metadata"]["creationTimestamp"]:
                out[idx] = pod
        return out

    async def observe_job(self, job_id: int, state: dict[str, Any]) -> JobObservation:
        await self.start_watches()
        insts: list[InstanceStatus] = []
        # a view, not a copy: read only for a pod still waiting on its node, synchronously (no change under it)
        events = self.events.items.values() if self.events else ()
        now = time.time()
        for role in state.get("roles", []):
            job = None if role.get("pod") else self.jobs.items.get(f"{state['namespace']}/{role['job']}")
            pods = self._pods_of(job_id, role["job"])
            for i in range(role["count"]):
                if role.get("pod") and i not in pods:
                    insts.append(InstanceStatus(role["offset"] + i, "lost", None, "its pod was deleted"))
                    continue
                insts.append(podstate.instance_status(role["offset"] + i, pods.get(i), job, state.get("memory_mib"),
                                                      events=events, now=now, start_timeout=self.start_timeout))
        return JobObservation(tuple(insts))

    async def stop(self, job_id: int, state: dict[str, Any], grace_seconds: float = 5.0) -> None:
        """Delete the job's Jobs and pods (a Job's pods and Service go with it) unless all of it already ended:
        finished Jobs and pods stay for ``finished_job_ttl`` so that their logs can still be read."""
        await self.start_watches()
        api = await self.api()
        batch, core = k8s.BatchV1Api(api), k8s.CoreV1Api(api)
        obs = await self.observe_job(job_id, state)
        # a pod TiHub gave up on (an image it cannot pull, a start that timed out) has not ended: it is Pending and
        # holds its node's room until deleted
        live = any(p.get("status", {}).get("phase") not in ENDED for p in self.pods_by_job.get(job_id, {}).values())
        if obs.instances and all(i.state == "exited" for i in obs.instances) and not live and \
                all(r.get("pod") or f"{state['namespace']}/{r['job']}" in self.jobs.items
                    for r in state.get("roles", [])):
            return
        for role in state.get("roles", []):
            if not role.get("pod"):
                await self._delete_job(batch, role["job"])
                continue
            for pod in self.run_pods(job_id, role["job"]):
                if is_live(pod):
                    await self._delete_pod(core, pod["metadata"]["name"])
        # the devices are free once the pods are gone (or ended): wait for that, within the grace period
        deadline = time.monotonic() + grace_seconds + 5
        while time.monotonic() < deadline and any(
                p.get("status", {}).get("phase") not in ("Succeeded", "Failed")
                for p in self.pods_by_job.get(job_id, {}).values()):
            await asyncio.sleep(0.1)

    async def endpoint_address(self, job_id: int, state: dict[str, Any], instance: int, port: int | None = None
                               ) -> tuple[str, dict[int, int] | None]:
        """The pod's IP from the shared pod watch: single-instance jobs have no Service to give them a DNS name,
        and an IP needs no lookup. The chart's NetworkPolicies let the hub's pod reach 40000-49999 of job pods."""
        await self.start_watches(jobs=False)
        for role in state.get("roles", []):
            first, count = int(role["offset"]), int(role["count"])
            if first <= instance < first + count:
                pod = self._pods_of(job_id, role["job"]).get(instance - first) or {}
                status = pod.get("status") or {}
                if status.get("phase") != "Running" or not status.get("podIP"):
                    raise LookupError(f"instance {instance} of job {job_id} has no running pod")
                return status["podIP"], None
        raise LookupError(f"job {job_id} has no instance {instance}")

    async def cleanup(self, job_id: int, state: dict[str, Any]) -> None:
        return None  # nothing outlives the Jobs: scratch is emptyDir, claims belong to volumes

    async def logs(self, job_id: int, state: dict[str, Any], instance: int = 0, offset: int = 0,
                   limit: int = 1 << 20) -> tuple[str, int]:
        await self.start_watches()
        pod = None
        for role in state.get("roles", []):
            if role["offset"] <= instance < role["offset"] + role["count"]:
                pod = self._pods_of(job_id, role["job"]).get(instance - role["offset"])
        if pod is None or not pod.get("spec", {}).get("nodeName"):
            return "", offset
        core = k8s.CoreV1Api(await self.api())
        try:
            resp = await checked(await core.read_namespaced_pod_log(
                pod["metadata"]["name"], state["namespace"], container="main", _preload_content=False))
            try:
                data = await resp.read()
            finally:
                resp.release()
        except ApiException as e:
            if e.status in (400, 404):  # not started yet, or already gone
                return "", offset
            raise
        chunk = data[offset:offset + limit]
        return chunk.decode(errors="replace"), offset + len(chunk)

    async def reconcile(self, known: dict[int, dict[str, Any]]) -> dict[int, bool]:
        await self.start_watches()
        self._start_sweeping()
        batch = k8s.BatchV1Api(await self.api())
        alive: dict[int, bool] = {}
        for job_id, state in known.items():
            obs = await self.observe_job(job_id, state)
            alive[job_id] = any(i.state in ("running", "starting") for i in obs.instances)
        known_names = {r["job"] for st in known.values() for r in st.get("roles", [])}
        for job in list(self.jobs.items.values()):
            name = job["metadata"]["name"]
            if name in known_names or job_finished(job):
                continue
            self.log.warning("deleting orphaned Kubernetes Job %s (TiHub job %s is not running)", name,
                             job["metadata"].get("labels", {}).get(ob.LABEL_JOB_ID))
            await self._delete_job(batch, name)
        core = k8s.CoreV1Api(await self.api())
        for by in list(self.pods_by_job.values()):
            for pod in list(by.values()):
                meta = pod["metadata"]
                if not is_bare(pod) or meta["labels"][ob.LABEL_RUN] in known_names or not is_live(pod):
                    continue
                self.log.warning("deleting orphaned pod %s (TiHub job %s is not running)", meta["name"],
                                 meta.get("labels", {}).get(ob.LABEL_JOB_ID))
                await self._delete_pod(core, meta["name"], grace=0)
        return alive


def job_finished(job: dict[str, Any]) -> bool:
    return any(podstate.job_condition(job, k) for k in FINISHED)

