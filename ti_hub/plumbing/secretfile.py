"""Secrets kept in 0600 files of the data directory, made on first use, the same across restarts; and files
replaced whole (``replace``): a reader sees the old content or the new, never half of it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def read_or_create(path: str | os.PathLike, make: Callable[[], bytes]) -> bytes:
    """Several processes may ask at once: the file appears whole or not at all (written aside, then linked)."""
    path = Path(path)
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "wb") as f:  # mkstemp makes it 0600
                f.write(make())
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass  # another process published first: use theirs
        finally:
            os.unlink(tmp)
    return path.read_bytes().strip()


def replace(path: str | os.PathLike, data: bytes, mode: int = 0o600, *, sync: bool = False) -> None:
    """Write ``data`` to ``path`` atomically: a file beside it (``mode`` from the start), then renamed over it.
    ``sync``: flushed to disk before the rename, for a file that must survive a machine crash."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # created 0600
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
