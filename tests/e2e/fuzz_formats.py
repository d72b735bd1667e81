"""Schemathesis hooks for tests/e2e/test_openapi_fuzz.py: values of the API document's own string formats, and
which of the coverage phase's cases each of the test's two runs sends (``filter_case`` below).

The document names two formats that no regular expression can say (api/schemas/account.py, people.py):
``ssh-public-key`` (the base64 data must hold a key of the type the line starts with) and ``ti-users-csv`` (a
user import file). Schemathesis knows neither, so without these it would send arbitrary text as schema-valid
values. Loaded by the schemathesis process (SCHEMATHESIS_HOOKS); generation stays deterministic.
"""

from __future__ import annotations

import base64
import os
import struct

import schemathesis
from hypothesis import strategies as st

from ti_hub.ops.keys import KEY_TYPES
from ti_hub.ops.people import USER_PATTERN

_COMMENT = st.text(st.characters(codec="utf-8", exclude_characters="\r\n\x00", exclude_categories=("Cs",)),
                   max_size=40)


@st.composite
def ssh_public_keys(draw) -> str:
    kind = draw(st.sampled_from(KEY_TYPES))
    blob = struct.pack(">I", len(kind)) + kind.encode() + draw(st.binary(min_size=16, max_size=64))
    comment = draw(_COMMENT)
    return f"{kind} {base64.b64encode(blob).decode()}" + (f" {comment}" if comment else "")


# a password of printable ASCII without the CSV's own characters (comma, quote) and without edge spaces
_PASSWORD = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters=',"'),
                    min_size=8, max_size=40)


@st.composite
def user_import_files(draw) -> str:
    names = draw(st.lists(st.from_regex(USER_PATTERN, fullmatch=True), min_size=1, max_size=2, unique=True))
    lines = ["name,password"] + [f"{n},{draw(_PASSWORD)}" for n in names]
    return "\n".join(lines) + "\n"


schemathesis.openapi.format("ssh-public-key", ssh_public_keys())
schemathesis.openapi.format("ti-users-csv", user_import_files())


# The coverage phase sends every case the document defines (schemathesis ignores --max-examples there): ~4,900
# per run, most of the test's time, and the same cases in both runs. Each case goes where its outcome is the
# caller's to decide (FUZZ_AS names the run):
# * both runs: what may depend on who asks -- a missing Authorization or required parameter, a wrong or
#   malformed Content-Type; methods a path does not declare (405 + Allow): every one in the user's run, the
#   first of each path in the admin's (the 405 comes before any permission check);
# * the admin's run: every valid value (positive_data_acceptance and the answers' schemas), since only an
#   admin reaches every operation past its permission check;
# * the user's run: invalid values (negative_data_rejection), one per operation, scenario and field (the kinds
#   of wrong type of one field are one rule: the first is sent). The document's validation runs before the
#   permission check, so a user's invalid input meets the same rules as an admin's; the few admin operations
#   that answer a user 403 first get invalid input from the admin's fuzzing phase.
BOTH = {"missing_parameter", "malformed_content_type", "unsupported_content_type"}
_SENT: set[tuple] = set()


@schemathesis.hook
def filter_case(context, case) -> bool:
    meta = case.meta
    data = getattr(getattr(meta, "phase", None), "data", None)
    scenario = str(getattr(data, "scenario", ""))
    if not scenario:  # examples and fuzzing phases: every case
        return True
    admin = os.environ.get("FUZZ_AS") == "admin"
    if scenario in BOTH:
        return True
    if scenario == "unspecified_http_method":
        return not admin or _first(("method", case.operation.path))
    positive = meta.generation.mode.value == "positive"
    if admin:
        return positive
    if positive:
        return False
    return _first((case.operation.label, scenario, str(data.parameter_location), data.parameter, data.description))


def _first(key: tuple) -> bool:
    """True the first time ``key`` is seen (one schemathesis process, one worker: the same cases every run)."""
    if key in _SENT:
        return False
    _SENT.add(key)
    return True
