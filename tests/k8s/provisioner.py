"""A FAKE CSI provisioner and resizer for the test control plane: tests only, never a real cluster.

A real CSI driver needs real nodes; the test cluster's nodes are KWOK fakes. This stands in for the
external-provisioner and external-resizer sidecars of a driver named ``fake.csi.ti-hub.test``, for claims
whose StorageClass names that provisioner, and stores no bytes anywhere:

* a pending claim gets a PersistentVolume made for it (csi source with that driver and a volumeHandle,
  claimRef to the claim, capacity = the request), which the real PV controller then binds; a claim with a
  ``dataSource`` claim (a CSI clone) waits until its source is bound and no larger than its request;
  classes with ``WaitForFirstConsumer`` wait for the scheduler's selected-node annotation, as real ones do;
* a bound claim whose request grew, in a class with ``allowVolumeExpansion``, gets its volume's capacity
  and then its own ``status.capacity`` (status subresource) grown;
* a volume whose claim is gone is deleted (reclaimPolicy Delete), as the external-provisioner does.

State comes from watches (``ti_hub.backends.k8s.reflector``) on a private event loop in a daemon thread;
one worker handles one claim at a time, and a resync every second catches anything an event missed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from ti_hub.backends.k8s.capacity import parse_quantity
from ti_hub.backends.k8s.reflector import Reflector

FAKE_DRIVER = "fake.csi.ti-hub.test"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
MERGE_PATCH = "application/merge-patch+json"
log = logging.getLogger("ti-hub.tests.fake-provisioner")


class FakeProvisioner:
    """``start()`` / ``stop()``; counts what it did in ``provisioned``, ``resized`` and ``deleted``."""

    def __init__(self, kubeconfig: str, driver: str = FAKE_DRIVER, resync_seconds: float = 1.0):
        self.kubeconfig = kubeconfig
        self.driver = driver
        self.resync_seconds = resync_seconds
        self.provisioned = 0
        self.resized = 0
        self.deleted = 0
        self.errors: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: list[asyncio.Task] = []

    # -- lifecycle (called from the test's thread) -------------------------------------------------------------
    def start(self) -> FakeProvisioner:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-csi-provisioner", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(60)
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
        self._loop = None

    async def _start(self) -> None:
        cfg = k8s.Configuration()
        await k8s_config.load_kube_config(config_file=self.kubeconfig, client_configuration=cfg)
        self.api = k8s.ApiClient(cfg)
        self.core, self.storage = k8s.CoreV1Api(self.api), k8s.StorageV1Api(self.api)
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.pending: set[str] = set()
        self.classes = Reflector("storageclasses", self.storage.list_storage_class, log=log,
                                 on_event=lambda *_: self._enqueue_all())
        self.pvs = Reflector("persistentvolumes", self.core.list_persistent_volume, log=log, on_event=self._pv_event)
        self.pvcs = Reflector("persistentvolumeclaims", self.core.list_persistent_volume_claim_for_all_namespaces,
                              log=log, on_event=lambda kind, obj, old: self._enqueue(_key(obj)))
        for r in (self.classes, self.pvs, self.pvcs):
            await r.start()
        self._tasks = [asyncio.ensure_future(self._work()), asyncio.ensure_future(self._resync())]

    async def _stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for r in (self.pvcs, self.pvs, self.classes):
            await r.stop()
        await self.api.close()

    # -- queue -------------------------------------------------------------------------------------------------
    def _enqueue(self, key: str) -> None:
        if key not in self.pending:
            self.pending.add(key)
            self.queue.put_nowait(key)

    def _enqueue_all(self) -> None:
        for key in list(self.pvcs.items if hasattr(self, "pvcs") else ()):
            self._enqueue(key)

    def _pv_event(self, kind: str, pv: dict[str, Any], old: dict[str, Any] | None) -> None:
        ref = pv.get("spec", {}).get("claimRef") or {}
        if ref.get("name"):
            self._enqueue(f"{ref.get('namespace', '')}/{ref['name']}")

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.resync_seconds)
            self._enqueue_all()
            try:
                await self._reclaim()
            except Exception as e:  # noqa: BLE001 -- the next resync tries again
                self._error(f"reclaim: {e}")

    async def _work(self) -> None:
        while True:
            key = await self.queue.get()
            self.pending.discard(key)
            try:
                await self._sync(key)
            except Exception as e:  # noqa: BLE001 -- one claim's trouble never stops the others; resync retries
                self._error(f"{key}: {e}")

    def _error(self, text: str) -> None:
        log.warning("fake provisioner: %s", text)
        self.errors.append(text)
        del self.errors[:-50]

    # -- what a CSI provisioner and resizer do -------------------------------------------------------------------
    def _class_of(self, pvc: dict[str, Any]) -> dict[str, Any] | None:
        sc = self.classes.items.get(f"/{pvc.get('spec', {}).get('storageClassName') or ''}")
        return sc if sc is not None and sc.get("provisioner") == self.driver else None

    async def _sync(self, key: str) -> None:
        pvc = self.pvcs.items.get(key)
        if pvc is None or pvc["metadata"].get("deletionTimestamp"):
            return
        sc = self._class_of(pvc)
        if sc is None:
            return
        pv = self.pvs.items.get(f"/{pv_name(pvc)}")
        if pv is None and not pvc["spec"].get("volumeName"):
            await self._provision(pvc, sc)
        elif pv is not None and (pvc.get("status") or {}).get("phase") == "Bound":
            await self._resize(pvc, pv, sc)

    async def _provision(self, pvc: dict[str, Any], sc: dict[str, Any]) -> None:
        meta, spec = pvc["metadata"], pvc["spec"]
        if sc.get("volumeBindingMode") == "WaitForFirstConsumer" and not (meta.get("annotations") or {}).get(
                SELECTED_NODE):
            return
        request = spec["resources"]["requests"]["storage"]
        attributes = {}
        source = spec.get("dataSource") or spec.get("dataSourceRef")
        if source:
            if source.get("kind") != "PersistentVolumeClaim" or source.get("apiGroup"):
                return  # snapshots and populators: not faked
            src = self.pvcs.items.get(f"{meta['namespace']}/{source['name']}")
            if src is None or (src.get("status") or {}).get("phase") != "Bound":
                return  # a real driver waits for its source as well
            src_cap = (src["status"].get("capacity") or {}).get("storage")
            if parse_quantity(src_cap) > parse_quantity(request):
                return  # a clone is never smaller than its source
            attributes["clonedFrom"] = f"{meta['namespace']}/{source['name']}"
        pv = {
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": pv_name(pvc), "annotations": {PROVISIONED_BY: self.driver}},
            "spec": {
                "capacity": {"storage": request},
                "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
                "volumeMode": spec.get("volumeMode") or "Filesystem",
                "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
                "storageClassName": spec["storageClassName"],
                "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta["namespace"],
                             "name": meta["name"], "uid": meta["uid"]},
                "csi": {"driver": self.driver, "volumeHandle": f"fake-{meta['uid']}",
                        "volumeAttributes": attributes},
            },
        }
        if await self._write(self.core.create_persistent_volume, pv, ok=(409,)):
            self.provisioned += 1
            log.info("fake provisioner: %s for %s/%s (%s)", pv["metadata"]["name"], meta["namespace"],
                     meta["name"], request)

    async def _resize(self, pvc: dict[str, Any], pv: dict[str, Any], sc: dict[str, Any]) -> None:
        if (pv["spec"].get("csi") or {}).get("driver") != self.driver or not sc.get("allowVolumeExpansion"):
            return
        want = pvc["spec"]["resources"]["requests"]["storage"]
        meta = pvc["metadata"]
        if parse_quantity(pv["spec"]["capacity"]["storage"]) < parse_quantity(want):
            await self._write(self.core.patch_persistent_volume, pv["metadata"]["name"],
                              {"spec": {"capacity": {"storage": want}}}, content_type=MERGE_PATCH)
        have = ((pvc.get("status") or {}).get("capacity") or {}).get("storage")
        if parse_quantity(have) < parse_quantity(want):
            # no node step: a fake filesystem is as large as its volume at once
            await self._write(self.core.patch_namespaced_persistent_volume_claim_status, meta["name"],
                              meta["namespace"], {"status": {"capacity": {"storage": want}}},
                              content_type=MERGE_PATCH)
            self.resized += 1
            log.info("fake resizer: %s/%s grows from %s to %s", meta["namespace"], meta["name"], have, want)

    async def _reclaim(self) -> None:
        """Delete our volumes whose claim is gone (or is another claim of the same name)."""
        for pv in list(self.pvs.items.values()):
            spec = pv.get("spec") or {}
            if (spec.get("csi") or {}).get("driver") != self.driver or pv["metadata"].get("deletionTimestamp"):
                continue
            if spec.get("persistentVolumeReclaimPolicy", "Delete") != "Delete":
                continue
            ref = spec.get("claimRef") or {}
            claim = self.pvcs.items.get(f"{ref.get('namespace', '')}/{ref.get('name', '')}")
            gone = claim is None or claim["metadata"]["uid"] != ref.get("uid")
            if gone and await self._write(self.core.delete_persistent_volume, pv["metadata"]["name"], ok=(404,)):
                self.deleted += 1

    async def _write(self, fn, *args, ok: tuple[int, ...] = (), content_type: str | None = None) -> bool:
        """One request; True when it did something, False for an accepted refusal (``ok``)."""
        kw = {"_content_type": content_type} if content_type else {}
        resp = await fn(*args, _preload_content=False, **kw)
        try:
            body = await resp.read()
            if 200 <= resp.status <= 299:
                return True
            if resp.status in ok:
                return False
            raise RuntimeError(f"HTTP {resp.status}: {json.loads(body).get('message', body[:200])}")
        finally:
            resp.release()


def pv_name(pvc: dict[str, Any]) -> str:
    return f"pvc-{pvc['metadata']['uid']}"  # as external-provisioner names them


def _key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
