"""Kubernetes manifests for TiHub's jobs and workspaces: pure functions from a launch to plain dicts.

No I/O here (kubespawner's ``objects.py`` habit), so every rule is tested without a cluster:

* restricted pods: non-root, no privilege escalation, all capabilities dropped, seccomp RuntimeDefault,
  no service-account token, no host namespaces, and volumes only of TiHub's own making (PVCs by name,
  emptyDir scratch and /dev/shm) -- user input never reaches a volume spec, a host path or a privilege;
* a gang in at most four objects: a single-node job is one Job; all-reduce is one Indexed Job plus a
  headless Service for the rendezvous; parameter-server is one Indexed Job per role plus the Service; and,
  where NetworkPolicies close user pods (``KubeSettings.network_policy``), a gang's own policy that lets its
  pods, and only its pods, reach each other;
* each pod on its own node: the pod template lists the placement by completion index
  (``ti-hub.io/placement``) and a MutatingAdmissionPolicy (``pin_policy``) turns it into the pod's hostname
  node selector as the Job controller creates it -- no extra API write;
* each instance's environment is exactly ``ti_hub.backends.envs.instance_envs`` with per-instance DNS
  names: values shared by a role are plain env entries, the per-index ones (RANK, TF_CONFIG, ...) are set by
  a short shell prelude from the completion index Kubernetes gives every pod of an Indexed Job;
* a job's secret environment entries live in one Secret of the job's own (``env_secret``), which the pods
  reference by key: the values never appear in a Job or pod spec that anyone listing pods can read; so does the
  jupyter endpoint's token (``jupyterep``: the server beside instance 0's command).
"""

from __future__ import annotations

import base64
import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from ..base import LaunchSpec, Mount
from ...domain import personal
from ..envs import instance_envs
from . import jupyterep
from .devicetypes import DeviceType, resource_of
from .names import label_value, safe_name

MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_INSTALLATION = "ti-hub.io/installation"
LABEL_JOB_ID = "ti-hub.io/job-id"
LABEL_OWNER = "ti-hub.io/owner"
LABEL_ROLE = "ti-hub.io/role"
LABEL_KIND = "ti-hub.io/kind"
ANN_OWNER = "ti-hub.io/owner"
ANN_NAME = "ti-hub.io/name"
ANN_ROLE_OFFSET = "ti-hub.io/role-offset"
ANN_PLACEMENT = "ti-hub.io/placement"
LABEL_RUN = "ti-hub.io/run"  # the role's name (its Kubernetes Job's, or a bare pod's): finds a role's pods
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# Pod Security admission labels of every namespace where TiHub's pods run: the API server itself then refuses any
# pod there that is not restricted, whoever renders it. The Helm chart's user Namespace carries them (its test
# compares), and so does every namespace the Kubernetes tests make. "latest": a rule added by a newer Kubernetes
# applies at once; TiHub's pods are built to pass it.
POD_SECURITY_LABELS = {
    "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest",
    "pod-security.kubernetes.io/audit": "restricted", "pod-security.kubernetes.io/audit-version": "latest",
    "pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/warn-version": "latest",
}


@dataclass(frozen=True)
class KubeSettings:
    """What an admin configures (traits of the backend and spawner), never what a user sends."""

    namespace: str = "default"
    installation: str = "ti-hub"
    device_resource: str = "nvidia.com/gpu"
    device_type_label: str = "ti-hub.io/device-type"
    pool_label: str = "ti-hub.io/pool"
    uid: int = 1000
    gid: int = 100
    master_port: int = 29500
    tf_port: int = 2222
    termination_grace_seconds: int = 10
    pin_to_placement: bool = True
    tolerations: tuple[dict[str, Any], ...] = ()
    image_pull_secrets: tuple[str, ...] = ()
    scheduler_name: str = ""
    extra_pod_annotations: dict[str, str] = field(default_factory=dict)
    network_policy: bool = False  # each gang gets its own NetworkPolicy (job_network_policy)
    rdma_resource: str = "rdma/hca_shared_devices_a"  # what a pod of an RDMA plan asks one of
    # per device type: its resource, node selector, tolerations (devicetypes.py); others use device_resource
    device_types: dict[str, DeviceType] = field(default_factory=dict)

    def resource_of(self, device_type: str) -> str:
        """The extended resource that counts ``device_type``'s devices."""
        return resource_of(self.device_types, self.device_resource, device_type)


