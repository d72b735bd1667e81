"""JOB4: what a support request carries of a job's log (scrubbed, bounded) and how its notices read (pure)."""

from __future__ import annotations

from ti_hub.ops import notices, support


def test_the_tail_keeps_the_last_lines_with_every_secret_masked():
    log = "".join(f"line-{i}\n" for i in range(1, 101)) + "token=abc123 and abc123x, key=abc\n"
    out = support.scrub(log, ["abc", "abc123", ""])
    lines = out.splitlines()
    assert len(lines) == support.LOG_LINES and lines[0] == "line-52"
    # the longest value first: a secret that contains another is masked whole
    assert lines[-1] == "token=[secret] and [secret]x, key=[secret]"
    assert "abc" not in out


def test_long_lines_are_cut_after_masking():
    out = support.scrub("x" * 1000 + "SECRET", ["SECRET"])
    assert out.endswith(" [...]") and len(out) == support.MAX_LINE + len(" [...]")
    assert support.scrub("", ["s"]) == ""


ALERT = {"id": 3, "key": "job:9:support", "kind": "support", "rule": "support", "severity": "info",
         "subject": "Support request from ann about job 9 (train, failed)", "message": "Why?", "job_id": 9,
         "machine": "", "users": ["ann"], "figures": {"state": "failed", "log_tail": "a\nb"},
         "fired_at": "2024-01-01T00:00:00Z", "notices": 0, "answer": "", "answered_by": ""}


def test_a_request_notice_shows_the_log_tail_as_a_block_and_the_answer_when_answered():
    body = notices.body(ALERT, "https://hub.example.org", 3600)
    assert "  log_tail:\n    a\n    b\n" in body and "  state: failed" in body
    assert "until one of them answers" in body
    answered = {**ALERT, "answer": "Use more memory.", "answered_by": "admin", "notices": 2}
    assert notices.subject(answered, "[TiHub]").startswith("[TiHub] Answered: Support request")
    body = notices.body(answered, "https://hub.example.org", 3600)
    assert body.index("Answer from admin:\nUse more memory.") < body.index("Why?")
