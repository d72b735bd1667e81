"""The benchmark's own view of a Kubernetes API server: one client, the server's write counters, and a watch
that times every Job the same way whoever runs it (issue 20: one formula for Kueue and for TiHub).

The clock is this process's: a Job is "runnable" when it is first seen unsuspended (Kueue unsuspends a Job it
admitted; TiHub creates its Jobs unsuspended at admission) and "ended" when first seen with its pods counted as
succeeded (or failed past its backoff limit) or with a Complete or Failed condition.
"""

from __future__ import annotations

import collections
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE", "APPLY")


class Api:
    """A client with the admin kubeconfig's certificate (one session per thread: requests' are not shared)."""

    def __init__(self, kubeconfig: Path):
        cfg = json.loads(Path(kubeconfig).read_text())
        cluster, user = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
        self.server = cluster["server"].rstrip("/")
        self.verify = cluster["certificate-authority"]
        self.cert = (user["client-certificate"], user["client-key"])
        self._local = threading.local()

    def session(self) -> requests.Session:
        s = getattr(self._local, "s", None)
        if s is None:
            s = self._local.s = requests.Session()
            # else REQUESTS_CA_BUNDLE and proxies from the environment override the cluster's own CA
            s.trust_env = False
            s.verify, s.cert = self.verify, self.cert
        return s

    def get(self, path: str, **params) -> requests.Response:
        r = self.session().get(self.server + path, params=params, timeout=60)
        r.raise_for_status()
        return r

    def create(self, path: str, body: dict) -> dict:
        r = self.session().post(self.server + path, json=body, timeout=60)
        if r.status_code >= 300:
            raise RuntimeError(f"POST {path}: {r.status_code} {r.text[:300]}")
        return r.json()


def apiserver_writes(api: Api) -> collections.Counter:
    """``apiserver_request_total`` for writes, by resource (and subresource): a counter to take differences of."""
    return parse_writes(api.get("/metrics").text)


def parse_writes(metrics_text: str) -> collections.Counter:
    out: collections.Counter = collections.Counter()
    for line in metrics_text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_s, value = line[len("apiserver_request_total{"):].rsplit("} ", 1)
        labels = dict(kv.split("=", 1) for kv in _split_labels(labels_s))
        verb = labels.get("verb", "").strip('"')
        if verb in WRITE_VERBS:
            res = labels.get("resource", "").strip('"')
            sub = labels.get("subresource", "").strip('"')
            out[f"{res}/{sub}" if sub else res] += int(float(value))
    return out


def _split_labels(s: str) -> list[str]:
    """Prometheus label pairs (values are quoted and may hold commas)."""
    parts, cur, quoted = [], "", False
    for ch in s:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        parts.append(cur)
    return parts


def writes_between(before: collections.Counter, after: collections.Counter) -> dict[str, int]:
    return {k: after[k] - before.get(k, 0) for k in sorted(after) if after[k] - before.get(k, 0) > 0}


