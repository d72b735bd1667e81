"""Pure: does an offered public key match one the user registered (ACC6)?

Keys are compared by their wire blob (which names the key type), never by comment or text formatting; an
entry that does not parse is skipped, never matched.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class RegisteredKey:
    name: str
    key_type: str
    blob: bytes


def parse_line(line: str) -> tuple[str, bytes] | None:
    """(type, blob) of an OpenSSH public key line ``type base64 [comment]``; None when it is not one."""
    parts = (line or "").strip().split(None, 2)
    if len(parts) < 2:
        return None
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(blob) < 4:
        return None
    n = int.from_bytes(blob[:4], "big")
    if blob[4:4 + n] != parts[0].encode():
        return None
    return parts[0], blob


def registered(entries: Iterable[dict]) -> list[RegisteredKey]:
    """The ti service's key documents (``name``, ``key``) that parse."""
    out = []
    for e in entries:
        parsed = parse_line(e.get("key", ""))
        if parsed:
            out.append(RegisteredKey(str(e.get("name", "")), parsed[0], parsed[1]))
    return out


def find_match(keys: Iterable[RegisteredKey], offered_blob: bytes) -> RegisteredKey | None:
    for k in keys:
        if hmac.compare_digest(k.blob, offered_blob):
            return k
    return None


def fingerprint(blob: bytes) -> str:
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
