"""KubernetesVolumeDriver: each TiHub volume is one PersistentVolumeClaim in TiHub's namespace.

* one claim per volume, named ``pvc_name(volume_id, "owner/name")`` -- the very name job and workspace pods
  mount (``ti_hub.backends.k8s.objects.volumes``); labelled with the installation and the volume id,
  annotated with the readable ``owner/name``; it requests ``capacity_gib`` Gi of the StorageClass configured
  for the volume's kind, with that kind's access mode. ``local`` volumes are emptyDir scratch: no claim;
* a dataset is a CSI clone of its source's claim (``dataSource``): its StorageClass's driver must clone;
* growing a volume patches its claim's request, after checking that the class allows expansion;
* usage is unknown (no pod of ours reads the volume) and browsing needs a workspace that mounts it;
* each user's personal work and archive directories (STO8) are one claim each (``personal_claim_name``), made
  the first time the user starts a job or workspace, of the class and access mode of ``personal_volume_kind``
  and the size of ``personal_capacity_gib``; they are never deleted by TiHub (the user's files live there).

The ops call drivers synchronously from database worker threads. The async Kubernetes client therefore runs
on one private event loop in one daemon thread, shared by every call: never the service's loop, and a
worker thread only waits for its own request.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine
from typing import Any

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException
from traitlets import Bool, Dict, Float, Unicode, default, validate

from ..backends.k8s.capacity import parse_quantity
from ..backends.k8s.client import json_of, new_api_client
from ..backends.k8s.names import label_value
from ..backends.k8s.objects import (
    ANN_NAME,
    ANN_OWNER,
    LABEL_INSTALLATION,
    LABEL_KIND,
    LABEL_OWNER,
    MANAGED_BY,
    personal_claim_name,
    pvc_name,
)
from ..backends.base import Mount
from ..domain.errors import Conflict
from ..domain import personal
from .base import VolumeDriver

LABEL_VOLUME_ID = "ti-hub.io/volume-id"
LABEL_VOLUME_KIND = "ti-hub.io/volume-kind"
ANN_VOLUME = "ti-hub.io/volume"
CLAIM_KINDS = ("block", "filesystem", "bucket", "dataset")  # "local" is emptyDir scratch: no claim
ACCESS_MODES = ("ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany", "ReadOnlyMany")
GIB = 1 << 30
MERGE_PATCH = "application/merge-patch+json"


class _LoopThread:
    """One long-lived event loop in a daemon thread; the driver's client lives there and only there."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass  # no loop in this thread: waiting here blocks nobody else
        else:
            coro.close()
            raise RuntimeError("KubernetesVolumeDriver's methods wait for the API server: call them from a "
                               "worker thread (as the ops do), never on an event loop")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except TimeoutError:
            fut.cancel()
            raise TimeoutError(f"the Kubernetes API did not answer within {timeout:.0f}s") from None

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        if not self.thread.is_alive():
            self.loop.close()


def api_message(e: ApiException) -> str:
    """The API server's own sentence from a Status body, else the HTTP reason."""
    try:
        return json.loads(e.body).get("message") or str(e.reason)
    except (TypeError, ValueError, AttributeError):
        return str(e.reason)


