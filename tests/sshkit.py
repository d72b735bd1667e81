"""SSH test helpers shared by the embedded (tests/e2e/test_ssh.py) and Kubernetes (tests/k8s/test_ssh_kube.py)
gateway tests."""

from __future__ import annotations

import asyncio
from pathlib import Path


async def pty_session(port: int, login: str, key: Path, first: str, until: str, resize: tuple[int, int],
                      then: str, term_size: tuple[int, int] = (120, 40), then_until: str | None = None,
                      last: str = "") -> str:
    """An interactive shell on a PTY: type ``first``, read until ``until`` shows, resize the terminal to
    ``resize`` (columns, rows), type ``then`` (which should exit, or else: read until ``then_until`` shows and type
    ``last``, which should); the whole output and ``status=N``."""
    import asyncssh

    async with asyncssh.connect("127.0.0.1", port, username=login, client_keys=[asyncssh.read_private_key(str(key))],
                                known_hosts=None, agent_path=None) as conn:
        p = await conn.create_process(term_type="xterm-256color", term_size=term_size)
        p.stdin.write(first)

        async def read_until(text: str, seen: str) -> str:
            while text not in seen:
                try:
                    chunk = await asyncio.wait_for(p.stdout.read(1024), 20)
                except TimeoutError:
                    raise AssertionError(f"{text!r} did not show in 20 s: {seen!r}") from None
                if not chunk:  # the session ended first: an empty read repeats forever, so say what it showed
                    raise AssertionError(f"the session ended before showing {text!r}: {seen!r}")
                seen += chunk
            return seen

        seen = await read_until(until, "")
        p.change_terminal_size(*resize)
        await asyncio.sleep(0.3)  # the size reaches the terminal before the next command reads it
        p.stdin.write(then)
        if then_until is not None:
            seen = await read_until(then_until, seen)
            p.stdin.write(last)
        seen += await asyncio.wait_for(p.stdout.read(), 20)
        await asyncio.wait_for(p.wait_closed(), 20)
        return seen + f"\nstatus={p.exit_status}"