# -- names ------------------------------------------------------------------------------------------------------
def base_name(job_id: int, owner: str, name: str) -> str:
    # 48 leaves room for "-ps"/"-w" and the "-<index>" Kubernetes appends to an Indexed Job's pod hostnames
    return safe_name("ti", job_id, owner, name, max_len=48)


def pvc_name(volume_id: int, volume: str) -> str:
    return safe_name("ti-vol", volume_id, volume)


def personal_claim_name(kind: str, owner: str) -> str:
    """The claim of one of a user's personal directories (STO8): ``ti-work-...`` or ``ti-archive-...``."""
    return safe_name(f"ti-{kind}", owner)


def job_selector(s: KubeSettings, job_id: int | None = None) -> str:
    sel = f"{MANAGED_BY}=ti-hub,{LABEL_INSTALLATION}={label_value(s.installation)}"
    return sel + (f",{LABEL_JOB_ID}={job_id}" if job_id is not None else "")


def labels(s: KubeSettings, job_id: int, owner: str, kind: str = "job", role: str | None = None) -> dict[str, str]:
    out = {MANAGED_BY: "ti-hub", LABEL_INSTALLATION: label_value(s.installation), LABEL_JOB_ID: str(job_id),
           LABEL_OWNER: label_value(owner), LABEL_KIND: kind}
    if role:
        out[LABEL_ROLE] = role
    return out


# -- pod pieces (shared with the workspace spawner) -------------------------------------------------------------
def pod_security_context(s: KubeSettings) -> dict[str, Any]:
    return {"runAsNonRoot": True, "runAsUser": s.uid, "runAsGroup": s.gid, "fsGroup": s.gid,
            "seccompProfile": {"type": "RuntimeDefault"}}


def container_security_context(s: KubeSettings) -> dict[str, Any]:
    return {"runAsNonRoot": True, "runAsUser": s.uid, "runAsGroup": s.gid, "privileged": False,
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}}


def quantity_cpu(cpu: float) -> str:
    return f"{int(round(cpu * 1000))}m"


def resources(s: KubeSettings, cpu: float, memory_mib: int, devices: int, rdma: bool = False,
              device_type: str = "") -> dict[str, Any]:
    """Requests equal limits: the scheduler's accounting is exact and a pod never bursts into a neighbour.
    ``rdma``: one of the RDMA device plugin's shared resource (the plan's rdma). Devices are of ``device_type``'s
    resource (``s.device_types``), else ``s.device_resource``."""
    limits = {"cpu": quantity_cpu(cpu), "memory": f"{int(memory_mib)}Mi"}
    if devices:
        limits[s.resource_of(device_type)] = str(int(devices))
    if rdma:
        limits[s.rdma_resource] = "1"
    return {"requests": dict(limits), "limits": limits}


def placement(s: KubeSettings, device_type: str, pool: str, devices: int,
              nodes: list[str] | None) -> dict[str, Any]:
    """nodeSelector, affinity and tolerations of one role's pods (merged into the pod spec). A configured device
    type (``s.device_types``) brings its own node selector (its architecture, say) and tolerations; any other keeps
    to nodes labelled with it."""
    selector: dict[str, str] = {}
    dtype = s.device_types.get(device_type) if devices else None
    if dtype is not None:
        # its nodes may be known by their resource alone (no device-type label): the type's selector says where
        selector.update(dtype.selector)
    elif devices and device_type and device_type != "cpu":
        selector[s.device_type_label] = device_type
    if pool and pool != "default":
        selector[s.pool_label] = pool
    out: dict[str, Any] = {"nodeSelector": selector} if selector else {}
    if nodes and s.pin_to_placement:
        # the kube-scheduler binds within the nodes TiHub's scheduler placed this gang on
        out["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": sorted(set(nodes))}]}]}}}
    tolerations = [dict(t) for t in s.tolerations]
    if devices:
        tolerations.append({"key": s.resource_of(device_type), "operator": "Exists", "effect": "NoSchedule"})
        if dtype is not None:
            tolerations += [dict(t) for t in dtype.tolerations if t not in tolerations]
    if tolerations:
        out["tolerations"] = tolerations
    return out


