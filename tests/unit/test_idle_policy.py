"""The idle policy's pure core (WS6): idle runs, thresholds, unmeasured readings, renewals, warnings, exemptions."""

from __future__ import annotations

from ti_hub.domain import idle
from ti_hub.domain.readings import DeviceReading, Snapshot

DEVS = [("n1", "gpu", 0), ("n1", "gpu", 1)]
KW = {"idle_time": 30.0, "grace": 20.0}


def samples(*utils, start: float = 1000.0, every: float = 10.0, threshold: float = 5.0, keep: float = 3600.0
            ) -> idle.IdleRuns:
    """The runs after one snapshot per entry: a number for both devices, a pair for each, None for "not measured"."""
    runs = idle.IdleRuns(threshold, keep)
    for k, u in enumerate(utils):
        pair = u if isinstance(u, tuple) else (u, u)
        runs.add(Snapshot(start + k * every, (), tuple(
            DeviceReading("n1", "gpu", i, utilization_percent=x) for i, x in enumerate(pair))))
    return runs


def test_devices_below_the_threshold_for_idle_time_are_warned_with_their_figures():
    snaps = samples(50, 1, 2, 0, 3)  # idle from t=1010 on
    assert idle.decide(snaps, DEVS, now=1030.0, **KW).state == idle.OK  # 20 s idle: not yet
    snaps = samples(50, 1, 2, 0, 3, 4)
    v = idle.decide(snaps, DEVS, now=1050.0, **KW)
    assert v.state == idle.WARN and v.since == 1010.0 and v.reclaim_at == 1070.0
    f = v.figures
    assert f["devices"] == ["n1/gpu/0", "n1/gpu/1"] and f["samples"] == 5 and f["mean_utilization"] == 2.0
    assert f["max_utilization"] == 4.0 and f["idle_seconds"] == 40.0 and f["threshold_percent"] == 5.0
    assert f["idle_since"] == "1970-01-01T00:16:50+00:00" and f["reclaim_at"] == "1970-01-01T00:17:50+00:00"


def test_reclaim_comes_grace_seconds_after_the_warning_and_never_without_one():
    snaps = samples(*[0] * 10)  # idle from 1000 to 1090
    assert idle.decide(snaps, DEVS, now=1090.0, **KW).state == idle.WARN  # not warned yet: warn first
    v = idle.decide(snaps, DEVS, now=1090.0, warned_at=1075.0, **KW)
    assert v.state == idle.WARN and v.reclaim_at == 1095.0
    v = idle.decide(samples(*[0] * 11), DEVS, now=1100.0, warned_at=1075.0, **KW)
    assert v.state == idle.RECLAIM and v.figures["mean_utilization"] == 0.0


def test_one_busy_device_or_sample_keeps_the_workspace():
    assert idle.decide(samples(*[(0, 80)] * 10), DEVS, now=1090.0, **KW).state == idle.OK
    assert idle.decide(samples(*[0] * 9, 5.0), DEVS, now=1090.0, **KW).state == idle.OK  # at the threshold: busy
    # busy a moment ago: the clock starts after it
    assert idle.decide(samples(*[0] * 6, 90, 0, 0, 0), DEVS, now=1090.0, **KW).state == idle.OK
    # the threshold is the operator's
    assert idle.decide(samples(*[40] * 10, threshold=50.0), DEVS, now=1090.0, **KW).state == idle.WARN


def test_unmeasured_or_missing_readings_never_count_as_idle():
    assert idle.decide(samples(*[None] * 10), DEVS, now=1090.0, **KW).state == idle.OK
    assert idle.decide(samples(*[(0, None)] * 10), DEVS, now=1090.0, **KW).state == idle.OK
    # an unmeasured sample breaks the run like a busy one
    assert idle.decide(samples(*[0] * 7, None, 0, 0), DEVS, now=1090.0, **KW).state == idle.OK
    # a device that the samples do not have at all
    assert idle.decide(samples(*[0] * 10), [("n2", "gpu", 0)], now=1090.0, **KW).state == idle.OK
    assert idle.decide(samples(), DEVS, now=1090.0, **KW).state == idle.OK