class KubernetesVolumeDriver(VolumeDriver):
    kubeconfig = Unicode(config=True,
                         help="Kubeconfig file to use. Default: KubernetesBackend.kubeconfig when that is the "
                              "service's backend; empty: the in-cluster service account, else ~/.kube/config.")
    namespace = Unicode(config=True,
                        help="Namespace of the volumes' claims: the one where job and workspace pods run, since "
                             "pods mount claims of their own namespace. Default: KubernetesBackend.namespace "
                             "when that is the service's backend, else 'default'.")
    installation = Unicode(config=True,
                           help="Installation name labelled on every claim (as the backend labels its objects). "
                                "Default: KubernetesBackend.installation when that is the backend, else 'ti-hub'.")
    storage_classes = Dict(
        {"block": "ti-block", "filesystem": "ti-filesystem", "bucket": "ti-bucket", "dataset": "ti-dataset"},
        config=True,
        help="StorageClass per volume kind (block, filesystem, bucket, dataset). A kind missing or mapped to '' "
             "gets the cluster's default StorageClass. local volumes are emptyDir scratch and have no claim.")
    access_modes = Dict(
        {"block": "ReadWriteOnce", "filesystem": "ReadWriteMany", "bucket": "ReadWriteMany",
         "dataset": "ReadWriteMany"},
        config=True,
        help="Access mode of the claims per volume kind (ReadWriteOnce, ReadWriteOncePod, ReadWriteMany, "
             "ReadOnlyMany); the class's provisioner must offer it. A kind missing here gets ReadWriteOnce.")
    create_storage_classes = Bool(
        False, config=True,
        help="Create the StorageClasses of storage_classes that do not exist (with storage_class_provisioner, "
             "storage_class_parameters, allowVolumeExpansion, reclaimPolicy Delete, binding Immediate). Off by "
             "default: admins usually own their classes, and creating them needs a cluster-wide RBAC rule.")
    storage_class_provisioner = Unicode(
        "", config=True, help="Provisioner (CSI driver name) of the StorageClasses this driver creates.")
    storage_class_parameters = Dict(
        {}, config=True,
        help="Parameters of the StorageClasses this driver creates, per volume kind: {'block': {'type': 'ssd'}}.")
    clone_in_source_class = Bool(
        False, config=True,
        help="Give a dataset its source volume's StorageClass instead of storage_classes['dataset'], for CSI "
             "drivers that clone only within one class.")
    request_timeout = Float(30.0, config=True, help="Seconds one Kubernetes API request may take.")
    personal_capacity_gib = Dict(
        {"work": 10, "archive": 50}, config=True,
        help="Size in GiB of each user's personal claims: 'work' (mounted at /mnt/USER) and 'archive' (at "
             "/archives/USER) in every workspace and job. Made once, the first time the user starts something; "
             "changing this later does not resize existing claims.")
    personal_volume_kind = Unicode(
        "filesystem", config=True,
        help="Volume kind whose StorageClass (storage_classes) and access mode (access_modes) the personal claims "
             "get. Each is mounted by all of a user's pods at once, on any node: the mode should be ReadWriteMany.")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._loop: _LoopThread | None = None
        self._loop_lock = threading.Lock()
        self._api: k8s.ApiClient | None = None
        self._api_lock: asyncio.Lock | None = None  # made on the private loop, used only there
        self._classes_ready = False
        # owners whose personal claims exist: checked once per process, not with every launch (the claims are
        # never deleted by TiHub, and two refused creates per job would double a launch's API writes)
        self._personal_ready: set[str] = set()

    # -- defaults from the Kubernetes backend: one namespace and installation for pods and their claims ----------
    def _from_backend(self, name: str, fallback: str) -> str:
        from ..backends.k8s.backend import KubernetesBackend

        backend = getattr(self.parent, "backend", None)
        return getattr(backend, name) if isinstance(backend, KubernetesBackend) else fallback

    @default("kubeconfig")
    def _default_kubeconfig(self) -> str:
        return self._from_backend("kubeconfig", "")

    @default("namespace")
    def _default_namespace(self) -> str:
        return self._from_backend("namespace", "default")

    @default("installation")
    def _default_installation(self) -> str:
        return self._from_backend("installation", "ti-hub")

    @validate("personal_capacity_gib")
    def _check_personal(self, proposal):
        value = proposal["value"]
        if set(value) != set(personal.KINDS) or not all(isinstance(g, int) and g >= 1 for g in value.values()):
            raise ValueError(f"personal_capacity_gib: {value!r} must give a whole number of GiB (at least 1) for "
                             f"each of {', '.join(personal.KINDS)}")
        return value

    @validate("personal_volume_kind")
    def _check_personal_kind(self, proposal):
        if proposal["value"] not in CLAIM_KINDS:
            raise ValueError(f"personal_volume_kind must be one of {', '.join(CLAIM_KINDS)}")
        return proposal["value"]

    @validate("storage_classes", "access_modes", "storage_class_parameters")
    def _check_kinds(self, proposal):
        value = proposal["value"]
        bad = sorted(set(value) - set(CLAIM_KINDS))
        if bad:
            raise ValueError(f"{proposal['trait'].name}: unknown volume kind(s) {bad}; kinds with claims are "
                             f"{', '.join(CLAIM_KINDS)}")
        if proposal["trait"].name == "access_modes":
            wrong = {k: v for k, v in value.items() if v not in ACCESS_MODES}
            if wrong:
                raise ValueError(f"access_modes: {wrong} (each must be one of {', '.join(ACCESS_MODES)})")
        return value

    # -- the private loop and the client -----------------------------------------------------------------------
    def _run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        with self._loop_lock:
            if self._loop is None:
                self._loop = _LoopThread("ti-k8s-volumes")
        # the client retries nothing itself: a request gets its own timeout, the wait a little more
        return self._loop.run(coro, self.request_timeout * 3 + 5)

    async def _client(self) -> k8s.ApiClient:
        if self._api_lock is None:
            self._api_lock = asyncio.Lock()
        async with self._api_lock:
            if self._api is None:
                self._api = await new_api_client(self.kubeconfig)
        return self._api

    async def _call(self, fn, *args, **kwargs) -> dict[str, Any]:
        """One raw request; its JSON as a dict. With ``_preload_content=False`` the client raises nothing for
        an error status, so this does."""
        return await json_of(await fn(*args, _preload_content=False, _request_timeout=self.request_timeout,
                                      **kwargs))

    async def _core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(await self._client())

    async def _storage(self) -> k8s.StorageV1Api:
        return k8s.StorageV1Api(await self._client())

    async def _read(self, fn, *args) -> dict[str, Any] | None:
        try:
            return await self._call(fn, *args)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def close(self) -> None:
        loop = self._loop
        if loop is None:
            return

        async def shut() -> None:
            if self._api is not None:
                await self._api.close()
                self._api = None
        try:
            loop.run(shut(), 10)
        finally:
            loop.stop()
            self._loop = None

    # -- manifests (pure) ------------------------------------------------------------------------------------
    def class_for(self, kind: str) -> str:
        return self.storage_classes.get(kind, "") or ""

    def labels(self, volume_id: int, owner: str, kind: str) -> dict[str, str]:
        return {MANAGED_BY: "ti-hub", LABEL_INSTALLATION: label_value(self.installation), LABEL_KIND: "volume",
                LABEL_VOLUME_ID: str(volume_id), LABEL_VOLUME_KIND: kind, LABEL_OWNER: label_value(owner)}

    def claim(self, volume_id: int, kind: str, volume: str, capacity_gib: int, *, storage_class: str = "",
              source_claim: str = "") -> dict[str, Any]:
        """The claim of one volume; ``source_claim`` makes it a CSI clone of that claim."""
        owner, _, name = volume.partition("/")
        spec: dict[str, Any] = {
            "accessModes": [self.access_modes.get(kind, "ReadWriteOnce")],
            "resources": {"requests": {"storage": f"{int(capacity_gib)}Gi"}},
        }
        if storage_class:
            spec["storageClassName"] = storage_class  # else the cluster's default class
        if source_claim:
            spec["dataSource"] = {"kind": "PersistentVolumeClaim", "name": source_claim}
        return {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": pvc_name(volume_id, volume), "namespace": self.namespace,
                         "labels": self.labels(volume_id, owner, kind),
                         "annotations": {ANN_VOLUME: volume, ANN_OWNER: owner, ANN_NAME: name}},
            "spec": spec,
        }

    def personal_claim(self, kind: str, owner: str) -> dict[str, Any]:
        """The claim of one of ``owner``'s personal directories (STO8)."""
        vkind = self.personal_volume_kind
        spec: dict[str, Any] = {
            "accessModes": [self.access_modes.get(vkind, "ReadWriteOnce")],
            "resources": {"requests": {"storage": f"{int(self.personal_capacity_gib[kind])}Gi"}},
        }
        if self.class_for(vkind):
            spec["storageClassName"] = self.class_for(vkind)
        labels = {MANAGED_BY: "ti-hub", LABEL_INSTALLATION: label_value(self.installation), LABEL_KIND: "personal",
                  LABEL_VOLUME_KIND: kind, LABEL_OWNER: label_value(owner)}
        return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": personal_claim_name(kind, owner), "namespace": self.namespace, "labels": labels,
                             "annotations": {ANN_OWNER: owner, ANN_VOLUME: personal.mount_path(kind, owner)}},
                "spec": spec}

    def storage_class(self, name: str, kind: str) -> dict[str, Any]:
        """A StorageClass this driver creates when ``create_storage_classes`` is on."""
        return {
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name, "labels": {MANAGED_BY: "ti-hub",
                                                  LABEL_INSTALLATION: label_value(self.installation)}},
            "provisioner": self.storage_class_provisioner,
            "parameters": {str(k): str(v) for k, v in (self.storage_class_parameters.get(kind) or {}).items()},
            "allowVolumeExpansion": True, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate",
        }

    def _is_ours(self, obj: dict[str, Any], volume_id: int) -> bool:
        lab = (obj.get("metadata") or {}).get("labels") or {}
        return (lab.get(LABEL_INSTALLATION) == label_value(self.installation)
                and lab.get(LABEL_VOLUME_ID) == str(volume_id))

    # -- the driver interface --------------------------------------------------------------------------------
    def path(self, volume_id: int) -> str:
        return ""  # no host path: pods mount the claim by name (the Kubernetes backend ignores Mount.source)

    def usage_bytes(self, volume_id: int, max_files: int = 0, *, who: Any = None) -> int | None:
        return None  # only a pod mounting the volume could measure it; the API shows used_bytes: null

    def browse(self, volume_id: int, rel: str = "", limit: int = 1000, *, who: Any = None) -> dict[str, Any]:
        raise Conflict("browsing a volume's files needs a running workspace on Kubernetes: TiHub's service "
                       "cannot read a claim by itself; open a workspace that mounts the volume and look there",
                       field="path")

    def personal_mounts(self, owner: str) -> list[Mount]:
        return [Mount("", personal.mount_path(kind, owner), False, kind, claim=personal_claim_name(kind, owner))
                for kind in personal.KINDS]

    def ensure_personal(self, owner: str) -> None:
        self._run(self._ensure_personal(owner))

    async def _ensure_personal(self, owner: str) -> None:
        if owner in self._personal_ready:
            return
        core = await self._core()
        await self._ensure_classes()
        for kind in personal.KINDS:
            body = self.personal_claim(kind, owner)
            try:
                await self._call(core.create_namespaced_persistent_volume_claim, self.namespace, body)
            except ApiException as e:
                if e.status != 409:  # already there: the user's files, left as they are
                    raise
                continue
            self.log.info("%s's %s: claim %s", owner, personal.WHAT[kind], body["metadata"]["name"])
        self._personal_ready.add(owner)

    def create(self, volume_id: int, kind: str, source_id: int | None = None, *, volume: str = "",
               capacity_gib: int = 0, source: str = "") -> None:
        if kind not in CLAIM_KINDS:
            return  # local: emptyDir scratch, made with each pod
        if "/" not in volume or capacity_gib < 1:
            raise ValueError("KubernetesVolumeDriver.create needs the volume's owner/name and capacity_gib")
        if source_id is not None and "/" not in source:
            raise ValueError("KubernetesVolumeDriver.create needs the source volume's owner/name")
        self._run(self._create(volume_id, kind, volume, capacity_gib,
                               source_id if kind == "dataset" else None, source))

    async def _create(self, volume_id: int, kind: str, volume: str, gib: int, source_id: int | None,
                      source: str) -> None:
        core = await self._core()
        await self._ensure_classes()
        cls = self.class_for(kind)
        source_claim = ""
        if source_id is not None:
            source_claim = pvc_name(source_id, source)
            src = await self._read(core.read_namespaced_persistent_volume_claim, source_claim, self.namespace)
            if src is None:
                raise Conflict(f"volume {source} has no claim {source_claim} in namespace {self.namespace} to "
                               "clone: an admin must restore it", field="source")
            spec, status = src.get("spec") or {}, src.get("status") or {}
            # a CSI clone is at least as large as its source
            src_bytes = max(parse_quantity(((spec.get("resources") or {}).get("requests") or {}).get("storage")),
                            parse_quantity((status.get("capacity") or {}).get("storage")))
            if gib * GIB < src_bytes:
                need = int(-(-src_bytes // GIB))
                raise Conflict(f"a dataset cloned from {source} needs capacity_gib of at least {need} (the size of "
                               "its source)", field="capacity_gib")  # the source's size decides: 409
            if self.clone_in_source_class:
                cls = spec.get("storageClassName") or ""
        if cls:
            await self._check_class(cls, kind)
        body = self.claim(volume_id, kind, volume, gib, storage_class=cls, source_claim=source_claim)
        name = body["metadata"]["name"]
        try:
            await self._call(core.create_namespaced_persistent_volume_claim, self.namespace, body)
        except ApiException as e:
            if e.status != 409:
                raise
            # a claim of this very volume left by a create whose transaction then failed: adopt it
            old = await self._read(core.read_namespaced_persistent_volume_claim, name, self.namespace)
            if old is None or not self._is_ours(old, volume_id) or old["metadata"].get("deletionTimestamp"):
                raise Conflict(f"claim {name} already exists in namespace {self.namespace} (or is still being "
                               "deleted); try again later", field="name") from None
            self.log.warning("volume %d (%s): adopting its existing claim %s", volume_id, volume, name)
        self.log.info("volume %d (%s): claim %s (%s, %d GiB, class %s)", volume_id, volume, name, kind, gib,
                      cls or "default")

    async def _check_class(self, cls: str, kind: str) -> None:
        """A claim of a missing class would wait forever: refuse instead (when we may read classes)."""
        try:
            found = await self._read((await self._storage()).read_storage_class, cls)
        except ApiException as e:
            if e.status != 403:
                raise
            self.log.warning("cannot read StorageClass %s (%s): not checking that it exists", cls, e.reason)
            return
        if found is None:
            raise Conflict(f"StorageClass {cls} for {kind} volumes does not exist: an admin must create it (or "
                           "set KubernetesVolumeDriver.storage_classes)", field="kind")

    async def _ensure_classes(self) -> None:
        if self._classes_ready or not self.create_storage_classes:
            return
        if not self.storage_class_provisioner:
            raise RuntimeError("KubernetesVolumeDriver.create_storage_classes needs storage_class_provisioner")
        storage = await self._storage()
        made: set[str] = set()
        for kind in CLAIM_KINDS:
            cls = self.class_for(kind)
            if not cls or cls in made:
                continue
            made.add(cls)
            try:
                await self._call(storage.create_storage_class, self.storage_class(cls, kind))
                self.log.info("created StorageClass %s for %s volumes", cls, kind)
            except ApiException as e:
                if e.status != 409:  # an existing class is the admin's: left as it is
                    raise
        self._classes_ready = True

    def delete(self, volume_id: int, *, volume: str = "", kind: str = "") -> None:
        if kind == "local":
            return
        self._run(self._delete(volume_id, volume))

    async def _delete(self, volume_id: int, volume: str) -> None:
        core = await self._core()
        if volume:
            names = [pvc_name(volume_id, volume)]
        else:  # a caller that does not know the name: find the claim by its labels
            sel = f"{LABEL_INSTALLATION}={label_value(self.installation)},{LABEL_VOLUME_ID}={volume_id}"
            found = await self._call(core.list_namespaced_persistent_volume_claim, self.namespace,
                                     label_selector=sel)
            names = [o["metadata"]["name"] for o in found.get("items") or []]
        for name in names:
            try:
                # Background: a pod still ending keeps the claim (pvc-protection) until it is gone
                await self._call(core.delete_namespaced_persistent_volume_claim, name, self.namespace,
                                 propagation_policy="Background")
            except ApiException as e:
                if e.status != 404:
                    raise
            self.log.info("volume %d (%s): claim %s deleted", volume_id, volume or "?", name)

    def expand(self, volume_id: int, volume: str, new_gib: int, *, kind: str = "") -> None:
        if kind == "local":
            return  # scratch: capacity is a quota only
        self._run(self._expand(volume_id, volume, new_gib))

    async def _expand(self, volume_id: int, volume: str, gib: int) -> None:
        core = await self._core()
        name = pvc_name(volume_id, volume)
        pvc = await self._read(core.read_namespaced_persistent_volume_claim, name, self.namespace)
        if pvc is None:
            raise Conflict(f"volume {volume} has no claim {name} in namespace {self.namespace}: an admin must "
                           "restore it before it can grow", field="capacity_gib")
        spec = pvc.get("spec") or {}
        if parse_quantity(((spec.get("resources") or {}).get("requests") or {}).get("storage")) >= gib * GIB:
            return
        cls = spec.get("storageClassName") or ""
        sc = await self._read((await self._storage()).read_storage_class, cls) if cls else None
        # checked here rather than left to admission: the user reads which class and which setting says no
        if sc is None or not sc.get("allowVolumeExpansion"):
            why = (f"its StorageClass {cls} does not allow volume expansion (allowVolumeExpansion)" if sc else
                   f"its StorageClass {cls or '(none)'} does not exist")
            raise Conflict(f"volume {volume} cannot grow: {why}; ask an admin", field="capacity_gib")
        if (pvc.get("status") or {}).get("phase") != "Bound":
            raise Conflict(f"volume {volume} can grow once its storage exists (its claim is "
                           f"{(pvc.get('status') or {}).get('phase', 'Pending')}; classes that bind on first "
                           "use make it when a pod first mounts it)", field="capacity_gib")
        patch = {"spec": {"resources": {"requests": {"storage": f"{int(gib)}Gi"}}}}
        try:
            await self._call(core.patch_namespaced_persistent_volume_claim, name, self.namespace, patch,
                             _content_type=MERGE_PATCH)
        except ApiException as e:
            if e.status in (403, 422):  # admission or validation said no: its words, for the user
                raise Conflict(f"volume {volume} cannot grow: {api_message(e)}", field="capacity_gib") from None
            raise
        self.log.info("volume %d (%s): claim %s grows to %d GiB", volume_id, volume, name, gib)
