"""MON2's evaluator, pure: which machine alert rules hold on which machines, given the recent health snapshots.

A rule looks back ``interval`` seconds. Each snapshot there gives each machine at most one value of the rule's
metric (a machine whose metric was not measured in a snapshot has no sample there); the rule holds on a machine
when at least one sample matches ``value op threshold`` and the matching samples are at least ``percent`` % of
that machine's samples in the window (SPEC MON2's ``percent_threshold``).

Per-machine values of a snapshot are computed once and kept in a ``ValueCache`` keyed by the snapshot's time,
so the leader's evaluations every few seconds only compute the newest snapshot (benchmarks/bench_alert_rules.py).
"""

from __future__ import annotations

import operator
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


def snapshot_values(snap: Snapshot) -> Values:
    """Every metric's value per machine in one snapshot (one pass over devices and hosts)."""
    ecc: dict[str, float] = {}
    temp: dict[str, float] = {}
    for d in snap.devices:
        m = d.machine or d.node
        if d.ecc_uncorrectable is not None:
            x = float(d.ecc_uncorrectable)
            if x > ecc.get(m, -1.0):
                ecc[m] = x
        if d.temperature_c is not None:
            x = float(d.temperature_c)
            if x > temp.get(m, -1e9):
                temp[m] = x
    cpu: dict[str, float] = {}
    mem: dict[str, float] = {}
    disk: dict[str, float] = {}
    for h in snap.hosts:
        if h.cpu_percent is not None:
            cpu[h.machine] = float(h.cpu_percent)
        used = h.memory_used_percent
        if used is not None:
            mem[h.machine] = used
        sized = [f for f in h.filesystems if f.size_bytes > 0]
        if sized:
            disk[h.machine] = min(100.0 - f.used_percent for f in sized)
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


def evaluate(rules: Iterable[RuleSpec], snapshots: Sequence[Snapshot], now: float,
             cache: ValueCache | None = None) -> list[Holding]:
    """The (rule, machine) pairs that hold now; ``snapshots`` oldest first (HealthMonitor.since)."""
    cache = cache or ValueCache()
    out: list[Holding] = []
    for rule in rules:
        test = OPS[rule.op]
        start = now - rule.interval
        matching: dict[str, int] = {}
        total: dict[str, int] = {}
        worst: dict[str, float] = {}
        latest: dict[str, float] = {}
        higher = rule.op in (">", ">=")
        thr = rule.threshold
        for snap in snapshots:
            if snap.at < start or snap.at > now:
                continue
            for machine, x in cache.values(snap)[rule.metric].items():
                total[machine] = total.get(machine, 0) + 1
                latest[machine] = x
                if test(x, thr):
                    matching[machine] = matching.get(machine, 0) + 1
                    w = worst.get(machine)
                    if w is None or (x > w if higher else x < w):
                        worst[machine] = x
        for machine, k in matching.items():
            n = total[machine]
            if 100.0 * k >= rule.percent * n:
                out.append(Holding(rule, machine, k, n, worst[machine], latest[machine]))
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
