"""JOB2: the pure on_overrun decision (ti_hub/scheduler/overrun.py)."""

from ti_hub.scheduler import overrun as o


def test_nothing_before_the_declared_duration_or_without_one():
    assert o.decide(1000.0, 60, "stop", 1059.9, False) is None
    assert o.decide(1000.0, None, "stop", 99999.0, False) is None
    assert o.decide(None, 60, "alert", 99999.0, False) is None


def test_stop_past_the_declared_duration_says_why():
    action, why = o.decide(1000.0, 60, "stop", 1075.0, False)
    assert action == o.STOP and why == "ran past its declared duration (60 s declared, stopped after 75 s)"


def test_alert_once_per_run():
    action, why = o.decide(1000.0, 60, "alert", 1060.0, False)
    assert action == o.ALERT and "60 s declared, running for 60 s" in why and "keeps running" in why
    assert o.decide(1000.0, 60, "alert", 5000.0, True) is None


def test_the_rule_job_overrun_sets_when_the_alert_comes_and_whether():
    # threshold 30 s past the declared 60 s: nothing at 80 s, the alert at 90 s
    assert o.decide(1000.0, 60, "alert", 1080.0, False, 30.0) is None
    assert o.decide(1000.0, 60, "alert", 1090.0, False, 30.0)[0] == o.ALERT
    # disabled (None): never an alert; a stop is the user's choice and still comes at the declared duration
    assert o.decide(1000.0, 60, "alert", 99999.0, False, None) is None
    assert o.decide(1000.0, 60, "stop", 1060.0, False, None)[0] == o.STOP
    assert o.decide(1000.0, 60, "stop", 1060.0, False, 3600.0)[0] == o.STOP
