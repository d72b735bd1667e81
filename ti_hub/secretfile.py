"""Secrets kept in 0600 files of the data directory, made on first use, the same across restarts."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def read_or_create(path: str | os.PathLike, make: Callable[[], bytes]) -> bytes:
    path = Path(path)
    if not path.exists():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(make())
        except FileExistsError:
            pass  # another process made it first: use theirs
    return path.read_bytes().strip()
