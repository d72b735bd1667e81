"""``ssh -L``: one forwarded TCP connection, bridged to a port inside the workspace.

A PortStream (``local.LocalPortStream``, ``kube.KubePortStream``) has ``async read() -> bytes`` (b'' at the end),
``async write(data)``, ``write_eof()`` and ``async close()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import asyncssh

log = logging.getLogger("ti_hub.ssh")
QUEUE_HIGH, QUEUE_LOW = 32, 8  # chunks from the client waiting for the port: stop reading, then go on


class ForwardSession(asyncssh.SSHTCPSession):
    def __init__(self, stream: Any, what: str):
        self.stream, self.what = stream, what
        self.chan: asyncssh.SSHTCPChannel | None = None
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._writable = asyncio.Event()
        self._writable.set()
        self._tasks: list[asyncio.Task] = []
        self._paused_reading = False

    def connection_made(self, chan: asyncssh.SSHTCPChannel) -> None:
        self.chan = chan

    def session_started(self) -> None:
        self._tasks = [asyncio.ensure_future(self._to_port()), asyncio.ensure_future(self._from_port())]
        asyncio.ensure_future(self._close_when_done())

    async def _close_when_done(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)  # both directions ended (or failed)
        self._close()

    def data_received(self, data: bytes, datatype) -> None:
        self.queue.put_nowait(data)
        if self.queue.qsize() > QUEUE_HIGH and self.chan is not None and not self._paused_reading:
            self._paused_reading = True
            self.chan.pause_reading()

    def eof_received(self) -> bool:
        self.queue.put_nowait(None)
        return True

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    async def _to_port(self) -> None:
        try:
            while (data := await self.queue.get()) is not None:
                await self.stream.write(data)
                if self._paused_reading and self.queue.qsize() < QUEUE_LOW and self.chan is not None:
                    self._paused_reading = False
                    self.chan.resume_reading()
            self.stream.write_eof()
        except (OSError, ConnectionError) as e:
            log.debug("ssh forward %s: %s", self.what, e)
            self._close()
            raise

    async def _from_port(self) -> None:
        try:
            while data := await self.stream.read():
                await self._writable.wait()
                if self.chan is None:
                    return
                self.chan.write(data)
            if self.chan is not None:
                self.chan.write_eof()
        except (OSError, ConnectionError) as e:
            log.debug("ssh forward %s: %s", self.what, e)
            self._close()
            raise

    def _close(self) -> None:
        if self.chan is not None:
            self.chan.close()
            self.chan = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.chan = None
        for t in self._tasks:
            t.cancel()
        asyncio.ensure_future(self._close_stream())

    async def _close_stream(self) -> None:
        with contextlib.suppress(Exception):
            await self.stream.close()
