"""SSH test helpers shared by the embedded (tests/e2e/test_ssh.py) and Kubernetes (tests/k8s/test_ssh_kube.py)
gateway tests."""

from __future__ import annotations

import asyncio
from pathlib import Path


async def pty_session(port: int, login: str, key: Path, first: str, until: str, resize: tuple[int, int],
                      then: str, term_size: tuple[int, int] = (120, 40)) -> str:
    """An interactive shell on a PTY: type ``first``, read until ``until`` shows, resize the terminal to
    ``resize`` (columns, rows), type ``then`` (which should exit); the whole output and ``status=N``."""
    import asyncssh

    async with asyncssh.connect("127.0.0.1", port, username=login, client_keys=[asyncssh.read_private_key(str(key))],
                                known_hosts=None, agent_path=None) as conn:
        p = await conn.create_process(term_type="xterm-256color", term_size=term_size)
        p.stdin.write(first)
        seen = ""
        while until not in seen:
            chunk = await asyncio.wait_for(p.stdout.read(1024), 20)
            if not chunk:  # the session ended first: an empty read repeats forever, so say what it showed instead
                raise AssertionError(f"the session ended before showing {until!r}: {seen!r}")
            seen += chunk
        p.change_terminal_size(*resize)
        await asyncio.sleep(0.3)  # the size reaches the terminal before the next command reads it
        p.stdin.write(then)
        seen += await asyncio.wait_for(p.stdout.read(), 20)
        await asyncio.wait_for(p.wait_closed(), 20)
        return seen + f"\nstatus={p.exit_status}"
