"""``python -m ti_hub.ssh.sftpchild``: asyncssh's SFTP server on stdin/stdout, run inside the workspace's sandbox.

The gateway starts this like any other session command, in the workspace's bubblewrap sandbox, as its user and
with its environment, so SFTP (and OpenSSH's scp, which speaks SFTP since 9.0) sees exactly the files the
workspace sees: its mounts at their mount paths, read-only ones read-only, and nothing else the sandbox hides.
Relative paths start in the session's working directory (the workspace's home).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from asyncssh.logging import logger as ssh_logger
from asyncssh.sftp import MAX_SFTP_VERSION, SFTPServer, SFTPServerHandler

from .proc import FdWriter

CLIENT_VERSION_ENV = "TI_SSH_CLIENT_VERSION"


class _Channel:
    """The little of an SSH channel that asyncssh's SFTP server asks for."""

    logger = ssh_logger

    def __init__(self) -> None:
        self._closed = asyncio.Event()

    def is_closing(self) -> bool:
        return self._closed.is_set()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    def close(self) -> None:
        self._closed.set()

    def get_environment(self) -> dict[str, str]:
        return {}

    def get_connection(self) -> None:
        return None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return os.environ.get(CLIENT_VERSION_ENV, "") if name == "client_version" else default


class _Reader:
    def __init__(self, stream: asyncio.StreamReader, chan: _Channel):
        self._stream, self.channel, self.logger = stream, chan, ssh_logger

    async def readexactly(self, n: int) -> bytes:
        return await self._stream.readexactly(n)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.channel.get_extra_info(name, default)


class _Writer:
    def __init__(self, out: FdWriter, chan: _Channel):
        self._out, self.channel, self.logger = out, chan, ssh_logger

    def write(self, data: bytes) -> None:
        self._out.write(data)

    def write_eof(self) -> None:
        self.close()

    def close(self) -> None:
        if not self.channel.is_closing():
            self.channel.close()
            self._out.close()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.channel.get_extra_info(name, default)


async def serve(stdin_fd: int, stdout_fd: int) -> None:
    """SFTP on two descriptors. Output goes through a plain non-blocking writer, not asyncio's write pipe: when
    both ends are one socket (OpenSSH's ``sftp -D`` hands a socketpair), asyncio would take incoming requests
    on the output side for the peer closing."""
    loop = asyncio.get_running_loop()
    stream = asyncio.StreamReader(limit=1 << 23)
    stdin = os.fdopen(stdin_fd, "rb", buffering=0, closefd=False)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), stdin)
    done = asyncio.Event()
    out = FdWriter(loop, stdout_fd, on_closed=done.set)
    chan = _Channel()
    writer = _Writer(out, chan)
    handler = SFTPServerHandler(SFTPServer(chan), _Reader(stream, chan), writer,  # type: ignore[arg-type]
                                MAX_SFTP_VERSION)
    try:
        await handler.run()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass  # the client closed the session
    finally:
        writer.close()
        try:
            await asyncio.wait_for(done.wait(), 10)  # what is still buffered goes out first
        except asyncio.TimeoutError:
            pass


def main() -> None:
    asyncio.run(serve(sys.stdin.fileno(), sys.stdout.fileno()))


if __name__ == "__main__":
    main()
