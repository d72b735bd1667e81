"""What jobs and workspaces use on Kubernetes (the usage half of KubernetesBackend, a mixin).

- CPU seconds and working set: the kubelet's ``/metrics/resource`` (summed over a pod's containers), for the idle
  policy (``workspace_cpu_seconds``: a CPU-only workspace is reclaimed by its CPU idleness, as on the embedded
  platform) and the jobs' Prometheus counters (``usage_totals``).
- Disk and network bytes: the kubelet's ``/metrics/cadvisor`` (kubeletstats.py says which series), the same
  ``InstanceTotals``/``Traffic`` the local backend gives, so the metrics API, ``ti job metrics``, the notebook
  monitor and Prometheus show them unchanged. Rates come from the last two distinct readings of a pod.
- Devices: DCGM's series with pod labels, read through Prometheus when the health source is Prometheus's
  (health/promsource.py); without it a job's device use is not measured.
- ``metrics()``'s CPU cores and memory stay metrics-server's (metrics.k8s.io), averaged over its window.

Both kubelet endpoints are read through the API server (``nodes/proxy``), cached per node (kubeletread.py). A
figure the kubelet did not give is unknown (left out, or None), never 0: an unknown never makes a workspace idle.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException
from traitlets import Bool, Float, HasTraits, Integer

from .. import metrics as metrics_mod
from . import kubeletstats as ks
from . import objects as ob
from .kubeletread import CADVISOR, RESOURCE, KubeletReader, Usage, merged, pod_node

HISTORY_SECONDS = 600.0  # a pod not read for this long is forgotten (its rates start again)
Reading = tuple[float, tuple[int, int] | None, tuple[int, int] | None]  # (seconds, network, disk)


class KubeletUsage(HasTraits):
    kubelet_stats = Bool(True, config=True,
                         help="Read each node's kubelet (/metrics/resource and /metrics/cadvisor, through the API "
                              "server's node proxy: RBAC get on nodes/proxy) for the CPU seconds the idle policy "
                              "judges CPU-only workspaces by, and jobs' CPU, memory, disk and network counters. "
                              "Off: CPU-only workspaces are left to the activity culler and jobs' counters are "
                              "not exported.")
    kubelet_timeout = Float(5.0, config=True, help="Seconds one node's kubelet figures may take to read.")
    kubelet_ttl = Float(2.0, config=True,
                        help="Seconds a node's kubelet figures are reused: the idle policy and the job counters of one "
                             "health sample, and metrics requests of one moment, read each node once. Keep it under "
                             "HealthMonitor.interval (each sample needs its own reading).")
    kubelet_concurrency = Integer(16, config=True, help="Most nodes whose kubelet figures are read at once.")

    def _kubelet(self) -> KubeletReader:
        reader = getattr(self, "_kubelet_reader", None)
        if reader is None:
            reader = self._kubelet_reader = KubeletReader(
                self.api, timeout=self.kubelet_timeout, ttl=self.kubelet_ttl, concurrency=self.kubelet_concurrency,
                log=self.log)
        return reader

    def _io_history(self) -> dict[ks.PodKey, list[Reading]]:
        hist = getattr(self, "_io_readings", None)
        if hist is None:
            hist = self._io_readings = {}
        return hist

    async def _pod_nodes(self, keys: set[ks.PodKey]) -> dict[ks.PodKey, str]:
        """The node of each running pod of ``keys``: from the shared pod watch, else (a namespace it does not
        watch) read from the API server. A pod not found, not running or not placed is left out."""
        await self.start_watches(jobs=False)
        out, missing = {}, []
        for ns, name in keys:
            pod = self.pods.items.get(f"{ns}/{name}")
            if pod is None:
                missing.append((ns, name))
            elif (pod.get("status") or {}).get("phase") == "Running" and pod_node(pod):
                out[(ns, name)] = pod_node(pod)
        if missing:
            core = k8s.CoreV1Api(await self.api())

            async def one(ns: str, name: str) -> None:
                try:
                    pod = await asyncio.wait_for(core.read_namespaced_pod(name, ns), self.kubelet_timeout)
                except (ApiException, asyncio.TimeoutError):
                    return
                if pod.status and pod.status.phase == "Running" and pod.spec and pod.spec.node_name:
                    out[(ns, name)] = pod.spec.node_name
            await asyncio.gather(*(one(ns, name) for ns, name in missing))
        return out

    async def workspace_cpu_seconds(self, states: dict[int, dict[str, Any]]) -> dict[int, float]:
        """A workspace's state is its spawner's (spawner/kube.py ti_state: namespace and pod); its pod's CPU seconds
        summed over the pod's containers, from its node's kubelet. A pod the kubelet did not report is left out."""
        if not self.kubelet_stats:
            raise NotImplementedError
        wanted = {i: (str(s["namespace"]), str(s["pod"])) for i, s in states.items()
                  if (s or {}).get("backend") == "kubernetes" and s.get("namespace") and s.get("pod")}
        if not wanted:
            return {}
        nodes = await self._pod_nodes(set(wanted.values()))
        usage = await self._kubelet().read(nodes.values(), RESOURCE)
        return ks.pod_cpu_seconds(usage, {i: k for i, k in wanted.items() if k in nodes})

    def _running_pods(self, job_id: int, state: dict[str, Any]) -> dict[int, tuple[ks.PodKey, str]]:
        """Instance index -> (its running pod, the pod's node)."""
        out = {}
        for role in state.get("roles", []):
            for k, pod in self._pods_of(job_id, role["job"]).items():
                if (pod.get("status") or {}).get("phase") == "Running" and pod_node(pod):
                    out[int(role["offset"]) + k] = ((state["namespace"], pod["metadata"]["name"]), pod_node(pod))
        return out

    async def _pod_usage(self, nodes: set[str]) -> Usage:
        reader = self._kubelet()
        resource, cadvisor = await asyncio.gather(reader.read(nodes, RESOURCE), reader.read(nodes, CADVISOR))
        self._remember(cadvisor)
        return merged(resource, cadvisor)

    def _remember(self, cadvisor: Usage) -> None:
        """Keep each pod's last two distinct cAdvisor readings (by the kubelet's timestamp, else the time read)."""
        hist, now = self._io_history(), time.time()
        for key, u in cadvisor.items():
            at = u.at_ms / 1000.0 if u.at_ms else now
            got = hist.setdefault(key, [])
            if got and got[-1][0] >= at:
                continue  # the same reading again (the kubelet's figures are refreshed every 10-15 s)
            got.append((at, u.network, u.disk))
            del got[:-2]
        for key in [k for k, got in hist.items() if now - got[-1][0] > HISTORY_SECONDS]:
            del hist[key]

    def _traffic(self, key: ks.PodKey, which: int) -> metrics_mod.Traffic | None:
        got = self._io_history().get(key) or []
        if not got or got[-1][which] is None:
            return None
        before = got[0] if len(got) == 2 and got[0][which] is not None else None
        seconds = got[-1][0] - before[0] if before else 0.0
        return metrics_mod.traffic(before[which] if before else None, got[-1][which], seconds)

    async def usage_totals(self, states: dict[int, dict[str, Any]]) -> dict[int, list[Any]]:
        if not self.kubelet_stats:
            raise NotImplementedError
        await self.start_watches(jobs=False)
        pods = {j: self._running_pods(j, s or {}) for j, s in states.items()}
        usage = await self._pod_usage({node for by in pods.values() for _, node in by.values()})
        out = {}
        for job_id, by in pods.items():
            got = []
            for index, (key, _) in sorted(by.items()):
                u = usage.get(key)
                if u is not None and (u.cpu_seconds, u.memory_bytes, u.disk, u.network) != (None,) * 4:
                    got.append(metrics_mod.InstanceTotals(index, u.cpu_seconds, u.memory_bytes, u.disk, u.network))
            out[job_id] = got
        return out

    async def _pod_gpus(self, namespace: str, pods: set[str]) -> dict[ks.PodKey, list[metrics_mod.GpuSample]]:
        """DCGM's figures of these pods through Prometheus, where the health source reads Prometheus; else {}."""
        source = getattr(getattr(self.parent, "health", None), "source", None)
        if not pods or not callable(getattr(source, "pod_gpus", None)):
            return {}
        try:
            return await source.pod_gpus(namespace, pods)
        except Exception as e:  # noqa: BLE001 - the devices' use is then not measured
            self.log.warning("reading the jobs' device use from Prometheus failed: %s", e)
            return {}

    async def metrics(self, job_id: int, state: dict[str, Any], devices: dict[int, list[int]]) -> list[Any]:
        """CPU and memory from metrics-server (metrics.k8s.io PodMetrics: the main container's); disk and network
        from the kubelet's cAdvisor; devices from DCGM through Prometheus (instances that hold devices)."""
        await self.start_watches(jobs=False)
        running = self._running_pods(job_id, state)
        custom = k8s.CustomObjectsApi(await self.api())
        listing, why = None, ""
        try:
            listing = await custom.list_namespaced_custom_object(
                "metrics.k8s.io", "v1beta1", self.namespace, "pods",
                label_selector=ob.job_selector(self.settings, job_id))
        except ApiException as e:
            why = ("this cluster serves no metrics.k8s.io (install metrics-server)" if e.status == 404
                   else f"metrics.k8s.io refused ({e.status} {e.reason})")
        with_devices = {key[1] for i, (key, _) in running.items() if devices.get(i)}
        nodes = {node for _, node in running.values()}
        gpus, _ = await asyncio.gather(self._pod_gpus(state["namespace"], with_devices),
                                       self._pod_usage(nodes) if self.kubelet_stats and nodes else asyncio.sleep(0))
        by_pod = {item["metadata"]["name"]: item for item in (listing or {}).get("items") or []}
        out = []
        for index in _instances(state):
            if index not in running:
                out.append(metrics_mod.InstanceMetrics(index, note=why or "not running"))
                continue
            key = running[index][0]
            m = (metrics_mod.kube_instance_metrics(index, by_pod.get(key[1]), "main") if listing is not None
                 else metrics_mod.InstanceMetrics(index, note=why))
            g = gpus.get(key)
            out.append(dataclasses.replace(m, gpus=tuple(g) if g else None, disk=self._traffic(key, 2),
                                           network=self._traffic(key, 1)))
        return out


def _instances(state: dict[str, Any]) -> list[int]:
    return [int(r["offset"]) + k for r in state.get("roles", []) for k in range(int(r["count"]))]
