"""Q3 usage scores: the update matches the closed form, catches up after a restart, rebuilds from scratch."""

from __future__ import annotations

import math
import random

import pytest

from ti_hub.scheduler.score import Scores, held_devices, rebuild, update

T = 3600.0


def closed_form(s0: float, g: float, t: float) -> float:
    return g + (s0 - g) * math.exp(-t / T)


def test_matches_the_closed_form_whatever_the_sampling():
    rnd = random.Random(3)
    s = Scores({("ann", "a100"): 5.0}, updated_at=0.0)
    t = 0.0
    for _ in range(500):  # g = 8 from t = 0, sampled at random intervals
        t += rnd.uniform(0.1, 300.0)
        s = update(s, {("ann", "a100"): 8.0}, t, T)
    assert abs(s.of("ann", "a100") - closed_form(5.0, 8.0, t)) < 1e-9


def test_step_response_fractions_from_the_spec():
    s = Scores({}, updated_at=0.0)
    fractions = []
    for k in (1, 2, 4):
        fractions.append(update(s, {("bo", "t4"): 1.0}, k * T, T).of("bo", "t4"))
    assert [round(1 - f, 2) for f in fractions] == [0.37, 0.14, 0.02]  # tracking error after T, 2T, 4T


def test_restart_catch_up_is_one_update_over_the_gap():
    held = {("cy", "a100"): 4.0}
    s = update(Scores({("cy", "a100"): 1.0}, 0.0), held, 60.0, T)
    many = s
    for k in range(1, 121):  # the service kept running: 2 hours of 1-minute steps
        many = update(many, held, 60.0 + 60.0 * k, T)
    caught_up = update(s, held, 60.0 + 7200.0, T)  # it was down: one step over the whole gap
    assert abs(many.of("cy", "a100") - caught_up.of("cy", "a100")) < 1e-9


def test_idle_users_decay_and_are_forgotten():
    s = update(Scores({("old", "a100"): 2.0}, 0.0), {}, T, T)
    assert abs(s.of("old", "a100") - 2.0 * math.exp(-1)) < 1e-12
    assert ("old", "a100") not in update(s, {}, 40 * T, T).values


def test_rebuild_sums_each_running_jobs_contribution():
    now = 10_000.0
    s = rebuild([("dee", "a100", 4, now - T), ("dee", "a100", 2, now - 2 * T), ("eve", "v100", 1, now)], now, T)
    expected = 4 * (1 - math.exp(-1)) + 2 * (1 - math.exp(-2))
    assert abs(s.of("dee", "a100") - expected) < 1e-12 and s.of("eve", "v100") == 0.0
    assert s.updated_at == now
    # and it is what a service that had watched since each start would hold now
    watched = Scores({}, now - 2 * T)
    watched = update(watched, {("dee", "a100"): 2.0}, now - T, T)
    watched = update(watched, {("dee", "a100"): 6.0}, now, T)
    assert abs(watched.of("dee", "a100") - expected) < 1e-9


def test_device_type_weights():
    g = held_devices([("fay", "a100", 2), ("fay", "t4", 4), ("fay", "a100", 1), ("gus", "cpu", 0)],
                     {"a100": 2.0, "t4": 0.5})
    assert g == {("fay", "a100"): 6.0, ("fay", "t4"): 2.0}
    s = rebuild([("fay", "a100", 1, 0.0)], T, T, weights={"a100": 2.0})
    assert abs(s.of("fay", "a100") - 2 * (1 - math.exp(-1))) < 1e-12


def test_first_update_starts_the_clock_and_bad_settling_time_is_refused():
    s = update(Scores({("h", "a"): 1.0}), {("h", "a"): 3.0}, 50.0, T)
    assert s.updated_at == 50.0 and s.of("h", "a") == 1.0
    with pytest.raises(ValueError):
        update(s, {}, 60.0, 0.0)
