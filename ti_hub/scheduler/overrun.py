"""JOB2: a running job past its declared duration (``estimated_duration``) raises an alert, once per run, or is
stopped, as its ``on_overrun`` says. The alert follows the built-in rule job-overrun (ops/jobrules.py): only while
it is enabled, ``threshold`` seconds past the declared duration; a stop is the user's choice and ignores the rule.
Pure: ``now`` is passed in (epoch seconds)."""

from __future__ import annotations

ALERT, STOP = "alert", "stop"
STOP_REASON = "ran past its declared duration"


def past(started: float | None, declared_s: int | None, now: float) -> bool:
    """Whether a run that started at ``started`` has outlived its declared duration (none declared: never)."""
    return started is not None and bool(declared_s) and now >= started + declared_s


def decide(started: float | None, declared_s: int | None, on_overrun: str, now: float,
           alerted: bool, alert_after: float | None = 0.0) -> tuple[str, str] | None:
    """What to do now, with the message for the history: (STOP, reason), (ALERT, message) or None.
    ``alert_after``: seconds past the declared duration before the alert (job-overrun's threshold); None: the
    rule is disabled, no alert."""
    if not past(started, declared_s, now):
        return None
    ran = int(now - started)  # type: ignore[operator]  # past() saw it set
    if on_overrun == STOP:
        return STOP, f"{STOP_REASON} ({declared_s} s declared, stopped after {ran} s)"
    if alerted or alert_after is None or now < started + declared_s + alert_after:  # type: ignore[operator]
        return None
    return ALERT, (f"running longer than declared: {declared_s} s declared, running for {ran} s "
                   f"(on_overrun: alert, so it keeps running)")