def test_a_renewal_restarts_the_clock_and_a_warning_before_it_does_not_count():
    snaps = samples(*[0] * 10)
    assert idle.decide(snaps, DEVS, now=1090.0, renewed_at=1070.0, **KW).state == idle.OK
    v = idle.decide(samples(*[0] * 12), DEVS, now=1110.0, renewed_at=1070.0, warned_at=1060.0, **KW)
    # idle again for 40 s since the renewal: warned afresh (the old warning was before it), not reclaimed
    assert v.state == idle.WARN and v.since == 1070.0 and v.reclaim_at == 1130.0
    assert v.figures["samples"] == 5  # those since the renewal


def test_the_clock_starts_no_earlier_than_the_workspace():
    snaps = samples(*[0] * 10)  # the devices were idle before this workspace got them
    assert idle.decide(snaps, DEVS, now=1090.0, started_at=1080.0, **KW).state == idle.OK
    assert idle.decide(snaps, DEVS, now=1090.0, started_at=1050.0, **KW).state == idle.WARN


def test_off_without_idle_time_or_devices():
    snaps = samples(*[0] * 10)
    assert idle.decide(snaps, DEVS, now=1090.0, **{**KW, "idle_time": 0}).state == idle.OK
    assert idle.decide(snaps, [], now=1090.0, **KW).state == idle.OK


def test_runs_keep_a_bounded_window_and_ignore_a_snapshot_seen_twice():
    runs = samples(*[0] * 100, keep=95.0)  # 1000 .. 1990
    ats, us = runs.runs[("n1", "gpu", 0)]
    assert ats[0] >= 1990 - 95 and len(ats) == len(us) == 10
    v = idle.decide(runs, DEVS, now=1990.0, warned_at=1960.0, **KW)  # a long idle spell: reclaimed all the same
    assert v.state == idle.RECLAIM and v.since == 1900.0
    runs.add(Snapshot(1990.0, (), ()))  # the same sample again: nothing changes
    assert len(runs.runs) == 2
    runs.add(Snapshot(2000.0, (), ()))  # the devices missing from a sample: their runs end
    assert runs.runs == {}


def test_exemptions_by_user_or_group():
    assert idle.exempt("ann", [], {"ann"}, set())
    assert idle.exempt("bob", ["staff", "ml"], set(), {"ml"})
    assert not idle.exempt("bob", ["staff"], {"ann"}, {"ml"})


def test_placement_devices():
    placement = {"instances": [{"node": "n1", "devices": [0, 2], "cpu": 1, "memory_mib": 1},
                               {"node": "n2", "devices": [], "cpu": 1, "memory_mib": 1}]}
    assert idle.placement_devices(placement, "gpu") == [("n1", "gpu", 0), ("n1", "gpu", 2)]
    assert idle.placement_devices(None, "gpu") == []


# -- CPU (issue 31): a workspace is idle when its devices, if any, are idle and so is its CPU ---------------------
def cpu_samples(*percents, cpus: float = 2.0, start: float = 1000.0, every: float = 10.0, threshold: float = 5.0,
                job: int = 7) -> idle.CpuRuns:
    """The CPU runs after a first sample and one per entry: the percent of ``cpus`` used since the one before
    (None: the workspace not measured in that sample)."""
    runs, used = idle.CpuRuns(threshold, 3600.0), 0.0
    runs.add(start, {job: (used, cpus)})
    for k, p in enumerate(percents, 1):
        if p is not None:
            used += p / 100 * cpus * every
        runs.add(start + k * every, {} if p is None else {job: (used, cpus)})
    return runs


