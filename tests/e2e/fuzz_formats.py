"""Schemathesis hooks for tests/e2e/test_openapi_fuzz.py: values of the API document's own string formats.

The document names two formats that no regular expression can say (api/schemas/account.py, people.py):
``ssh-public-key`` (the base64 data must hold a key of the type the line starts with) and ``ti-users-csv`` (a
user import file). Schemathesis knows neither, so without these it would send arbitrary text as schema-valid
values. Loaded by the schemathesis process (SCHEMATHESIS_HOOKS); generation stays deterministic.
"""

from __future__ import annotations

import base64
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