def volumes(mounts: tuple[Mount, ...] | list[Mount], scratch_paths: tuple[str, ...] | list[str],
            shm_mib: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(pod volumes, container volumeMounts): claims by TiHub's own names (a volume's, or a personal directory's
    ``Mount.claim``), scratch and /dev/shm as emptyDir."""
    vols: list[dict[str, Any]] = []
    vmounts: list[dict[str, Any]] = []
    for i, mnt in enumerate(mounts):
        if mnt.claim:
            claim = mnt.claim
        elif mnt.kind in personal.KINDS:
            continue  # a personal directory of a driver without claims (a host directory): no pod can reach it
        elif mnt.volume_id is None:
            raise ValueError(f"mount {mnt.mount_path} has no TiHub volume: Kubernetes mounts volumes by claim")
        else:
            claim = pvc_name(mnt.volume_id, mnt.volume)
        name = f"vol-{i}"
        vols.append({"name": name, "persistentVolumeClaim": {"claimName": claim, "readOnly": bool(mnt.read_only)}})
        vmounts.append({"name": name, "mountPath": mnt.mount_path, "readOnly": bool(mnt.read_only)})
    for i, path in enumerate(scratch_paths):
        name = f"scratch-{i}"
        vols.append({"name": name, "emptyDir": {}})
        vmounts.append({"name": name, "mountPath": path})
    if shm_mib:
        vols.append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{int(shm_mib)}Mi"}})
        vmounts.append({"name": "dshm", "mountPath": "/dev/shm"})
    return vols, vmounts


# -- jobs -------------------------------------------------------------------------------------------------------
def _role_groups(spec: LaunchSpec) -> list[tuple[str, int, int]]:
    """(role, first instance index, count) in index order: ps first, then workers."""
    groups: list[tuple[str, int, int]] = []
    for inst in spec.instances:
        if groups and groups[-1][0] == inst.role:
            r, first, n = groups[-1]
            groups[-1] = (r, first, n + 1)
        else:
            groups.append((inst.role, inst.index, 1))
    return groups


def role_job_names(spec: LaunchSpec) -> dict[str, str]:
    base = base_name(spec.job_id, spec.owner, spec.name)
    if spec.strategy == "ps":
        return {"ps": f"{base}-ps", "worker": f"{base}-w"}
    return {"worker": base}


def instance_hosts(s: KubeSettings, spec: LaunchSpec) -> list[str]:
    """Each instance's stable DNS name: ``<job>-<index>.<service>`` (the Indexed Job's pod hostnames)."""
    service = base_name(spec.job_id, spec.owner, spec.name)
    names = role_job_names(spec)
    hosts = []
    for role, _first, n in _role_groups(spec):
        hosts += [f"{names[role]}-{i}.{service}" for i in range(n)]
    return hosts


def job_envs(s: KubeSettings, spec: LaunchSpec) -> list[dict[str, str]]:
    """The environment of every instance, as instance_envs makes it for these hosts and ports."""
    workers = sum(1 for i in spec.instances if i.role == "worker")
    ps = len(spec.instances) - workers
    hosts = instance_hosts(s, spec)
    if spec.strategy == "ps":
        return instance_envs("ps", workers, ps, hosts[0], None, [s.tf_port] * ps, [s.tf_port] * workers,
                             hosts=hosts)
    return instance_envs(spec.strategy, workers, 0, hosts[0], s.master_port)


def split_env(envs: list[dict[str, str]]) -> tuple[dict[str, str], list[dict[str, str]]]:
    """(values every instance shares, each instance's own values)."""
    shared = {k: v for k, v in envs[0].items() if all(e.get(k) == v for e in envs[1:])}
    return shared, [{k: v for k, v in e.items() if k not in shared} for e in envs]


def prelude(own: list[dict[str, str]]) -> str:
    """Shell lines exporting each completion index's own values (empty when there are none)."""
    if not any(own):
        return ""
    cases = []
    for i, env in enumerate(own):
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
        cases.append(f"  {i}) export {exports} ;;")
    return "case \"$JOB_COMPLETION_INDEX\" in\n" + "\n".join(cases) + \
        "\n  *) echo \"ti-hub: unexpected completion index $JOB_COMPLETION_INDEX\" >&2; exit 2 ;;\nesac\n"


def env_secret_name(spec: LaunchSpec) -> str:
    return base_name(spec.job_id, spec.owner, spec.name) + "-env"


def env_secret(s: KubeSettings, spec: LaunchSpec) -> dict[str, Any] | None:
    """The job's secret environment entries, and its jupyter endpoint's token, as a Secret (None without any);
    the backend makes the job's first Job its owner, so that it goes with the job like the Service does."""
    data = dict(spec.secret_env)
    if spec.jupyter:
        data[jupyterep.TOKEN_KEY] = spec.jupyter["token"]
    if not data:
        return None
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": env_secret_name(spec), "namespace": s.namespace,
                         "labels": labels(s, spec.job_id, spec.owner),
                         "annotations": {ANN_OWNER: spec.owner, ANN_NAME: spec.name}},
            "stringData": data}


