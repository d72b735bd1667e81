"""Events counted in the process where they happen (scheduler: the leader; requests: every API process), kept in
prometheus_client's multiprocess mode so that whichever process answers a scrape reports all of them.

``setup(directory)`` runs once in the leader before the API processes fork (TiService.initialize through
MetricsExporter): it creates the instruments with values kept in per-process files under ``directory``, the files
prometheus_client's MultiProcessCollector reads. Until then every function here is a no-op (the CLI, unit tests,
tools that import the scheduler). Counters restart at 0 with the service, as Prometheus expects of counters
(``rate()`` handles resets).

prometheus_client picks its multiprocess mode from the environment (PROMETHEUS_MULTIPROC_DIR, read when a value
is created and after a fork) and for every metric of the process. Neither suits a library: the variable would
reach every child that copies the environment (a hub started by a test after an in-process TiService would write
its own metrics into a directory long gone) and JupyterHub's metrics in the same process would change mode. So
the values of *our* instruments are made by ``value_class``, bound to the directory, and prometheus_client's
ValueClass is swapped in only while ours create a value (on the event loop: one at a time).
"""

from __future__ import annotations

import logging
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# seconds: a queue wait spans seconds (an idle cluster) to days (a full one)
WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400, 259200)
CYCLE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
API_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
log = logging.getLogger("ti_hub.metrics")


class Instruments:
    def __init__(self) -> None:
        from prometheus_client import Counter, Histogram

        kw: dict[str, Any] = {"registry": None}  # never the global registry: the scrape reads the files
        self.admissions = Counter("ti_admissions_total", "Jobs and workspaces admitted by the scheduler",
                                  ["pool", "device_type", "kind"], **kw)
        self.preemptions = Counter("ti_preemptions_total", "Jobs preempted to make room for others (JOB8)",
                                   ["pool", "device_type"], **kw)
        self.wait = Histogram("ti_queue_wait_seconds", "Time admitted jobs waited in their queue (recorded at "
                              "admission: from queued to admitted)", ["pool", "device_type", "kind"],
                              buckets=WAIT_BUCKETS, **kw)
        self.cycle = Histogram("ti_scheduler_cycle_seconds", "Duration of the scheduler's cycles (capacity, "
                               "stops, watching, admission)", buckets=CYCLE_BUCKETS, **kw)
        self.ws_starts = Counter("ti_workspace_starts_total", "Workspaces admitted to start", ["pool", "device_type"],
                                 **kw)
        self.reclaims = Counter("ti_workspace_reclaims_total", "Idle workspaces stopped to reclaim their devices",
                                ["pool", "device_type"], **kw)
        self.api = Histogram("ti_api_request_duration_seconds", "Latency of the ti service's HTTP requests by "
                             "route pattern (never the raw path)", ["method", "route", "code"],
                             buckets=API_BUCKETS, **kw)


_inst: Instruments | None = None
_dir: str | None = None


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def value_class(directory: str, process_identifier=os.getpid) -> type:
    """prometheus_client's MultiProcessValue (values.py) with the directory given, not read from the environment:
    one file per process and metric type, ``<type>_<pid>.db``, reopened after a fork."""
    from threading import Lock

    from prometheus_client.mmap_dict import MmapedDict, mmap_key

    files: dict[str, Any] = {}
    made: list[Any] = []
    pid = {"value": process_identifier()}
    lock = Lock()

    class MmapedValue:
        _multiprocess = True

        def __init__(self, typ, metric_name, name, labelnames, labelvalues, help_text, multiprocess_mode="",
                     **_kwargs):
            self._params = typ, metric_name, name, labelnames, labelvalues, help_text, multiprocess_mode
            with lock:
                self._forked()
                self._reset()
                made.append(self)

        def _reset(self) -> None:
            typ, metric_name, name, labelnames, labelvalues, help_text, mode = self._params
            prefix = f"{typ}_{mode}" if typ == "gauge" else typ
            if prefix not in files:
                files[prefix] = MmapedDict(os.path.join(directory, f"{prefix}_{pid['value']}.db"))
            self._file = files[prefix]
            self._key = mmap_key(metric_name, name, labelnames, labelvalues, help_text)
            self._value, self._timestamp = self._file.read_value(self._key)

        def _forked(self) -> None:
            actual = process_identifier()
            if pid["value"] != actual:  # an API process forked from the leader: files of its own, from 0
                pid["value"] = actual
                for f in files.values():
                    f.close()
                files.clear()
                for v in made:
                    v._reset()

        def inc(self, amount: float) -> None:
            with lock:
                self._forked()
                self._value += amount
                self._timestamp = 0.0
                self._file.write_value(self._key, self._value, self._timestamp)

        def set(self, value: float, timestamp: float | None = None) -> None:
            with lock:
                self._forked()
                self._value, self._timestamp = value, timestamp or 0.0
                self._file.write_value(self._key, self._value, self._timestamp)

        def set_exemplar(self, exemplar: Any) -> None:
            return

        def get(self) -> float:
            with lock:
                self._forked()
                return self._value

        def get_exemplar(self) -> None:
            return None

    return MmapedValue


