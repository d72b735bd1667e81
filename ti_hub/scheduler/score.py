"""Q3 usage scores: per user and device type, an exponentially decayed average of the devices held.

    s <- a * s + (1 - a) * g,   a = exp(-dt / T)

g is what the user holds now (devices, times the device type's weight), dt the time since the last
update, T the settling time. After a step change in g the score is 63% of the way there after T, 86%
after 2T, 98% after 4T. The update is exact for any dt while g is constant, so a restarted service catches
up with one update over the whole gap, and the closed form s(t) = g + (s0 - g) * exp(-t / T) holds
whatever the sampling. Pure: the caller passes the clock's reading.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

Key = tuple[str, str]  # (user, device type)

DEFAULT_SETTLING_S = 6 * 3600.0  # a day's heavy use fades within ~a day (4T)
FORGET_BELOW = 1e-6  # scores under this (and holding nothing) are dropped: 1,000s of idle users stay cheap


@dataclass
class Scores:
    """The scores and the time they were last brought up to date (seconds, any epoch)."""

    values: dict[Key, float] = field(default_factory=dict)
    updated_at: float | None = None

    def of(self, user: str, device_type: str) -> float:
        return self.values.get((user, device_type), 0.0)


def held_devices(holdings: Iterable[tuple[str, str, int]], weights: Mapping[str, float] | None = None
                 ) -> dict[Key, float]:
    """g per (user, device type) from (user, device type, devices) of every running instance or job."""
    g: dict[Key, float] = {}
    for user, dtype, n in holdings:
        if n:
            w = weights.get(dtype, 1.0) if weights else 1.0
            g[(user, dtype)] = g.get((user, dtype), 0.0) + n * w
    return g


def at(score: float, held: float, age_s: float, settling_s: float = DEFAULT_SETTLING_S) -> float:
    """The closed form: a score ``age_s`` seconds later, holding ``held`` (weighted) all along."""
    return held + (score - held) * math.exp(-max(0.0, age_s) / settling_s)


def update(scores: Scores, held: Mapping[Key, float], now: float, settling_s: float = DEFAULT_SETTLING_S
           ) -> Scores:
    """One step over dt = now - updated_at with g = ``held`` (assumed constant over the step).

    The first call (updated_at None) only starts the clock: use ``rebuild`` for a fresh database."""
    if settling_s <= 0:
        raise ValueError("settling time must be positive")
    if scores.updated_at is None:
        return Scores(dict(scores.values), now)
    dt = max(0.0, now - scores.updated_at)
    a = math.exp(-dt / settling_s)
    b = 1.0 - a
    out: dict[Key, float] = {}
    for key, s in scores.values.items():
        v = a * s + b * held.get(key, 0.0)
        if v >= FORGET_BELOW or key in held:
            out[key] = v
    for key, g in held.items():
        if key not in out:
            out[key] = b * g
    return Scores(out, now)


def rebuild(running: Iterable[tuple[str, str, int, float]], now: float, settling_s: float = DEFAULT_SETTLING_S,
            weights: Mapping[str, float] | None = None) -> Scores:
    """First run: sum each running job's contribution as if scores were 0 before it started and it has held
    its devices since: d * (1 - exp(-(now - started) / T)). ``running``: (user, device type, devices, started)."""
    out: dict[Key, float] = {}
    for user, dtype, n, started in running:
        if not n:
            continue
        w = weights.get(dtype, 1.0) if weights else 1.0
        c = n * w * (1.0 - math.exp(-max(0.0, now - started) / settling_s))
        out[(user, dtype)] = out.get((user, dtype), 0.0) + c
    return Scores(out, now)