def pull_secret_name(job_id: int, owner: str, name: str) -> str:
    """The image pull Secret of one job or workspace (a workspace is a job row too: the spawner finds it by this
    name, which the ti service made)."""
    return base_name(job_id, owner, name) + "-pull"


def pull_secret(s: KubeSettings, spec: LaunchSpec) -> dict[str, Any] | None:
    """The job's registry credential as an image pull Secret (None without one): the job's own, so that no other
    user's pod can name it, and owned by the job's first Job, so that it goes with the job."""
    if not spec.registry_auth:
        return None
    return registry_secret(s, spec.job_id, spec.owner, spec.name, spec.registry_auth)


def registry_secret(s: KubeSettings, job_id: int, owner: str, name: str, auth: tuple[str, str, str],
                    kind: str = "job") -> dict[str, Any]:
    """A registry login ``auth`` (server, username, password) as the image pull Secret of one job or workspace."""
    server, user, password = auth
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    config = {"auths": {server: {"username": user, "password": password, "auth": token}}}
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": pull_secret_name(job_id, owner, name), "namespace": s.namespace,
                         "labels": labels(s, job_id, owner, kind=kind),
                         "annotations": {ANN_OWNER: owner, ANN_NAME: name}},
            "stringData": {".dockerconfigjson": json.dumps(config)}}


def container_env(plain: dict[str, str], secret_names: list[str], secret: str) -> list[dict[str, Any]]:
    """Plain values, then each secret entry by reference (a value the platform sets wins, as it does locally)."""
    return ([{"name": k, "value": v} for k, v in plain.items()]
            + [{"name": k, "valueFrom": {"secretKeyRef": {"name": secret, "key": k}}}
               for k in secret_names if k not in plain])


