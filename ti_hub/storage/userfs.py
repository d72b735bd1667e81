"""Reading and copying users' files without the platform's privileges (the I/O shell around ``fsworker.py``).

The platform opens a volume's directory itself (its parents are the platform's alone, so that open is safe;
the directory itself is opened with ``O_NOFOLLOW``) and passes the descriptor to ``fsworker.py``, which runs
as the uid given here and walks from it without following any link. ``As`` names who that is: the user's
uid when the platform is root, None to keep the platform's own (an unprivileged platform cannot switch; its
workers then only rely on the no-follow walk).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..backends.local.userdirs import open_dir
from ..domain.errors import Conflict, NotFound, ValidationError

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fsworker.py")


@dataclass(frozen=True)
class As:
    uid: int
    gid: int


class WorkerFailed(RuntimeError):
    """The worker crashed or answered nothing: for the admin's log, not the user's eyes."""


def _argv(op: str, fds: Sequence[int], args: Sequence[str], who: As | None) -> list[str]:
    # the worker switches itself (the interpreter may live where only root can reach): -1 keeps this uid
    uid, gid = (who.uid, who.gid) if who is not None and os.geteuid() == 0 else (-1, -1)
    return [sys.executable, "-I", "-S", WORKER, str(uid), str(gid), op, *(str(f) for f in fds), *args]


def run(op: str, fds: Sequence[int], args: Sequence[str], who: As | None, timeout: float = 120.0) -> dict[str, Any]:
    """Blocking: one worker operation; its last answer. A refusal comes back as ``{"error": ...}``."""
    r = subprocess.run(_argv(op, fds, args, who), pass_fds=tuple(fds), env={}, cwd="/",
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    lines = r.stdout.decode("utf-8", "replace").splitlines()
    if r.returncode != 0 or not lines:
        raise WorkerFailed(f"fsworker {op} exited {r.returncode}: {r.stderr.decode('utf-8', 'replace')[-500:]}")
    return json.loads(lines[-1])


def _run_on(path: str, op: str, args: Sequence[str], who: As | None, timeout: float = 120.0) -> dict[str, Any]:
    """``run`` on the directory at ``path``, opened here (its parents are the platform's alone)."""
    fd = open_dir(path)
    try:
        return run(op, [fd], args, who, timeout)
    finally:
        os.close(fd)


def usage(path: str, who: As | None, max_files: int) -> int | None:
    """Bytes below the directory at ``path`` as ``who`` sees them; None when it is gone."""
    try:
        answer = _run_on(path, "usage", [str(max_files)], who, timeout=3600)
    except FileNotFoundError:
        return None
    return None if "error" in answer else int(answer["bytes"])


def browse(path: str, rel: str, limit: int, who: As | None) -> dict[str, Any]:
    return _run_on(path, "browse", [rel, str(limit)], who)


def make_exclusive(path: str, who: As | None, mode: int = 0o700) -> None:
    """A fresh directory at ``path`` for ``who``: whatever a failed earlier attempt left there (the parent is the
    platform's alone) is removed first, never adopted. ``shutil.rmtree`` walks by descriptor and never follows a
    link (``rmtree.avoids_symlink_attacks``)."""
    if os.path.lexists(path):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    os.mkdir(path, mode)  # exclusive: raises if anything got there meanwhile
    fd = open_dir(path)
    try:
        if who is not None and os.geteuid() == 0:
            os.fchown(fd, who.uid, who.gid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def finish_dir(path: str, mode: int = 0o755) -> None:
    """A finished snapshot: readable by everyone it is shared with (only where TiHub binds it)."""
    fd = open_dir(path)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


async def copy(src: str, dst: str, who: As | None) -> AsyncIterator[dict[str, Any]]:
    """Copy the tree at ``src`` into the empty directory ``dst`` as ``who``, yielding the worker's answers
    (``{"total"}``, ``{"done"}``..., then ``{"ok"}`` or ``{"error"}``). Raises ``WorkerFailed`` on a crash."""
    src_fd, dst_fd = open_dir(src), open_dir(dst)
    try:
        proc = await asyncio.create_subprocess_exec(
            *_argv("copy", [src_fd, dst_fd], [], who), pass_fds=(src_fd, dst_fd), env={}, cwd="/",
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    finally:
        os.close(src_fd)
        os.close(dst_fd)
    final = None
    try:
        assert proc.stdout is not None
        async for line in proc.stdout:
            answer = json.loads(line)
            if "ok" in answer or "error" in answer:
                final = answer
            yield answer
        err = await proc.stderr.read() if proc.stderr is not None else b""
        rc = await proc.wait()
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    if rc != 0 or final is None:
        raise WorkerFailed(f"fsworker copy exited {rc}: {err.decode('utf-8', 'replace')[-500:]}")


def refuse_on_error(answer: dict[str, Any], field: str = "path") -> dict[str, Any]:
    """A worker's refusal as the API's error: 404 for a path that is not there, 400 for one that may not be
    asked for, 409 for one the user cannot open."""
    if "error" in answer:
        cls = {"missing": NotFound, "invalid": ValidationError}.get(answer.get("code", ""), Conflict)
        raise cls(str(answer["error"]), field=field)
    return answer
