"""MON2's evaluator, pure: which machine alert rules hold on which machines, given the recent health snapshots.

A rule looks back ``interval`` seconds. Each snapshot there gives each machine at most one value of the rule's
metric (a machine whose metric was not measured in a snapshot has no sample there); the rule holds on a machine
when at least one sample matches ``value op threshold`` and the matching samples are at least ``percent`` % of
that machine's samples in the window (SPEC MON2's ``percent_threshold``); while the window is still filling
(after a start) the samples it should hold are counted instead.

Per-machine values of a snapshot are computed once and kept in a ``ValueCache`` keyed by the snapshot's time,
so the leader's evaluations every few seconds only compute the newest snapshot (benchmarks/bench_alert_rules.py).
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .readings import Snapshot

# metric -> what it measures on a machine (docs, the API's and the page's help)
METRICS: dict[str, str] = {
    "gpu_ecc": "uncorrectable (volatile double-bit) ECC errors: the most of any GPU of the machine",
    "gpu_temperature": "GPU temperature in degrees C: the hottest GPU of the machine",
    "cpu": "host CPU busy percent (all cores)",
    "memory": "host memory used percent",
    "disk_free": "filesystem free percent: the fullest watched filesystem (LocalHealthSource.filesystems)",
}
OPS: dict[str, Callable[[float, float], bool]] = {">": operator.gt, ">=": operator.ge, "<": operator.lt,
                                                 "<=": operator.le}
DEVICE_METRICS = ("gpu_ecc", "gpu_temperature")

Values = dict[str, dict[str, float]]  # metric -> machine -> value


@dataclass(frozen=True)
class RuleSpec:
    """What the evaluator needs of a rule (db/alertrules.py AlertRule)."""

    id: int
    name: str
    metric: str
    op: str
    threshold: float
    interval: float
    percent: float
    step: float = 60.0


@dataclass(frozen=True)
class Holding:
    """A rule holds on a machine, with the figures that made it hold."""

    rule: RuleSpec
    machine: str
    matching: int  # samples in the window that match
    samples: int  # samples in the window
    worst: float  # the farthest value past the threshold (max for > and >=, min for < and <=)
    latest: float  # the newest sample's value

    def figures(self) -> dict[str, Any]:
        return {"metric": self.rule.metric, "op": self.rule.op, "threshold": self.rule.threshold,
                "matching": self.matching, "samples": self.samples,
                "percent": round(100.0 * self.matching / self.samples, 1), "worst": self.worst,
                "latest": self.latest, "interval": self.rule.interval}


def _max_by_machine(values: list[float | int | None], machines: list[str]) -> dict[str, float]:
    """The largest value per machine, None skipped (the cold evaluation's main cost: kept to one tight loop)."""
    out: dict[str, float] = {}
    for x, m in zip(values, machines):
        if x is not None and (m not in out or x > out[m]):
            out[m] = x
    return out


def snapshot_values(snap: Snapshot) -> Values:
    """Every metric's value per machine in one snapshot."""
    devs = snap.devices
    machines = [d.machine or d.node for d in devs]
    ecc = _max_by_machine([d.ecc_uncorrectable for d in devs], machines)
    temp = _max_by_machine([d.temperature_c for d in devs], machines)
    cpu: dict[str, float] = {}
    mem: dict[str, float] = {}
    disk: dict[str, float] = {}
    for h in snap.hosts:
        m = h.machine
        if h.cpu_percent is not None:
            cpu[m] = float(h.cpu_percent)
        total, avail = h.memory_total_bytes, h.memory_available_bytes
        if total and avail is not None:
            mem[m] = 100.0 * (total - avail) / total  # HostReading.memory_used_percent, inlined (200 hosts)
        free = [100.0 * f.avail_bytes / f.size_bytes for f in h.filesystems if f.size_bytes > 0]
        if free:
            disk[m] = min(free)
    return {"gpu_ecc": ecc, "gpu_temperature": temp, "cpu": cpu, "memory": mem, "disk_free": disk}


class ValueCache:
    """Per-machine values of recent snapshots by snapshot time; forget() drops those out of every window."""

    def __init__(self) -> None:
        self.by_at: dict[float, Values] = {}

    def values(self, snap: Snapshot) -> Values:
        v = self.by_at.get(snap.at)
        if v is None:
            v = self.by_at[snap.at] = snapshot_values(snap)
        return v

    def forget(self, before: float) -> None:
        for at in [a for a in self.by_at if a < before]:
            del self.by_at[at]


def _hits(vals: dict[str, float], op: str, thr: float) -> list[str]:
    # one comprehension per operator: no call per sample
    if op == ">":
        return [k for k, x in vals.items() if x > thr]
    if op == ">=":
        return [k for k, x in vals.items() if x >= thr]
    if op == "<":
        return [k for k, x in vals.items() if x < thr]
    return [k for k, x in vals.items() if x <= thr]


def evaluate(rules: Iterable[RuleSpec], snapshots: Sequence[Snapshot], now: float,
             cache: ValueCache | None = None, sample_interval: float = 0.0) -> list[Holding]:
    """The (rule, machine) pairs that hold now; ``snapshots`` oldest first (HealthMonitor.since).

    ``sample_interval`` (HealthMonitor.interval): the percent counts at least the samples the interval should
    hold, so that a rule "for 80 % of 5 minutes" does not fire on the first sample after a start (an ECC rule at
    1 % still fires on one sample)."""
    cache = cache or ValueCache()
    out: list[Holding] = []
    for rule in rules:
        window = [cache.values(s)[rule.metric] for s in snapshots if now - rule.interval <= s.at <= now]
        total: Counter[str] = Counter()
        matching: Counter[str] = Counter()
        for vals in window:
            total.update(vals.keys())
            matching.update(_hits(vals, rule.op, rule.threshold))
        pick = max if rule.op in (">", ">=") else min
        test = OPS[rule.op]
        expected = int(rule.interval // sample_interval) if sample_interval > 0 else 0
        for machine, k in matching.items():
            n = total[machine]
            if 100.0 * k < rule.percent * max(n, expected):
                continue
            seen = [vals[machine] for vals in window if machine in vals]
            worst = pick(x for x in seen if test(x, rule.threshold))
            out.append(Holding(rule, machine, k, n, worst, seen[-1]))
    return out


class StepClock:
    """Which rules are due: each rule is evaluated at most every ``step`` seconds (its first time at once)."""

    def __init__(self) -> None:
        self.last: dict[int, float] = {}

    def due(self, rules: Iterable[RuleSpec], now: float) -> list[RuleSpec]:
        out = []
        for r in rules:
            last = self.last.get(r.id)
            if last is None or now - last >= r.step - 1e-6:
                out.append(r)
        return out

    def done(self, rules: Iterable[RuleSpec], now: float) -> None:
        for r in rules:
            self.last[r.id] = now

    def keep_only(self, ids: Iterable[int]) -> None:
        keep = set(ids)
        for i in [i for i in self.last if i not in keep]:
            del self.last[i]
