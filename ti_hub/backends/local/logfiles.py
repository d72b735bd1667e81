"""Reading instance logs: byte offsets in, text out, never a split UTF-8 character. Blocking helpers;
the backend calls them in a thread."""

from __future__ import annotations

import os


def _complete_utf8(data: bytes) -> bytes:
    """Drop a multi-byte character cut at the end of ``data``; the next read starts with it."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # continuation byte: keep looking for the lead byte
            continue
        if byte & 0x80 == 0:  # ASCII: nothing is cut
            return data
        need = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4 if byte & 0xF8 == 0xF0 else 1
        return data if back >= need else data[:-back]
    return data


def read_from(path: str, offset: int, limit: int) -> tuple[str, int]:
    """Text from byte ``offset`` (at most ``limit`` bytes) and the offset to continue from."""
    offset = max(0, int(offset))
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(max(0, int(limit)))
    except FileNotFoundError:
        return "", offset
    if len(data) == limit:
        data = _complete_utf8(data) or data
    return data.decode("utf-8", errors="replace"), offset + len(data)


def read_tail(path: str, n: int = 2000, block: int = 1 << 16) -> tuple[str, int]:
    """The last ``n`` lines and the end offset (to follow the log with ``read_from``)."""
    try:
        with open(path, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            pos, data = end, b""
            # a trailing newline ends the last line; it does not start another
            while pos > 0 and data.count(b"\n") <= n:
                step = min(block, pos)
                pos -= step
                f.seek(pos)
                data = f.read(step) + data
    except FileNotFoundError:
        return "", 0
    lines = data.split(b"\n")
    trailing = lines[-1] == b""
    if trailing:
        lines = lines[:-1]
    if pos > 0 or len(lines) > n:
        lines = lines[-n:] if n > 0 else []
    text = b"\n".join(lines) + (b"\n" if trailing and lines else b"")
    return text.decode("utf-8", errors="replace"), end
