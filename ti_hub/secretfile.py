"""Secrets kept in 0600 files of the data directory, made on first use, the same across restarts."""

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
