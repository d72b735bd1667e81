"""Machine alert rules (domain/healthrules.py, pure; ops/alertrules.py parse): percent of the samples in the window,
the window itself, the step, clearing, and validation that names the field and the rule."""

from __future__ import annotations

import dataclasses

import pytest

from ti_hub.domain.errors import ValidationError
from ti_hub.domain.readings import DeviceReading, FsReading, HostReading, Snapshot
from ti_hub.domain.healthrules import RuleSpec, StepClock, ValueCache, evaluate, snapshot_values
from ti_hub.ops.alertrules import parse

CPU = RuleSpec(1, "cpu-busy", "cpu", ">", 90.0, interval=100, percent=50, step=30)
ECC = RuleSpec(2, "ecc", "gpu_ecc", ">", 0, interval=60, percent=1, step=15)
HOT = RuleSpec(3, "hot", "gpu_temperature", ">", 85, interval=100, percent=100, step=60)
DISK = RuleSpec(4, "disk", "disk_free", "<", 20, interval=100, percent=100, step=60)


def snap(at: float, cpu: dict[str, float] | None = None, devices: tuple = (), hosts: tuple = ()) -> Snapshot:
    return Snapshot(at, tuple(HostReading(m, cpu_percent=c) for m, c in (cpu or {}).items()) + hosts, devices)


def dev(machine: str, i: int, ecc=None, temp=None) -> DeviceReading:
    return DeviceReading(node=machine, device_type="gpu", device=i, machine=machine, ecc_uncorrectable=ecc,
                         temperature_c=temp)


def test_a_rule_holds_when_the_matching_samples_reach_its_percent():
    # m1 busy in 5 of 10 samples (50 %): holds; m2 in 4 of 10 (40 %): does not; m3 never
    snaps = [snap(t * 10.0, {"m1": 95.0 if t % 2 else 10.0, "m2": 99.0 if t < 4 else 50.0, "m3": 20.0})
             for t in range(10)]
    (h,) = evaluate([CPU], snaps, now=95.0)
    assert (h.machine, h.matching, h.samples, h.worst, h.latest) == ("m1", 5, 10, 95.0, 95.0)
    assert h.figures()["percent"] == 50.0 and h.figures()["threshold"] == 90.0
    assert evaluate([dataclasses.replace(CPU, percent=51)], snaps, now=95.0) == []


def test_a_window_still_filling_counts_the_samples_it_should_hold():
    first = [snap(0.0, {"m1": 99.0})]
    assert [h.machine for h in evaluate([CPU], first, 0.0)] == ["m1"]  # 1 of 1 sample
    assert evaluate([CPU], first, 0.0, sample_interval=10.0) == []  # 1 of the 10 a 100 s window holds
    half = [snap(t * 10.0, {"m1": 99.0}) for t in range(5)]
    (h,) = evaluate([CPU], half, 40.0, sample_interval=10.0)  # 5 of 10: 50 %
    assert (h.matching, h.samples) == (5, 5)
    ecc = [snap(0.0, devices=(dev("g1", 0, ecc=1),))]
    assert [h.machine for h in evaluate([ECC], ecc, 0.0, sample_interval=15.0)] == ["g1"]  # 1 of 4 >= 1 %


def test_only_samples_inside_the_interval_count():
    old = [snap(t, {"m1": 99.0}) for t in (0.0, 10.0, 20.0)]
    new = [snap(t, {"m1": 10.0}) for t in (200.0, 210.0)]
    assert evaluate([CPU], old + new, now=215.0) == []  # the busy samples are past the 100 s window
    (h,) = evaluate([CPU], old + new, now=100.0)  # then they were inside it (the later ones not yet taken)
    assert h.samples == 3


def test_a_single_ecc_error_fires_and_the_worst_device_counts():
    snaps = [snap(0, devices=(dev("g1", 0, ecc=0), dev("g1", 1, ecc=0), dev("g2", 0, ecc=0))),
             snap(15, devices=(dev("g1", 0, ecc=0), dev("g1", 1, ecc=2), dev("g2", 0, ecc=None)))]
    (h,) = evaluate([ECC], snaps, now=20)
    assert (h.machine, h.matching, h.samples, h.worst) == ("g1", 1, 2, 2.0)


