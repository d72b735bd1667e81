"""The built-in rules about jobs and workspaces (ops/jobrules.py): what may change, what is fixed and why, the
bounds of their thresholds, and the leader's cache of their values."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from ti_hub.domain.errors import Conflict, ValidationError
from ti_hub.ops import alertrules, jobrules

FIELDS = alertrules.FIELDS


def rule(metric: str, **kw):
    base = {"id": 6, "name": jobrules.NAMES[metric], "metric": metric, "op": ">", "threshold": 60.0, "step": 60,
            "interval": 3600, "percent": 100.0, "severity": "warning", "enabled": True, "notify_owners": True,
            "cordon": False, "grace": 1800 if metric == jobrules.IDLE else None, "description": ""}
    return SimpleNamespace(**{**base, **kw})


def test_thresholds_enabled_severity_and_owners_change():
    out = jobrules.parse_change(rule(jobrules.WAIT), {"threshold": 120, "enabled": False, "severity": "critical",
                                                      "notify_owners": False}, FIELDS)
    assert out == {"threshold": 120.0, "enabled": False, "severity": "critical", "notify_owners": False}
    out = jobrules.parse_change(rule(jobrules.IDLE), {"threshold": 10, "interval": 600, "grace": 0}, FIELDS)
    assert out == {"threshold": 10.0, "interval": 600, "grace": 0}


@pytest.mark.parametrize("metric, data, field, words", [
    (jobrules.OVERRUN, {"op": "<"}, "op", "op of the built-in rule job-overrun cannot be changed"),
    (jobrules.WAIT, {"percent": 50}, "percent", "percent of the built-in rule job-wait cannot be changed"),
    (jobrules.IDLE, {"step": 5}, "step", "checked at every"),
    (jobrules.IDLE, {"cordon": True}, "cordon", "not machines"),
    (jobrules.WAIT, {"interval": 10}, "interval", "only workspace-idle's interval"),
    (jobrules.OVERRUN, {"grace": 10}, "grace", "only workspace-idle has a grace"),
    (jobrules.WAIT, {"name": "late"}, "name", "keep their names"),
    (jobrules.IDLE, {"metric": "cpu"}, "metric", "keeps its metric"),
])
def test_fixed_fields_are_refused_naming_the_field_the_rule_and_why(metric, data, field, words):
    # a 409: the same change is fine for another rule (the API document cannot tell which rule an id is)
    with pytest.raises(Conflict) as e:
        jobrules.parse_change(rule(metric), data, FIELDS)
    assert e.value.field == field and words in str(e.value)


def test_a_fixed_field_given_with_its_own_value_is_no_change():
    assert jobrules.parse_change(rule(jobrules.WAIT), {"op": ">", "percent": 100, "cordon": False}, FIELDS) == {}


@pytest.mark.parametrize("metric, value, words", [
    (jobrules.IDLE, 101, "threshold of the rule workspace-idle is a GPU utilization percent: between 0 and 100"),
    (jobrules.WAIT, -1, "threshold of the rule job-wait is seconds past the estimated start"),
    (jobrules.OVERRUN, 31 * 86400, "threshold of the rule job-overrun is seconds past the declared duration"),
])
def test_thresholds_are_bounded_per_rule(metric, value, words):
    with pytest.raises(Conflict) as e:  # the rule's metric bounds it, not the request: 409
        jobrules.parse_change(rule(metric), {"threshold": value}, FIELDS)
    assert e.value.field == "threshold" and words in str(e.value)


def test_unknown_fields_and_bad_values_are_refused():
    with pytest.raises(ValidationError) as e:
        jobrules.parse_change(rule(jobrules.IDLE), {"colour": 1}, FIELDS)
    assert e.value.field == "colour"
    with pytest.raises(ValidationError) as e:
        jobrules.parse_change(rule(jobrules.IDLE), {"interval": 0}, FIELDS)
    assert e.value.field == "interval"
    with pytest.raises(ValidationError) as e:
        jobrules.parse_change(rule(jobrules.IDLE), {"severity": "loud"}, FIELDS)
    assert e.value.field == "severity"


def test_built_in_metrics_are_not_created_again_and_machine_rules_take_no_grace():
    with pytest.raises(Conflict) as e:
        jobrules.refuse_create("job_wait")
    assert e.value.field == "metric" and "built in (job-wait)" in str(e.value)
    jobrules.refuse_create("cpu")  # a machine metric: fine
    with pytest.raises(ValidationError) as e:
        alertrules.parse({"name": "hot", "metric": "cpu", "op": ">", "threshold": 90, "grace": 5}, 3600)
    assert e.value.field == "grace"


def test_the_cache_rereads_after_its_ttl_or_an_invalidation():
    now = [0.0]
    reads = []

    async def read():
        reads.append(now[0])
        return {"n": len(reads)}

    cache = jobrules.RuleCache(5.0, clock=lambda: now[0])

    async def go():
        assert await cache.get(read) == {"n": 1}
        now[0] = 4.9
        assert await cache.get(read) == {"n": 1}
        now[0] = 5.0
        assert await cache.get(read) == {"n": 2}
        cache.invalidate()
        assert await cache.get(read) == {"n": 3}

    asyncio.run(go())
    assert reads == [0.0, 5.0, 5.0]