def job_objects(s: KubeSettings, spec: LaunchSpec, extra_env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The Service and, with ``s.network_policy``, the NetworkPolicy (for gangs) first, then one Indexed Job per
    role, then the job's env Secret if it has secret entries; every object labelled for reconciliation."""
    base = base_name(spec.job_id, spec.owner, spec.name)
    names = role_job_names(spec)
    envs = job_envs(s, spec)
    groups = _role_groups(spec)
    gang = len(spec.instances) > 1
    objects: list[dict[str, Any]] = []
    common_labels = labels(s, spec.job_id, spec.owner)
    annotations = {ANN_OWNER: spec.owner, ANN_NAME: spec.name}
    if gang:
        objects.append({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": base, "namespace": s.namespace, "labels": common_labels, "annotations": annotations},
            # headless and published before readiness: rank 0's name must resolve while the gang gathers
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                     "selector": {LABEL_JOB_ID: str(spec.job_id),
                                  LABEL_INSTALLATION: common_labels[LABEL_INSTALLATION]},
                     "ports": [{"name": "rendezvous", "port": s.master_port}, {"name": "tf", "port": s.tf_port}]},
        })
        if s.network_policy:
            objects.append(job_network_policy(s, spec))
    vols, vmounts = volumes(spec.mounts, spec.scratch_paths, spec.shm_mib)
    # the job's secret entries override the admin's extra values, as locally (backends/local/jobdir.job_env)
    user_env = {k: v for k, v in {**spec.env, **(extra_env or {})}.items() if k not in spec.secret_env}
    for role, first, n in groups:
        insts = spec.instances[first:first + n]
        shared, own = split_env(envs[first:first + n])
        env = {**user_env, **shared}
        head = insts[0]
        command = prelude(own) + spec.command
        pod_labels = {**labels(s, spec.job_id, spec.owner, role=role), LABEL_RUN: names[role]}
        pod_spec: dict[str, Any] = {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "hostNetwork": False, "hostPID": False, "hostIPC": False,
            "terminationGracePeriodSeconds": s.termination_grace_seconds,
            "securityContext": pod_security_context(s),
            "containers": [{
                "name": "main", "image": spec.image, "command": ["/bin/sh", "-c", command],
                "env": container_env(env, sorted(spec.secret_env), env_secret_name(spec)),
                "resources": resources(s, head.cpu, head.memory_mib, len(head.devices), spec.rdma,
                                       spec.device_type),
                "securityContext": container_security_context(s),
                "volumeMounts": vmounts,
            }],
            "volumes": vols,
            **placement(s, spec.device_type, spec.pool, len(head.devices), [i.node for i in insts]),
        }
        if spec.jupyter and first == 0:  # JOB2: instance 0's server, its token from the Secret by reference
            jupyterep.add_to_container(pod_spec["containers"][0], spec.jupyter, env_secret_name(spec))
        if gang:
            pod_spec["subdomain"] = base
        own = [pull_secret_name(spec.job_id, spec.owner, spec.name)] if spec.registry_auth else []
        pulls = [*s.image_pull_secrets, *own]
        if pulls:
            pod_spec["imagePullSecrets"] = [{"name": n_} for n_ in pulls]
        if s.scheduler_name:
            pod_spec["schedulerName"] = s.scheduler_name
        template_annotations = {**annotations, ANN_ROLE_OFFSET: str(first), **s.extra_pod_annotations}
        if s.pin_to_placement and all(i.node for i in insts):
            template_annotations[ANN_PLACEMENT] = ",".join(i.node for i in insts)
        objects.append({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": names[role], "namespace": s.namespace, "labels": pod_labels,
                         "annotations": {**annotations, ANN_ROLE_OFFSET: str(first)}},
            "spec": {
                "completions": n, "parallelism": n, "completionMode": "Indexed",
                # TiHub decides what a failure means (the whole gang fails): Kubernetes never retries
                "backoffLimit": 0,
                "template": {"metadata": {"labels": pod_labels, "annotations": template_annotations},
                             "spec": pod_spec},
            },
        })
    secret = env_secret(s, spec)
    if secret is not None:
        objects.append(secret)
    return objects


def runs_role(pod: dict[str, Any], name: str) -> bool:
    """Whether ``pod`` is one of the role ``name``'s: TiHub's run label, or the Job controller's labels on pods
    made before that label was."""
    lab = (pod.get("metadata") or {}).get("labels") or {}
    return name in (lab.get(LABEL_RUN), lab.get("job-name"), lab.get("batch.kubernetes.io/job-name"))


