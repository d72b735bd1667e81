"""One SSH session channel (a shell, a command or sftp) bridged to a process in the workspace.

The target is resolved when the session starts, so a session opened on a long-lived connection reaches the
workspace as it is now (restarted, or stopped: then the user reads why and how to start it, exit status 1).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

import asyncssh

from .logins import Login, TargetError
from .proc import HANGUP_GRACE, SessionProcess

log = logging.getLogger("ti_hub.ssh")
INPUT_HIGH, INPUT_LOW = 1 << 20, 1 << 18  # bytes of input waiting for the process: stop, then go on reading


class TargetResolver(Protocol):
    async def resolve(self, login: Login) -> Any: ...


class SessionHost(Protocol):
    """What a session needs of the connection it runs on (ssh/server.GatewayConnection, which makes sessions):
    declared here so that this module does not import the server back."""

    @property
    def gw(self) -> TargetResolver: ...  # the gateway: the login's target, as it is now

    @property
    def conn(self) -> asyncssh.SSHServerConnection | None: ...

    @property
    def peer(self) -> tuple[str, int]: ...

    @property
    def local(self) -> tuple[str, int]: ...

    @property
    def login(self) -> Login: ...

    def session_closed(self) -> None: ...


class GatewaySession(asyncssh.SSHServerSession):
    def __init__(self, conn: SessionHost):
        self.conn = conn
        self.chan: asyncssh.SSHServerChannel | None = None
        self.term: str | None = None
        self.size: tuple[int, int, int, int] | None = None
        self.command: str | None = None
        self.subsystem: str | None = None
        self.proc: SessionProcess | None = None
        self.task: asyncio.Task | None = None
        self._pending: list[bytes] = []
        self._pending_eof = False
        self._closed = False

    def connection_made(self, chan: asyncssh.SSHServerChannel) -> None:
        self.chan = chan

    def pty_requested(self, term_type: str, term_size: tuple[int, int, int, int], term_modes) -> bool:
        self.term, self.size = term_type or "xterm", term_size
        return True

    def shell_requested(self) -> bool:
        return True

    def exec_requested(self, command: str) -> bool:
        self.command = command if isinstance(command, str) else command.decode(errors="replace")
        return True

    def subsystem_requested(self, subsystem: str) -> bool:
        if subsystem != "sftp":
            return False
        self.subsystem = subsystem
        return True

    def session_started(self) -> None:
        self.task = asyncio.ensure_future(self._run())

    async def _start(self) -> SessionProcess:
        target = await self.conn.gw.resolve(self.conn.login)
        pty = (self.size[0] or 80, self.size[1] or 24) if self.size else None
        version = self.conn.conn.get_extra_info("client_version", "") if self.conn.conn else ""
        return await target.start(command=self.command, subsystem=self.subsystem, pty=pty, term=self.term,
                                  client=self.conn.peer, server=self.conn.local, login=self.conn.login.label,
                                  client_version=version or "")

    async def _run(self) -> None:
        assert self.chan is not None
        nl = "\r\n" if self.size else "\n"
        try:
            proc = await self._start()
        except TargetError as e:
            log.info("ssh session refused: %s from %s:%s: %s", self.conn.login.label, *self.conn.peer, e.message)
            self._finish_with_message(f"ti-ssh: {e.message}{nl}", 1)
            return
        except Exception:
            log.exception("ssh: could not start a session for %s", self.conn.login.label)
            self._finish_with_message(f"ti-ssh: the session could not be started; the administrators can find "
                                      f"why in the gateway's log{nl}", 255)
            return
        self.proc = proc
        if self._closed:  # the client left while the process started
            proc.hangup()
            await proc.wait()
            return
        proc.on_output = self._output
        for data in self._pending:
            proc.write(data)
        self._pending.clear()
        if self._pending_eof:
            proc.write_eof()
        log.info("ssh session: %s from %s:%s, %s", self.conn.login.label, *self.conn.peer,
                 "sftp" if self.subsystem else ("command" if self.command is not None else "shell"))
        code, sig = await proc.wait()
        if self._closed:
            return
        if sig:
            self.chan.exit_with_signal(sig)
        else:
            self.chan.exit(code if code is not None else 255)

    def _finish_with_message(self, message: str, status: int) -> None:
        if self.chan is not None and not self._closed:
            self.chan.write_stderr(message.encode())
            self.chan.exit(status)

    def _output(self, data: bytes, stderr: bool) -> None:
        if self._closed or self.chan is None:
            return
        if stderr:
            self.chan.write_stderr(data)
        else:
            self.chan.write(data)

    def data_received(self, data: bytes, datatype) -> None:
        if self.proc is None:
            self._pending.append(data)
            return
        self.proc.write(data)
        if self.proc.input_buffered() > INPUT_HIGH and self.chan is not None:
            self.chan.pause_reading()
            asyncio.ensure_future(self._resume_when_drained())

    async def _resume_when_drained(self) -> None:
        while self.proc is not None and not self._closed and self.proc.input_buffered() > INPUT_LOW:
            await asyncio.sleep(0.02)
        if self.chan is not None and not self._closed:
            self.chan.resume_reading()

    def eof_received(self) -> bool:
        if self.proc is None:
            self._pending_eof = True
        else:
            self.proc.write_eof()
        return True  # keep sending output until the process ends

    def terminal_size_changed(self, width: int, height: int, pixwidth: int, pixheight: int) -> None:
        self.size = (width, height, pixwidth, pixheight)
        if self.proc is not None:
            self.proc.resize(width, height, pixwidth, pixheight)

    def signal_received(self, signal: str) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal)

    def break_received(self, msec: int) -> bool:
        if self.proc is not None:
            self.proc.send_signal("INT")
        return True

    def pause_writing(self) -> None:
        if self.proc is not None:
            self.proc.pause_output()

    def resume_writing(self) -> None:
        if self.proc is not None:
            self.proc.resume_output()

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self.conn.session_closed()
        if self.proc is not None:
            self.proc.hangup()
        if self.task is not None and not self.task.done():
            # a process that is gone may have left its output pipes to a daemon: stop waiting for them
            asyncio.get_running_loop().call_later(HANGUP_GRACE + 2 if self.proc else 0, self.task.cancel)