class JobWatcher:
    """Every Job (or, with ``resource="pods"``, every pod) of a namespace: name -> {"labels", "runnable", "ended",
    "failed"} in epoch seconds. A pod is runnable when first seen (created: what a Job is when unsuspended) and
    ends when first seen Succeeded or Failed."""

    def __init__(self, api: Api, namespace: str, resource: str = "jobs"):
        if resource not in ("jobs", "pods"):
            raise ValueError(f"resource must be jobs or pods, not {resource!r}")
        self.api, self.namespace, self.resource = api, namespace, resource
        self.jobs: dict[str, dict] = {}
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.events = 0

    def start(self) -> JobWatcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def ended(self) -> int:
        with self.lock:
            return sum(1 for j in self.jobs.values() if j.get("ended"))

    def _see(self, obj: dict) -> None:
        now = time.time()
        meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
        with self.lock:
            j = self.jobs.setdefault(meta["name"], {"labels": meta.get("labels") or {}, "first_seen": now})
            if self.resource == "pods":
                j.setdefault("runnable", now)
                if "ended" not in j and status.get("phase") in ("Succeeded", "Failed"):
                    j["ended"], j["failed"] = now, status["phase"] == "Failed"
                return
            if not spec.get("suspend") and "runnable" not in j:
                j["runnable"] = now
            if "ended" not in j:
                # the Job controller counts the pod's end before it writes the condition: the first of the two
                if status.get("succeeded", 0) >= spec.get("completions", 1):
                    j["ended"], j["failed"] = now, False
                elif status.get("failed", 0) > spec.get("backoffLimit", 6):
                    j["ended"], j["failed"] = now, True
                for c in status.get("conditions") or []:
                    if "ended" not in j and c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
                        j["ended"], j["failed"] = now, c["type"] == "Failed"

    def _run(self) -> None:
        path = (f"/apis/batch/v1/namespaces/{self.namespace}/jobs" if self.resource == "jobs"
                else f"/api/v1/namespaces/{self.namespace}/pods")
        rv = ""
        while not self._stop.is_set():
            try:
                if not rv:
                    listing = self.api.get(path).json()
                    for obj in listing["items"]:
                        self._see(obj)
                    rv = listing["metadata"]["resourceVersion"]
                r = self.api.session().get(self.api.server + path, stream=True, timeout=(10, 90), params={
                    "watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "60"})
                for line in r.iter_lines():
                    if self._stop.is_set():
                        return
                    if not line:
                        continue
                    ev = json.loads(line)
                    if ev["type"] == "ERROR":
                        rv = ""  # expired: list again
                        break
                    rv = ev["object"]["metadata"].get("resourceVersion", rv)
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        self.events += 1
                        self._see(ev["object"])
            except requests.exceptions.ChunkedEncodingError:
                continue  # the server ended the watch (its timeout): go on from the last version seen
            except (requests.RequestException, ValueError, KeyError) as e:
                print(f"  {self.resource} watch: {e!r}; again", file=sys.stderr, flush=True)
                time.sleep(0.5)


class Creator:
    """Creates objects at their scheduled offsets from a few threads, as fast as the server takes them, and
    records when each creation was asked for."""

    def __init__(self, api: Api, threads: int = 8):
        self.api, self.threads = api, threads
        self.asked: dict[str, float] = {}
        self.errors: list[str] = []

    def run(self, schedule: list[tuple[float, str, dict]]) -> tuple[float, float]:
        """``schedule``: (offset s, API collection path, object), sorted by offset. Returns (t0, max lag s)."""
        t0 = time.time()
        lag = 0.0

        def one(item: tuple[float, str, dict]) -> None:
            nonlocal lag
            offset, path, obj = item
            now = time.time()
            lag = max(lag, now - t0 - offset)
            self.asked[obj["metadata"]["name"]] = now
            try:
                self.api.create(path, obj)
            except Exception as e:  # noqa: BLE001 - reported with the results
                self.errors.append(str(e)[:200])

        with ThreadPoolExecutor(self.threads) as pool:
            for item in schedule:
                delay = t0 + item[0] - time.time()
                if delay > 0:
                    time.sleep(delay)
                pool.submit(one, item)
        return t0, lag


def by_label(seen: dict[str, dict], label: str) -> dict[str, dict]:
    """Watched objects merged per value of ``label`` (a job relaunched has several pods): runnable when its first
    was, ended as its newest did."""
    groups: dict[str, list[dict]] = {}
    for obj in sorted(seen.values(), key=lambda o: o["first_seen"]):
        if (key := obj["labels"].get(label)) is not None:
            groups.setdefault(key, []).append(obj)
    out = {}
    for key, objs in groups.items():
        out[key] = {k: v for k, v in objs[-1].items() if k != "runnable"}
        if runs := [o["runnable"] for o in objs if o.get("runnable") is not None]:
            out[key]["runnable"] = min(runs)
    return out