def test_unmeasured_readings_are_no_samples_and_below_thresholds_use_the_minimum():
    snaps = [snap(0, devices=(dev("g1", 0, temp=90), dev("g1", 1, temp=None))),
             snap(10, devices=(dev("g1", 0, temp=None), dev("g1", 1, temp=None)))]
    (h,) = evaluate([HOT], snaps, now=10)
    assert (h.matching, h.samples) == (1, 1)  # the second snapshot measured nothing on g1
    full = HostReading("h", filesystems=(FsReading("/", size_bytes=100, avail_bytes=50),
                                         FsReading("/data", size_bytes=100, avail_bytes=5)))
    assert snapshot_values(Snapshot(0, (full,)))["disk_free"] == {"h": 5.0}
    (d,) = evaluate([DISK], [Snapshot(0, (full,))], now=0)
    assert d.worst == 5.0


def test_the_cache_computes_each_snapshot_once_and_forgets_old_ones():
    cache = ValueCache()
    snaps = [snap(t, {"m1": 99.0}) for t in (0.0, 10.0)]
    evaluate([CPU, HOT], snaps, 10.0, cache)
    first = cache.by_at[0.0]
    evaluate([CPU], snaps, 10.0, cache)
    assert cache.by_at[0.0] is first
    cache.forget(5.0)
    assert list(cache.by_at) == [10.0]


def test_each_rule_is_evaluated_at_most_every_step():
    clock = StepClock()
    assert clock.due([CPU, ECC], 0) == [CPU, ECC]
    clock.done([CPU, ECC], 0)
    assert clock.due([CPU, ECC], 15) == [ECC]
    clock.done([ECC], 15)
    assert clock.due([CPU, ECC], 29) == []
    assert clock.due([CPU, ECC], 30) == [CPU, ECC]
    clock.keep_only([2])
    assert clock.due([CPU], 31) == [CPU]  # a rule forgotten (disabled, deleted) starts afresh


def test_a_condition_that_stops_holding_is_no_longer_reported():
    snaps = [snap(0, {"m1": 99.0}), snap(10, {"m1": 99.0})]
    assert [h.machine for h in evaluate([CPU], snaps, 10)] == ["m1"]
    later = snaps + [snap(t, {"m1": 5.0}) for t in (20, 30, 40)]
    assert evaluate([CPU], later, 40) == []  # 2 of 5 samples: below 50 %


@pytest.mark.parametrize("data, field, words", [
    ({"metric": "gpu_ecc", "op": ">", "threshold": 0}, "name", "name must be"),
    ({"name": "r1xx", "metric": "fan", "op": ">", "threshold": 0}, "metric", "gpu_ecc, gpu_temperature"),
    ({"name": "r1xx", "metric": "cpu", "op": "=", "threshold": 0}, "op", ">, >=, <, <="),
    ({"name": "r1xx", "metric": "cpu", "op": ">", "threshold": 120}, "threshold", "a percent: between 0 and 100"),
    ({"name": "r1xx", "metric": "gpu_temperature", "op": ">", "threshold": 500}, "threshold", "degrees C"),
    ({"name": "r1xx", "metric": "cpu", "op": ">", "threshold": 90, "percent": 0}, "percent", "between 0.1 and 100"),
    ({"name": "r1xx", "metric": "cpu", "op": ">", "threshold": 90, "interval": 7200}, "interval", "between 1 and 3600"),
    ({"name": "r1xx", "metric": "cpu", "op": ">", "threshold": 90, "step": 0}, "step", "between 1 and 86400"),
    ({"name": "r1xx", "metric": "cpu", "op": ">", "threshold": 90, "cordon": "yes"}, "cordon", "true or false"),
    ({"name": "r1xx", "metric": "cpu", "op": ">", "threshold": 90, "colour": "red"}, "colour", "unknown field"),
])
def test_bad_rules_are_refused_naming_the_field_and_the_rule(data, field, words):
    with pytest.raises(ValidationError) as e:
        parse(data, 3600)
    assert e.value.field == field and words in e.value.detail, e.value.detail


def test_a_good_rule_gets_its_defaults():
    out = parse({"name": "hot-gpus", "metric": "gpu_temperature", "op": ">=", "threshold": 80}, 3600)
    assert out == {"name": "hot-gpus", "metric": "gpu_temperature", "op": ">=", "threshold": 80.0, "step": 60,
                   "interval": 300, "percent": 100.0, "severity": "warning", "enabled": True,
                   "notify_owners": False, "cordon": False}