_value: type | None = None


@contextmanager
def _ours():
    """prometheus_client creates a metric's values with its module-wide ValueClass: ours while ours are made."""
    from prometheus_client import values

    saved, values.ValueClass = values.ValueClass, _value
    try:
        yield
    finally:
        values.ValueClass = saved


def setup(root: str | Path) -> str:
    """Per-process files under ``root/<this pid>`` (the leader's; API processes fork from it and write files of
    their own there). Directories of earlier runs are removed: their counters ended with them. Returns the
    directory that scrapes read."""
    global _inst, _dir, _value
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for old in root.iterdir():
        if old.is_dir() and old.name.isdigit() and int(old.name) != os.getpid() and not alive(int(old.name)):
            shutil.rmtree(old, ignore_errors=True)
    here = root / str(os.getpid())
    shutil.rmtree(here, ignore_errors=True)
    here.mkdir()
    _dir, _value = str(here), value_class(str(here))
    with _ours():
        _inst = Instruments()
    return _dir


def directory() -> str | None:
    return _dir


def reset() -> None:
    """No instruments any more (tests that called ``setup``)."""
    global _inst, _dir, _value
    _inst = _dir = _value = None


def scheduled(admitted: list[tuple[str, str, str, float | None]], preempted: list[tuple[str, str]]) -> None:
    """A scheduling decision applied: admitted (pool, device_type, kind, seconds waited or None), preempted
    (pool, device_type) victims."""
    if _inst is None:
        return
    try:
        with _ours():
            _count(admitted, preempted)
    except Exception:  # a metric must never break the scheduler
        log.exception("counting admissions failed")


def _count(admitted: list[tuple[str, str, str, float | None]], preempted: list[tuple[str, str]]) -> None:
    assert _inst is not None
    for pool, dtype, kind, waited in admitted:
        _inst.admissions.labels(pool, dtype, kind).inc()
        if waited is not None:
            _inst.wait.labels(pool, dtype, kind).observe(max(0.0, waited))
        if kind == "workspace":
            _inst.ws_starts.labels(pool, dtype).inc()
        # every queue that admitted anything shows its other counters from 0 on (a panel of rates then shows a
        # flat line, not "no data")
        _inst.preemptions.labels(pool, dtype)
        _inst.ws_starts.labels(pool, dtype)
        _inst.reclaims.labels(pool, dtype)
    for pool, dtype in preempted:
        _inst.preemptions.labels(pool, dtype).inc()


def decided(dec: Any, now: float) -> tuple[list[tuple[str, str, str, float | None]], list[tuple[str, str]]]:
    """What ``scheduled`` counts of a queueing.Decisions: each admitted job's queue and wait (queued_at to now),
    and a (pool, device type) per preempted victim (the preempting job's: a victim holds that device type)."""
    admitted, preempted = [], []
    for a in dec.admitted:
        j = dec.full.get(a.job_id)
        if j is None:
            continue
        waited = None if j.queued_at is None else now - j.queued_at.timestamp()
        admitted.append((j.pool, j.device_type, j.kind, waited))
    for _victim, by in dec.preempt.items():
        j = dec.full.get(by)
        if j is not None:
            preempted.append((j.pool, j.device_type))
    return admitted, preempted


def cycle(seconds: float) -> None:
    if _inst is not None:
        try:
            _inst.cycle.observe(seconds)
        except Exception:
            log.exception("recording the scheduler cycle failed")


def reclaimed(pool: str, device_type: str) -> None:
    """An idle workspace was stopped to reclaim its devices (the idle policy calls this)."""
    if _inst is not None:
        try:
            with _ours():
                _inst.reclaims.labels(pool, device_type).inc()
        except Exception:
            log.exception("counting a reclaim failed")


def route_of(handler: Any) -> str:
    """A request's route pattern: the API route's template ("/jobs/{id}"), a page's name, or the handler's
    class; never the raw path (its ids would make a series per job)."""
    route = getattr(handler, "route", None)
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    page = getattr(handler, "page", None)
    name = getattr(page, "name", None)
    if isinstance(name, str):
        return "page:" + name
    return type(handler).__name__


def request_done(handler: Any) -> None:
    """From the access log (every finished request of this process)."""
    if _inst is None:
        return
    try:
        with _ours():
            _inst.api.labels(handler.request.method, route_of(handler), str(handler.get_status())).observe(
                handler.request.request_time())
    except Exception:  # noqa: BLE001 - a metric must never break a request
        pass