def test_a_workspace_without_devices_is_judged_by_its_cpu():
    cpu = cpu_samples(50, 1, 2, 0, 3, 1, 0, 2)  # busy from 1000 to 1010, idle from then (the sample at 1010) on
    assert idle.decide(None, [], now=1030.0, cpu=cpu, job=7, cpus=2.0, **KW).state == idle.OK  # 20 s: not yet
    v = idle.decide(None, [], now=1080.0, cpu=cpu, job=7, cpus=2.0, **KW)
    assert (v.state, v.since, v.reclaim_at) == (idle.WARN, 1010.0, 1100.0)
    assert v.figures["cpus"] == 2.0 and v.figures["cpu_threshold_percent"] == 5.0
    assert v.figures["mean_cpu_percent"] == 1.29 and v.figures["max_cpu_percent"] == 3.0
    assert "devices" not in v.figures and v.figures["idle_seconds"] == 70.0
    assert idle.summary(v.figures) == ("its CPU was idle (mean 1.29 % of 2 CPU, below 5.0 % since "
                                       "1970-01-01T00:16:50+00:00)")
    assert idle.decide(None, [], now=1101.0, cpu=cpu, job=7, warned_at=1080.0, **KW).state == idle.RECLAIM
    assert idle.decide(None, [], now=1080.0, cpu=cpu, job=8, **KW).state == idle.OK  # another: not measured
    assert idle.decide(None, [], now=1080.0, cpu=cpu_samples(*[0] * 7, 6), job=7, **KW).state == idle.OK  # busy
    assert idle.decide(None, [], now=1080.0, cpu=cpu_samples(*[0] * 7, 5), job=7, **KW).state == idle.OK  # at it
    # a sample without it (at 1040) ends its run: it counts again from the next sample (1050), the first with a
    # figure being the one after
    gap = cpu_samples(0, 0, 0, None, 0, 0, 0, 0)
    assert idle.decide(None, [], now=1070.0, cpu=gap, job=7, **KW).state == idle.OK
    assert idle.decide(None, [], now=1080.0, cpu=gap, job=7, **KW).since == 1050.0
    assert idle.decide(None, [], now=1080.0, cpu=cpu_samples(*[0] * 8, threshold=0.0), job=7, **KW).state == idle.OK


def test_devices_and_cpu_must_both_be_idle_and_unmeasured_cpu_leaves_the_devices_to_judge():
    gpus = samples(*[0] * 10)  # devices idle from 1000
    cpu = cpu_samples(*[1] * 9)
    v = idle.decide(gpus, DEVS, now=1090.0, cpu=cpu, job=7, cpus=2.0, **KW)
    assert v.state == idle.WARN and v.figures["devices"] == ["n1/gpu/0", "n1/gpu/1"]
    assert (v.figures["mean_utilization"], v.figures["mean_cpu_percent"]) == (0.0, 1.0)
    assert idle.summary(v.figures).startswith("its devices were idle (mean 0.0 %, below 5.0 %) and its CPU was idle")
    # the CPU busy: not idle, whatever the devices say; nor when the devices are busy and the CPU is idle
    assert idle.decide(gpus, DEVS, now=1090.0, cpu=cpu_samples(*[1] * 8, 40), job=7, **KW).state == idle.OK
    assert idle.decide(samples(*[0] * 9, 80), DEVS, now=1090.0, cpu=cpu, job=7, **KW).state == idle.OK
    # the idle clock starts when both are idle: the CPU idle since 1050 only
    v = idle.decide(gpus, DEVS, now=1090.0, cpu=cpu_samples(*[50] * 5, *[0] * 4), job=7, **KW)
    assert (v.state, v.since) == (idle.WARN, 1050.0)
    # a backend that cannot tell CPU use: the devices alone judge, and a workspace without devices is not judged
    blind = idle.CpuRuns(5.0, 3600.0)
    blind.add(1000.0, None)
    assert not blind.measured
    assert idle.decide(gpus, DEVS, now=1090.0, cpu=blind, job=7, **KW).state == idle.WARN
    assert idle.decide(gpus, [], now=1090.0, cpu=blind, job=7, **KW).state == idle.OK