def completion_index(pod: dict[str, Any]) -> int:
    """The pod's completion index: the Job controller's label, or the annotation a bare pod carries (0 else)."""
    meta = pod.get("metadata") or {}
    annotated = (meta.get("annotations") or {}).get(COMPLETION_INDEX, 0)
    return int((meta.get("labels") or {}).get(COMPLETION_INDEX, annotated))


def bare_pod(job: dict[str, Any]) -> dict[str, Any]:
    """A one-pod Job of ``job_objects`` as the Pod TiHub creates itself (``KubernetesBackend.launch_pods``).

    A Job costs the API server about twice the writes of its pod (the Job's status updates, the Job controller's
    finalizer and events: benchmarks/bench_vs_kueue.py), and TiHub decides retries and ends itself. The pod is
    what the Job controller would make of index 0 -- same labels, its completion index (as an annotation, so the
    pin policy leaves it alone), hostname and JOB_COMPLETION_INDEX -- pinned to its node in its own spec and
    named by the API server (a relaunch never waits for the last pod's name to be free)."""
    meta, template = job["metadata"], job["spec"]["template"]
    if job["spec"]["completions"] != 1:
        raise ValueError("only a one-pod Job becomes a bare pod")
    annotations = dict(template["metadata"]["annotations"])
    node = annotations.pop(ANN_PLACEMENT, "")
    spec = json.loads(json.dumps(template["spec"]))  # a deep copy: the Job stays as it was
    spec["hostname"] = f"{meta['name']}-0"
    main = spec["containers"][0]
    main["env"] = [{"name": "JOB_COMPLETION_INDEX", "value": "0"}, *main.get("env", [])]
    if node:
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), HOSTNAME_LABEL: node}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"{meta['name']}-0-", "namespace": meta["namespace"],
                         "labels": dict(template["metadata"]["labels"]),
                         "annotations": {**annotations, COMPLETION_INDEX: "0"}},
            "spec": spec}


# -- network --------------------------------------------------------------------------------------------------
def job_pod_selector(s: KubeSettings, job_id: int) -> dict[str, str]:
    """The labels that every pod of one job carries and no other pod does: the job id within this installation,
    and the kind (a workspace's pod carries its own id, TensorBoard pods no job id at all)."""
    return {MANAGED_BY: "ti-hub", LABEL_INSTALLATION: label_value(s.installation), LABEL_JOB_ID: str(job_id),
            LABEL_KIND: "job"}


def job_network_policy(s: KubeSettings, spec: LaunchSpec) -> dict[str, Any]:
    """Lets the pods of one gang reach each other on any port (rendezvous, NCCL, parameter servers) and nothing
    more: not the owner's other jobs or workspaces, not other users' pods. NetworkPolicies add up: the chart's
    policy for all user pods lets the hub and the proxy in and DNS, the hub and the internet out, and closes the
    rest. Same namespace only (no namespaceSelector). The backend makes the job's first Job its owner, so it goes
    with the job (garbage collection), never outlives it."""
    mine = job_pod_selector(s, spec.job_id)
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": base_name(spec.job_id, spec.owner, spec.name), "namespace": s.namespace,
                     "labels": labels(s, spec.job_id, spec.owner),
                     "annotations": {ANN_OWNER: spec.owner, ANN_NAME: spec.name}},
        "spec": {"podSelector": {"matchLabels": dict(mine)}, "policyTypes": ["Ingress", "Egress"],
                 "ingress": [{"from": [{"podSelector": {"matchLabels": dict(mine)}}]}],
                 "egress": [{"to": [{"podSelector": {"matchLabels": dict(mine)}}]}]},
    }


# -- pinning each pod to its node -------------------------------------------------------------------------------
# A node affinity over the gang's set of nodes lets the kube-scheduler swap pods between gangs that share a node:
# one gang's pod takes the room TiHub kept for another's, and that gang waits part-admitted (found by
# benchmarks/bench_k8s_gangs.py). The Job controller creates every pod of an Indexed Job from one template, so
# the per-index node is set at admission: CEL reads the pod's completion index and picks its node.
PIN_NODE = (f"object.metadata.annotations['{ANN_PLACEMENT}'].split(',')"
            f"[int(object.metadata.labels['{COMPLETION_INDEX}'])]")
