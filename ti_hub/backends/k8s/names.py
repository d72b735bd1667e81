"""Every Kubernetes name TiHub makes comes from ``safe_name``: DNS-1123, bounded, collision-free.

Joining slugs with '-' alone would collide (``alice-prod`` + ``x`` and ``alice`` + ``prod-x`` give the same
text), and lower-casing or dropping characters would too (``Bob`` and ``bob``). So each name ends with a
short hash of the exact parts it was made from: readable at the front, unique at the end.
"""

from __future__ import annotations

import base64
import hashlib
import re

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
HASH_LEN = 8  # base32 characters: 40 bits


def _slug(part: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", part.lower()).strip("-")
    return s


def _digest(parts: tuple[str, ...]) -> str:
    # NUL cannot occur in any part we are given (names are validated text), so the join is unambiguous
    h = hashlib.sha256("\x00".join(parts).encode()).digest()
    return base64.b32encode(h).decode().lower()[:HASH_LEN]


def safe_name(*parts: str | int, max_len: int = 63) -> str:
    """A DNS-1123 label (``[a-z0-9-]``, at most ``max_len``) unique to the exact sequence of ``parts``.

    ``max_len`` below 63 leaves room for suffixes Kubernetes adds (an Indexed Job's ``-<index>`` host).
    """
    if not parts:
        raise ValueError("safe_name needs at least one part")
    if not 16 <= max_len <= 63:
        raise ValueError("max_len must be between 16 and 63")
    raw = tuple(str(p) for p in parts)
    if any("\x00" in p for p in raw):
        raise ValueError("a name part may not contain NUL")
    stem = "-".join(s for s in (_slug(p) for p in raw) if s) or "x"
    room = max_len - HASH_LEN - 1
    stem = stem[:room].rstrip("-") or "x"
    if not stem[0].isalnum():
        stem = "x" + stem[1:]
    name = f"{stem}-{_digest(raw)}"
    assert DNS1123_LABEL.match(name) and len(name) <= max_len, name
    return name


def label_value(text: str) -> str:
    """A label value for user-given text: always its safe name, so no two texts share one.

    (Passing valid texts through unchanged would let a user named like another's hashed name collide.)
    Labels select; annotations carry the readable original.
    """
    return safe_name(text)
