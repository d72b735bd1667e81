"""Issue 31: the workspace name rule, the progress messages, the scrubbed log of a failed start, and progress
events for every listener (pure; the hub-side behaviour: tests/e2e/test_spawn_feedback.py)."""

from __future__ import annotations

import asyncio
import re

import pytest
from jupyterhub.slugs import is_valid_safe_slug

from ti_hub.domain.validation import NAME_RE
from ti_hub.spawner import messages, names
from ti_hub.spawner.mixin import TiSpawnerMixin

GOOD = ["desk", "dev-box", "default", "a1b2", "my-desk-2", "x" * 30]
BAD = ["dev_box", "ab", "abc", "Dev-Box", "box-", "-box", "a--b-c", "1box", "x" * 31, "desk\n", "dev box", "dés-k", ""]


@pytest.mark.parametrize("name", GOOD + BAD)
def test_the_rule_is_the_hubs_and_tihubs_together_and_the_pattern_says_the_same(name):
    both = is_valid_safe_slug(name) and bool(NAME_RE.match(name))
    assert (names.problem(name) is None) == both
    # the home page's check (a JavaScript regex; no \n or Unicode surprises in these names) agrees
    assert bool(re.fullmatch(names.PATTERN.strip("^$"), name)) == both or name.endswith("\n")


def test_a_refusal_names_the_name_and_the_rule():
    said = names.problem("dev_box")
    assert said == f"'dev_box' cannot name a workspace: workspace names are {names.RULE}."
    assert "4-30 characters" in names.RULE and "lowercase" in names.RULE


def test_progress_messages_read_as_sentences():
    assert messages.admitted("admitted: starting on vm") == "Admitted, starting on vm"
    assert messages.admitted("admitted: starting on vm (backfilled: x)") == "Admitted, starting on vm (backfilled: x)"
    ws = {"reason": "behind job 7 in queue default/cpu/workspace (2 jobs ahead): waiting for 1 x (1 CPU, 512 MiB)",
          "queue": {"queue": "default/cpu/workspace", "position": 3, "ahead": 2}}
    assert messages.queued(ws) == f"Waiting in the queue: 2 jobs ahead ({ws['reason']})"
    assert messages.queued({"reason": "waiting for 1 x cpu", "queue": {"position": 1}}) == \
        "Waiting in the queue: first in the queue (waiting for 1 x cpu)"
    assert messages.queued({"reason": "", "queue": {"position": 2}}) == "Waiting in the queue: 1 job ahead"
    assert messages.queued({"reason": "queued: scheduler not run yet"}) == \
        "Waiting in the queue (scheduler not run yet)"


def test_a_failed_starts_log_is_scrubbed_and_cut():
    env = {"JUPYTERHUB_API_TOKEN": "abcdef123456", "MY_PASSWORD": "hunter22", "HOME": "/home/al"}
    secrets = messages.secret_values(env)
    assert secrets == ["abcdef123456", "hunter22"]
    log = ("\n".join(f"line {i}" for i in range(40)) + "\nserving at http://x/lab?token=zzzzzzzz\n"
           "token abcdef123456 in use\npassword: hunter22\nAuthorization: Bearer qwertyuiop\n" + "y" * 500 + "\n")
    text, html = messages.start_failure("The workspace's server ended before Jupyter answered: exited with code 1",
                                        log, secrets)
    for secret in ("abcdef123456", "hunter22", "zzzzzzzz", "qwertyuiop"):
        assert secret not in text and secret not in html
    lines = text.splitlines()
    assert lines[0].endswith("exited with code 1. The last lines of its log:")
    assert len(lines) == 1 + messages.TAIL_LINES and lines[-1].endswith(" …") and len(lines[-1]) < 310
    assert "line 39" in text and "line 20" not in text
    assert html.startswith("<p>") and "<pre" in html
    assert messages.start_failure("It ended", "")[0] == "It ended. Its log is empty."


def test_every_listener_gets_every_progress_event_late_ones_too():
    async def scenario():
        sp = TiSpawnerMixin()
        sp._progress_init()
        got: dict[str, list[str]] = {"early": [], "late": []}

        async def listen(who: str):
            async for ev in sp.progress():
                got[who].append(ev["message"])

        early = asyncio.ensure_future(listen("early"))
        sp._emit(5, "one")
        await asyncio.sleep(0.01)
        sp._emit(40, "two")
        late = asyncio.ensure_future(listen("late"))
        await asyncio.sleep(0.01)
        sp._emit(90, "three")
        await asyncio.sleep(0.01)
        sp._progress_end()
        await asyncio.wait_for(asyncio.gather(early, late), 5)
        after: list[str] = []
        async for ev in sp.progress():  # a listener after the end gets them all, then the end
            after.append(ev["message"])
        return got, after

    got, after = asyncio.run(scenario())
    assert got == {"early": ["one", "two", "three"], "late": ["one", "two", "three"]}
    assert after == ["one", "two", "three"]
