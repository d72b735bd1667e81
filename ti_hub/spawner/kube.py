"""TiKubeSpawner: workspaces as pods on Kubernetes, admitted by TiHub like every other job.

The TiSpawnerMixin asks TiHub for admission (validation, quota, mount rules, the queue) exactly as the local
spawner does; only the launch differs: the plan and the scheduler's placement become KubeSpawner settings
before KubeSpawner creates the pod. The pod pieces (security contexts, resources, placement, volumes) come from
the same pure builders as training jobs (``ti_hub.backends.k8s.objects``), so a workspace pod is exactly as
restricted as a job pod: non-root, no privilege escalation, all capabilities dropped, seccomp RuntimeDefault, no
service-account token, volumes only as TiHub's own claims, scratch and /dev/shm.

A workspace started with ``jupyter: false`` (SSH only, WS7) is the same pod with another command: the one-page
placeholder of ``sshonly.py`` in place of jupyterhub-singleuser. It answers the hub's readiness check and tells
a browser to use SSH; the SSH gateway execs its sessions into the same container (ti_hub/ssh/kube.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubespawner import KubeSpawner
from traitlets import Dict, Integer, Unicode, default, validate

from ..backends.base import Mount
from ..backends.k8s import devicetypes
from ..backends.k8s import objects as ob
from ..backends.k8s.names import safe_name
from ..domain import personal
from . import sshonly
from .mixin import TiSpawnerMixin

# an SSH-only workspace's container command: the placeholder given as source text to the image's python3 (a
# workspace image has Python for jupyterhub-singleuser, not necessarily TiHub). It replaces the image's entrypoint
# too: the placeholder is a well-behaved first process (sshonly.main), and an entrypoint that starts Jupyter itself
# would not run it
SSH_ONLY_COMMAND = ["python3", "-c", Path(sshonly.__file__).read_text()]


class TiKubeSpawner(TiSpawnerMixin, KubeSpawner):
    installation = Unicode("ti-hub", config=True,
                           help="Installation name labelled on workspace pods (the same as KubernetesBackend's).")
    device_resource = Unicode("nvidia.com/gpu", config=True,
                              help="Extended resource that counts devices of the types device_types does not list.")
    device_types = Dict(config=True, help="The same map as KubernetesBackend.device_types (the Helm chart sets "
                                          "both): " + devicetypes.HELP)
    device_type_label = Unicode("ti-hub.io/device-type", config=True, help="Node label naming the device type.")
    pool_label = Unicode("ti-hub.io/pool", config=True, help="Node label naming the resource pool.")
    run_as_uid = Integer(1000, config=True, help="User id of the workspace container (never 0).")
    run_as_gid = Integer(100, config=True, help="Group id of the workspace container and its volumes (fsGroup).")
    rdma_resource = Unicode("rdma/hca_shared_devices_a", config=True,
                            help="Extended resource a workspace whose plan has rdma asks one of (the same as "
                                 "KubernetesBackend.rdma_resource: the RDMA shared device plugin's).")

    runs_without_jupyter = True
    _ti_ssh_only = False  # this start is an SSH-only workspace's (apply_admission)

    @validate("device_types")
    def _check_device_types(self, proposal):
        return devicetypes.checked(proposal["value"], "TiKubeSpawner")

    @default("options_form")
    def _default_options_form(self):
        return self._ti_options_form

    def settings(self) -> ob.KubeSettings:
        return ob.KubeSettings(namespace=self.namespace, installation=self.installation,
                               device_resource=self.device_resource, device_type_label=self.device_type_label,
                               pool_label=self.pool_label, uid=self.run_as_uid, gid=self.run_as_gid,
                               rdma_resource=self.rdma_resource,
                               device_types=devicetypes.parse(self.device_types))

    def apply_admission(self, ws: dict[str, Any]) -> None:
        """Turn TiHub's admission (plan, placement, volumes, env) into KubeSpawner's settings: pure, no I/O."""
        s = self.settings()
        if self.run_as_uid == 0:
            raise ValueError("TiKubeSpawner.run_as_uid must not be 0: workspaces never run as root")
        self.pod_name = safe_name("ti-ws", self.user.name, self.ti_name)
        self._ti_ssh_only = ws.get("jupyter", True) is False
        self.dns_name = self.dns_name_template.format(namespace=self.namespace, name=self.pod_name)
        if ws.get("image"):
            self.image = ws["image"]
        # the workspace's registry credential: the Secret the ti service made at admission, after the configured
        # ones (this spawner object lives on across restarts, with or without a credential)
        own = ob.pull_secret_name(int(ws["id"]), self.user.name, self.ti_name)
        pulls = [p for p in self.image_pull_secrets if (p.get("name") if isinstance(p, dict) else p) != own]
        self.image_pull_secrets = pulls + ([own] if ws.get("credential_id") else [])
        cpu, mem = float(ws["cpu_per_instance"]), int(ws["memory_mib_per_instance"])
        devices = int(ws.get("devices_per_instance") or 0)
        self.cpu_limit = self.cpu_guarantee = cpu
        self.mem_limit = self.mem_guarantee = f"{mem}M"  # KubeSpawner's M is MiB
        extra = {k: q for k, q in ob.resources(s, cpu, mem, devices, bool(ws.get("rdma")),
                                               ws.get("device_type", ""))["limits"].items()
                 if k not in ("cpu", "memory")}  # devices, RDMA: KubeSpawner has cpu and memory traits of its own
        self.extra_resource_limits = dict(extra)
        self.extra_resource_guarantees = dict(extra)
        nodes = [i["node"] for i in (ws.get("placement") or {}).get("instances", [])]
        place = ob.placement(s, ws.get("device_type", ""), ws.get("pool", "default"), devices, nodes)
        self.node_selector = dict(place.get("nodeSelector", {}))
        affinity = place.get("affinity", {}).get("nodeAffinity", {})
        self.node_affinity_required = list(
            affinity.get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", []))
        self.tolerations = list(place.get("tolerations", []))
        mounts = [Mount("", v["mount_path"], bool(v["read_only"]), v["kind"], v["volume_id"], v.get("volume", ""))
                  for v in ws.get("volumes", []) if v["kind"] != "local"]
        # STO8: the owner's work and archive directories, as the ti service's volume driver made them
        mine = [Mount("", v["mount_path"], False, v["kind"], claim=v["claim"]) for v in ws.get("mounts", [])
                if v["kind"] in personal.KINDS and v.get("claim")]
        mounts += mine
        work = [m.mount_path for m in mine if m.kind == "work"]
        if work:
            # the pod's home is the image's and goes with the pod: open Jupyter and terminals where files persist
            self.notebook_dir = self.working_dir = work[0]
        scratch = [v["mount_path"] for v in ws.get("volumes", []) if v["kind"] == "local"]
        self.volumes, self.volume_mounts = ob.volumes(mounts, scratch, int(ws.get("shm_mib") or 0))
        # KubeSpawner builds the security contexts from these; the dicts add what it has no trait for
        self.uid, self.gid, self.fs_gid = s.uid, s.gid, s.gid
        self.privileged = False
        self.allow_privilege_escalation = False
        self.container_security_context = {k: v for k, v in ob.container_security_context(s).items()
                                           if k in ("capabilities", "seccompProfile", "runAsNonRoot")}
        self.pod_security_context = {"seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True}
        self.automount_service_account_token = False
        # volumes and the personal directories' claims are TiHub's (made by its volume driver), no other claim
        self.storage_pvc_ensure = False
        self.extra_labels = {**ob.labels(s, int(ws["id"]), self.user.name, kind="workspace")}
        # KubeSpawner lets common_labels override extra_labels, and its default names itself the manager: the pod
        # would not be TiHub's to capacity (counted twice) nor to the chart's NetworkPolicy for user pods
        self.common_labels = {**self.common_labels, ob.MANAGED_BY: "ti-hub"}
        self.extra_annotations = {ob.ANN_OWNER: self.user.name, ob.ANN_NAME: self.ti_name}
        env = self.ti_env(ws)
        env.pop("CUDA_VISIBLE_DEVICES", None)  # the device plugin numbers a pod's devices itself
        self.environment = {**self.environment, **env}

    async def get_pod_manifest(self):
        pod = await super().get_pod_manifest()
        if self._ti_ssh_only:
            # the rest of the pod (security contexts, resources, volumes, env) stays KubeSpawner's, as for Jupyter
            main = next(c for c in pod.spec.containers if c.name == "notebook")
            main.command, main.args = list(SSH_ONLY_COMMAND), []
        return pod

    async def launch(self, ws: dict[str, Any]):
        self.apply_admission(ws)
        return await KubeSpawner.start(self)

    def ti_state(self) -> dict[str, Any]:
        return {"backend": "kubernetes", "namespace": self.namespace, "pod": self.pod_name}