PIN_MATCH = (f"has(object.metadata.annotations) && '{ANN_PLACEMENT}' in object.metadata.annotations && "
             f"has(object.metadata.labels) && '{COMPLETION_INDEX}' in object.metadata.labels && "
             f"int(object.metadata.labels['{COMPLETION_INDEX}']) < "
             f"size(object.metadata.annotations['{ANN_PLACEMENT}'].split(','))")
PIN_PATCH = (f"has(object.spec.nodeSelector) ? [JSONPatch{{op: 'add', path: '/spec/nodeSelector/' + "
             f"jsonpatch.escapeKey('{HOSTNAME_LABEL}'), value: variables.node}}] : "
             f"[JSONPatch{{op: 'add', path: '/spec/nodeSelector', value: {{'{HOSTNAME_LABEL}': variables.node}}}}]")


def pin_policy(name: str, namespace: str) -> list[dict[str, Any]]:
    """The MutatingAdmissionPolicy and its binding that pin TiHub's job pods in ``namespace`` to their nodes.

    It only adds a hostname node selector to pods that TiHub's labels and annotation mark, as they are created;
    a pod whose node is gone stays Pending (TiHub sees it and requeues), it never lands elsewhere. The Helm chart
    installs the same spec (``tests/k8s/test_helm_chart.py`` compares them)."""
    return [{
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name, "labels": {MANAGED_BY: "ti-hub"}},
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": {
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                   "resources": ["pods"]}],
                "objectSelector": {"matchLabels": {MANAGED_BY: "ti-hub", LABEL_KIND: "job"}},
            },
            "matchConditions": [{"name": "has-placement", "expression": PIN_MATCH}],
            "variables": [{"name": "node", "expression": PIN_NODE}],
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": PIN_PATCH}}],
        },
    }, {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": {MANAGED_BY: "ti-hub"}},
        "spec": {"policyName": name, "matchResources": {"namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": namespace}}}},
    }]


PIN_PROBE_NODE = "ti-hub-pin-probe"


def pin_probe(s: KubeSettings) -> dict[str, Any]:
    """A pod the pin policy would pin to PIN_PROBE_NODE: created as a dry run to see whether the policy is in force."""
    meta_labels = {**labels(s, 0, "ti-hub"), COMPLETION_INDEX: "0"}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "ti-hub-pin-probe", "namespace": s.namespace, "labels": meta_labels,
                         "annotations": {ANN_PLACEMENT: PIN_PROBE_NODE}},
            "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                     "securityContext": pod_security_context(s),
                     "containers": [{"name": "main", "image": "ti-hub/pin-probe", "command": ["true"],
                                     "securityContext": container_security_context(s)}]}}


def pod_security_probe(s: KubeSettings) -> dict[str, Any]:
    """A pod that breaks the restricted profile and nothing else (it allows privilege escalation; the baseline
    profile allows that): created as a dry run, Pod Security admission refuses it where the namespace enforces
    restricted, and only there."""
    container = {**container_security_context(s), "allowPrivilegeEscalation": True}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "ti-hub-pod-security-probe", "namespace": s.namespace,
                         "labels": {MANAGED_BY: "ti-hub", LABEL_KIND: "probe"}},
            "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False,
                     "securityContext": pod_security_context(s),
                     "containers": [{"name": "main", "image": "ti-hub/pod-security-probe", "command": ["true"],
                                     "securityContext": container}]}}


def pool_label_patch(pool_label: str, vc: str) -> dict[str, Any]:
    """RES2: the JSON merge patch that puts a node in virtual cluster ``vc`` (the label's value is the VC's name,
    as plans name it; for "default" the label goes: unlabelled nodes are in default)."""
    return {"metadata": {"labels": {pool_label: None if vc == "default" else vc}}}
