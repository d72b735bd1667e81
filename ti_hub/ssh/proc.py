"""A session's process on this machine: a pty or three pipes, pumped without blocking the event loop.

The SSH side (``server.py``) only sees ``SessionProcess``: write input, close it, resize, signal, read output
through a callback, wait for the exit status. ``kube.py`` implements the same interface over the pod exec API.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import signal
import struct
import termios
from collections.abc import Callable

OutputCallback = Callable[[bytes, bool], None]  # (data, is stderr)
READ_SIZE = 65536
HANGUP_GRACE = 3.0


class SessionProcess:
    """What a session needs from a process, wherever it runs."""

    def __init__(self) -> None:
        self.on_output: OutputCallback = lambda data, err: None

    def write(self, data: bytes) -> None:
        raise NotImplementedError

    def write_eof(self) -> None:
        raise NotImplementedError

    def input_buffered(self) -> int:
        return 0

    def resize(self, cols: int, rows: int, px_width: int = 0, px_height: int = 0) -> None:
        pass

    def send_signal(self, name: str) -> None:
        pass

    def pause_output(self) -> None:
        pass

    def resume_output(self) -> None:
        pass

    async def wait(self) -> tuple[int | None, str | None]:
        """(exit code, None) or (None, signal name), once all output was handed to ``on_output``."""
        raise NotImplementedError

    def hangup(self) -> None:
        """The client is gone: end the process (SIGHUP, then SIGKILL after a grace period)."""


class FdReader:
    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, on_data: Callable[[bytes], None]):
        self.loop, self.fd, self.on_data = loop, fd, on_data
        self.eof = asyncio.Event()
        self._paused = False
        os.set_blocking(fd, False)
        loop.add_reader(fd, self._ready)

    def _read(self) -> bytes | None:
        """Bytes, b'' at the end (EIO: a pty whose other side is closed), None when nothing is there now."""
        try:
            return os.read(self.fd, READ_SIZE)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    def _ready(self) -> None:
        data = self._read()
        if data is None:
            return
        if data:
            self.on_data(data)
        else:
            self._stop()

    def drain(self) -> None:
        """Deliver whatever is readable now, then stop (a pty after its process ended)."""
        while not self.eof.is_set():
            data = self._read()
            if not data:
                self._stop()
                return
            self.on_data(data)

    def _stop(self) -> None:
        if not self.eof.is_set():
            self.loop.remove_reader(self.fd)
            self.eof.set()

    def pause(self) -> None:
        if not self._paused and not self.eof.is_set():
            self.loop.remove_reader(self.fd)
        self._paused = True

    def resume(self) -> None:
        if self._paused and not self.eof.is_set():
            self.loop.add_reader(self.fd, self._ready)
        self._paused = False


class FdWriter:
    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, on_closed: Callable[[], None] | None = None):
        self.loop, self.fd = loop, fd
        self.buffer = bytearray()
        self.closing = self.closed = False
        self.on_closed = on_closed
        os.set_blocking(fd, False)

    def write(self, data: bytes) -> None:
        if self.closing or self.closed:
            return
        had = bool(self.buffer)
        self.buffer += data
        if not had:
            self._flush()

    def _flush(self) -> None:
        while self.buffer:
            try:
                n = os.write(self.fd, self.buffer)
            except BlockingIOError:
                break
            except OSError:  # the reader is gone: drop the input, like a closed pipe
                self.buffer.clear()
                break
            del self.buffer[:n]
        if self.buffer:
            self.loop.add_writer(self.fd, self._writable)
        elif self.closing:
            self._close()

    def _writable(self) -> None:
        self.loop.remove_writer(self.fd)
        self._flush()

    def close(self) -> None:
        self.closing = True
        if not self.buffer:
            self._close()

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            self.loop.remove_writer(self.fd)
            if self.on_closed:
                self.on_closed()


def _set_size(fd: int, cols: int, rows: int, px_width: int = 0, px_height: int = 0) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", max(rows, 1), max(cols, 1), px_width, px_height))


def _signal_number(name: str) -> int | None:
    sig = getattr(signal, "SIG" + name.upper().removeprefix("SIG"), None)
    return int(sig) if sig is not None else None


class LocalProcess(SessionProcess):
    """``argv`` as a new session (process group leader), on a pty when ``pty`` is (cols, rows), else on pipes.

    ``setup`` runs in the child before exec (join a cgroup, pin CPUs); it must only make system calls.
    """

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, pty: tuple[int, int] | None,
                 setup: Callable[[], None] | None = None, pass_fds: tuple[int, ...] = (),
                 openpty: Callable[[], tuple[int, int]] = os.openpty):
        super().__init__()
        self.argv, self.env, self.cwd, self.pty, self.setup = argv, env, cwd, pty, setup
        self.pass_fds, self.openpty = pass_fds, openpty
        self.proc: asyncio.subprocess.Process | None = None
        self._readers: list[FdReader] = []
        self._writer: FdWriter | None = None
        self._fds: list[int] = []

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        child_fds: list[int] = []
        try:
            if self.pty:
                master, slave = self.openpty()
                self._fds.append(master)
                child_fds.append(slave)
                _set_size(master, *self.pty)
                stdin = stdout = stderr = slave
                preexec = self._pty_child
            else:
                in_r, in_w = os.pipe()
                out_r, out_w = os.pipe()
                err_r, err_w = os.pipe()
                self._fds += [in_w, out_r, err_r]
                child_fds += [in_r, out_w, err_w]
                stdin, stdout, stderr = in_r, out_w, err_w
                preexec = self.setup
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv, stdin=stdin, stdout=stdout, stderr=stderr, env=self.env, cwd=self.cwd,
                start_new_session=True, preexec_fn=preexec, close_fds=True, pass_fds=self.pass_fds)
        except BaseException:
            for fd in self._fds:
                os.close(fd)
            self._fds.clear()
            raise
        finally:
            for fd in child_fds:
                os.close(fd)
        if self.pty:
            master = self._fds[0]
            self._readers = [FdReader(loop, master, lambda d: self.on_output(d, False))]
            self._writer = FdWriter(loop, master)
        else:
            in_w, out_r, err_r = self._fds
            self._readers = [FdReader(loop, out_r, lambda d: self.on_output(d, False)),
                             FdReader(loop, err_r, lambda d: self.on_output(d, True))]
            self._writer = FdWriter(loop, in_w, on_closed=lambda: self._close_fd(in_w))

    def _pty_child(self) -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # the pty becomes the new session's controlling terminal
        if self.setup:
            self.setup()

    def _close_fd(self, fd: int) -> None:
        if fd in self._fds:
            self._fds.remove(fd)
            os.close(fd)

    def write(self, data: bytes) -> None:
        if self._writer:
            self._writer.write(data)

    def write_eof(self) -> None:
        if self.pty:
            self.write(b"\x04")  # a terminal has no end of input: ^D is what the user would type
        elif self._writer:
            self._writer.close()

    def input_buffered(self) -> int:
        return len(self._writer.buffer) if self._writer else 0

    def resize(self, cols: int, rows: int, px_width: int = 0, px_height: int = 0) -> None:
        if self.pty and self._fds:
            _set_size(self._fds[0], cols, rows, px_width, px_height)  # the kernel sends SIGWINCH

    def send_signal(self, name: str) -> None:
        sig = _signal_number(name)
        if sig is not None and self.proc and self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def pause_output(self) -> None:
        for r in self._readers:
            r.pause()

    def resume_output(self) -> None:
        for r in self._readers:
            r.resume()

    async def wait(self) -> tuple[int | None, str | None]:
        assert self.proc is not None
        try:
            code = await self.proc.wait()
            if self.pty:
                self._readers[0].resume()
                self._readers[0].drain()  # the shell ended: what it wrote is in the pty already
            else:
                await asyncio.gather(*(r.eof.wait() for r in self._readers))  # OpenSSH also waits for EOF
        finally:
            self._cleanup()
        if code < 0:
            return None, signal.Signals(-code).name.removeprefix("SIG")
        return code, None

    def _cleanup(self) -> None:
        loop = asyncio.get_running_loop()
        for r in self._readers:
            r.pause()
        for fd in self._fds:
            loop.remove_writer(fd)
            os.close(fd)
        self._fds.clear()
        self._writer = None

    def hangup(self) -> None:
        if not self.proc or self.proc.returncode is not None:
            return
        pid = self.proc.pid
        for sig in (signal.SIGHUP, signal.SIGCONT):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                return
        asyncio.get_running_loop().call_later(HANGUP_GRACE, self._kill_group, pid)

    def _kill_group(self, pid: int) -> None:
        if self.proc and self.proc.returncode is None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
