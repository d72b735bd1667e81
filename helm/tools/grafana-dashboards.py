#!/usr/bin/env python3
"""Write the Grafana dashboards of the chart (helm/ti-hub/files/grafana/*.json) from the panels listed here.

    python3 helm/tools/grafana-dashboards.py

Every panel's PromQL is run against a real Prometheus scraping a live ti service by
tests/e2e/test_prometheus.py; change the panels here and run this again, never the JSON by hand.
"""
import json
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "ti-hub" / "files" / "grafana"
DS = {"type": "prometheus", "uid": "${datasource}"}


def var_ds():
    return {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
            "current": {}, "hide": 0, "refresh": 1}


def var_q(name, label, query):
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": query, "refId": "var"}, "definition": query, "refresh": 2, "sort": 1,
            "current": {}, "includeAll": False, "multi": False, "hide": 0}


def panel(i, title, exprs, unit="short", kind="timeseries", legend="", desc=""):
    p = {"id": i, "type": kind, "title": title, "description": desc, "datasource": DS,
         "gridPos": {"h": 8, "w": 12, "x": 12 * ((i - 1) % 2), "y": 8 * ((i - 1) // 2)},
         "fieldConfig": {"defaults": {"unit": unit}, "overrides": []}, "options": {},
         "targets": [{"refId": chr(65 + k), "datasource": DS, "expr": e, "legendFormat": lf or legend}
                     for k, (e, lf) in enumerate(x if isinstance(x, tuple) else (x, "") for x in exprs)]}
    return p


def dash(uid, title, desc, variables, panels):
    return {"uid": uid, "title": title, "description": desc, "tags": ["ti-hub"], "timezone": "browser",
            "schemaVersion": 39, "version": 1, "editable": True, "refresh": "30s",
            "time": {"from": "now-6h", "to": "now"},
            "templating": {"list": [var_ds(), *variables]},
            "panels": [panel(i + 1, *p) for i, p in enumerate(panels)]}


boards = {
 "ti-hub-cluster": dash("ti-hub-cluster", "TiHub / Cluster", "Devices, jobs and the scheduler across all pools", [], [
   ("Devices by type: total, allocated, idle", [("sum by (device_type) (ti_devices_total)", "{{device_type}} total"),
     ("sum by (device_type) (ti_devices_allocated)", "{{device_type}} allocated"),
     ("sum by (device_type) (ti_devices_idle)", "{{device_type}} idle")]),
   ("Allocated share of devices", [
    ("sum by (device_type) (ti_devices_allocated) / sum by (device_type) (ti_devices_total)",
     "{{device_type}}")], "percentunit"),
   ("Active jobs by state", [("sum by (state) (ti_active_jobs)", "{{state}}")]),
   ("Jobs ever submitted by state", [("sum by (state) (ti_jobs)", "{{state}}")]),
   ("GPU utilization (mean per type)", [("avg by (device_type) (DCGM_FI_DEV_GPU_UTIL)", "{{device_type}}")], "percent"),
   ("Admissions and preemptions per minute", [("sum(rate(ti_admissions_total[5m])) * 60", "admissions"),
     ("sum(rate(ti_preemptions_total[5m])) * 60", "preemptions")]),
   ("Workspace starts and reclaims per hour", [("sum(rate(ti_workspace_starts_total[1h])) * 3600", "starts"),
     ("sum(rate(ti_workspace_reclaims_total[1h])) * 3600", "reclaims")]),
   ("Scheduler cycle duration (p50, p95)", [
     ("histogram_quantile(0.5, sum by (le) (rate(ti_scheduler_cycle_seconds_bucket[5m])))", "p50"),
     ("histogram_quantile(0.95, sum by (le) (rate(ti_scheduler_cycle_seconds_bucket[5m])))", "p95")], "s"),
   ("API latency p95 by route", [
     ("histogram_quantile(0.95, sum by (le, route) (rate(ti_api_request_duration_seconds_bucket[5m])))",
       "{{route}}")], "s"),
   ("API requests per second by status", [
    ("sum by (code) (rate(ti_api_request_duration_seconds_count[5m]))", "{{code}}")], "reqps"),
   ("Age of the latest health sample", [("max(ti_health_sample_age_seconds)", "age")], "s", "stat"),
 ]),
 "ti-hub-vc": dash("ti-hub-vc", "TiHub / Virtual cluster", "One pool (virtual cluster): devices, work and users",
   [var_q("vc", "Virtual cluster", "label_values(ti_node_info, pool)")], [
   ("Devices: total, allocated, idle", [
    ("sum by (device_type) (ti_devices_total{pool=\"$vc\"})", "{{device_type}} total"),
     ("sum by (device_type) (ti_devices_allocated{pool=\"$vc\"})", "{{device_type}} allocated"),
     ("sum by (device_type) (ti_devices_idle{pool=\"$vc\"})", "{{device_type}} idle")]),
   ("Active jobs by state", [("sum by (state) (ti_active_jobs{pool=\"$vc\"})", "{{state}}")]),
   ("Queued by queue", [("sum by (device_type, kind) (ti_queue_length{pool=\"$vc\"})", "{{device_type}}/{{kind}}")]),
   ("Oldest wait by queue", [("max by (device_type, kind) (ti_queue_oldest_wait_seconds{pool=\"$vc\"})",
     "{{device_type}}/{{kind}}")], "s"),
   ("Devices held per user", [("sum by (user) (ti_user_devices_allocated{pool=\"$vc\"})", "{{user}}")]),
   ("GPU utilization of its nodes", [("avg by (device_type) (DCGM_FI_DEV_GPU_UTIL * on (node) group_left (pool) "
     "ti_node_info{pool=\"$vc\"})", "{{device_type}}")], "percent"),
   ("Nodes", [("sum by (node, device_type) (ti_node_devices_total{pool=\"$vc\"})", "{{node}} {{device_type}}")],
     "short", "table"),
 ]),
 "ti-hub-user": dash("ti-hub-user", "TiHub / User", "One user's allocation, usage score and work",
   [var_q("user", "User", "label_values(ti_user_jobs, user)")], [
   ("Devices held", [
    ("sum by (pool, device_type) (ti_user_devices_allocated{user=\"$user\"})", "{{pool}} {{device_type}}")]),
   ("Usage score", [("ti_user_usage_score{user=\"$user\"}", "{{device_type}}")]),
   ("Active jobs by state", [("sum by (state) (ti_user_jobs{user=\"$user\"})", "{{state}}")]),
   ("Share of allocated devices", [("sum by (device_type) (ti_user_devices_allocated{user=\"$user\"}) / "
     "on (device_type) sum by (device_type) (ti_devices_allocated)", "{{device_type}}")], "percentunit"),
 ]),
 "ti-hub-node": dash("ti-hub-node", "TiHub / Node",
   "One machine's devices (DCGM series) and host (node exporter series)",
   [var_q("machine", "Machine", "label_values(node_load1, machine)")], [
   ("GPU utilization", [("DCGM_FI_DEV_GPU_UTIL{Hostname=\"$machine\"}", "{{device_type}} {{gpu}}")], "percent"),
   ("GPU memory used", [("DCGM_FI_DEV_FB_USED{Hostname=\"$machine\"}", "{{gpu}} used"),
     ("DCGM_FI_DEV_FB_FREE{Hostname=\"$machine\"}", "{{gpu}} free")], "decmbytes"),
   ("GPU temperature", [("DCGM_FI_DEV_GPU_TEMP{Hostname=\"$machine\"}", "{{gpu}}")], "celsius"),
   ("GPU power", [("DCGM_FI_DEV_POWER_USAGE{Hostname=\"$machine\"}", "{{gpu}}")], "watt"),
   ("Uncorrectable ECC errors", [("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{Hostname=\"$machine\"}", "{{gpu}}")]),
   ("Devices allocated and idle", [("sum by (device_type) (ti_node_devices_allocated{machine=\"$machine\"})",
     "{{device_type}} allocated"), ("sum by (device_type) (ti_node_devices_idle{machine=\"$machine\"})",
       "{{device_type}} idle")]),
   ("CPU by mode", [("sum by (mode) (rate(node_cpu_seconds_total{machine=\"$machine\"}[5m]))", "{{mode}}")], "short"),
   ("Load (1 min)", [("node_load1{machine=\"$machine\"}", "load1")]),
   ("Memory used", [("1 - node_memory_MemAvailable_bytes{machine=\"$machine\"} / "
     "node_memory_MemTotal_bytes{machine=\"$machine\"}", "used")], "percentunit"),
   ("Disk used", [("1 - node_filesystem_avail_bytes{machine=\"$machine\"} / "
     "node_filesystem_size_bytes{machine=\"$machine\"}", "{{mountpoint}}")], "percentunit"),
   ("Network", [("rate(node_network_receive_bytes_total{machine=\"$machine\"}[5m])", "{{device}} in"),
     ("rate(node_network_transmit_bytes_total{machine=\"$machine\"}[5m])", "{{device}} out")], "Bps"),
 ]),
 "ti-hub-queue": dash("ti-hub-queue", "TiHub / Queues", "Queue lengths, waits and admissions per queue "
   "(pool, device type, kind)", [], [
   ("Queued jobs", [("sum by (pool, device_type, kind) (ti_queue_length)", "{{pool}}/{{device_type}}/{{kind}}")]),
   ("Oldest wait", [("max by (pool, device_type, kind) (ti_queue_oldest_wait_seconds)",
     "{{pool}}/{{device_type}}/{{kind}}")], "s"),
   ("Wait of admitted jobs (p50, p95)", [
     ("histogram_quantile(0.5, sum by (le, pool, device_type) (rate(ti_queue_wait_seconds_bucket[15m])))",
      "{{pool}}/{{device_type}} p50"),
     ("histogram_quantile(0.95, sum by (le, pool, device_type) (rate(ti_queue_wait_seconds_bucket[15m])))",
      "{{pool}}/{{device_type}} p95")], "s"),
   ("Admissions per minute", [("sum by (pool, device_type, kind) (rate(ti_admissions_total[15m])) * 60",
     "{{pool}}/{{device_type}}/{{kind}}")]),
   ("Preemptions per hour", [("sum by (pool, device_type) (rate(ti_preemptions_total[1h])) * 3600",
     "{{pool}}/{{device_type}}")]),
   ("Mean wait of admitted jobs", [("sum by (pool, device_type) (rate(ti_queue_wait_seconds_sum[1h])) / "
     "sum by (pool, device_type) (rate(ti_queue_wait_seconds_count[1h]))", "{{pool}}/{{device_type}}")], "s"),
 ]),
}
names = {"ti-hub-cluster": "cluster", "ti-hub-vc": "vc", "ti-hub-user": "user", "ti-hub-node": "node",
         "ti-hub-queue": "queue"}
for uid, d in boards.items():
    (OUT / f"{names[uid]}.json").write_text(json.dumps(d, indent=1) + "\n")
