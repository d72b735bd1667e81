"""Sessions in Kubernetes workspace and job pods, through the API server's exec and port-forward streams.

Pure parts (unit-tested): frames of the channel protocols (``v5.channel.k8s.io``, else ``v4``), exit statuses,
resize messages, which pod serves a job instance, the owner check. The I/O shell (``KubeTarget``) opens the
websockets with kubernetes_asyncio's WsApiClient. A session runs as the pod's own user (TiHub's pods are
non-root with every capability dropped); the gateway needs ``pods/exec`` and ``pods/portforward`` on the user
namespace and ``get``/``list`` on pods, nothing else. tests/k8s/test_ssh_kube.py drives it end to end through a
real API server to kwok, which runs what is exec'd on the test machine (it never passes the end of stdin on, so
the v5 close frame is unit-tested only).
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from typing import Any

from ..backends.k8s.objects import ANN_OWNER, LABEL_RUN, completion_index, runs_role
from .logins import TargetError
from .places import KubePod
from .proc import SessionProcess

STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
PROTOCOLS = "v5.channel.k8s.io,v4.channel.k8s.io"
EXIT_TEXT = re.compile(r": exit status (\d{1,3})$")
SFTP_SERVERS = ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/lib/ssh/sftp-server",
                "/usr/libexec/sftp-server")


# -- pure ----------------------------------------------------------------------------------------------------
def frame(channel: int, data: bytes = b"") -> bytes:
    return bytes([channel]) + data


def unframe(message: bytes) -> tuple[int, bytes]:
    if not message:
        return -1, b""
    return message[0], message[1:]


def resize_frame(cols: int, rows: int) -> bytes:
    return frame(RESIZE, json.dumps({"Width": max(int(cols), 1), "Height": max(int(rows), 1)}).encode())


def close_stdin_frame() -> bytes:
    """v5 only: the client's stdin ends (v4 has no way to say so; the command sees EOF when the stream closes)."""
    return frame(CLOSE, bytes([STDIN]))


def exit_status(status: bytes | str) -> tuple[int | None, str | None]:
    """The ERROR channel's Status: (exit code, None), or (None, message) when the exec itself failed."""
    try:
        doc = json.loads(status)
    except ValueError:
        return None, "the API server sent an unreadable status"
    if doc.get("status") == "Success":
        return 0, None
    for cause in (doc.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode":
            try:
                return int(cause.get("message", "")), None
            except ValueError:
                break
    # a runtime that passes its error on untranslated (kwok's local exec, some CRI shims) ends the message with
    # Go's exec.ExitError text: the command ran, and this is its status
    if m := EXIT_TEXT.search(doc.get("message") or ""):
        return int(m.group(1)), None
    return None, doc.get("message") or "the command could not be run in the pod"


def exec_params(argv: list[str], container: str, tty: bool) -> dict[str, Any]:
    return {"command": list(argv), "container": container, "stdin": True, "stdout": True, "stderr": not tty,
            "tty": tty}


def session_command(command: str | None, subsystem: str | None) -> list[str]:
    """What runs in the container: a login shell, ``sh -c COMMAND``, or an SFTP server."""
    if subsystem == "sftp":
        tries = " ".join(shlex.quote(p) for p in SFTP_SERVERS)
        return ["/bin/sh", "-c", f'for p in {tries}; do [ -x "$p" ] && exec "$p"; done; '
                                 "exec python3 -m ti_hub.ssh.sftpchild"]
    if subsystem is not None:
        raise TargetError(f"subsystem {subsystem!r} is not offered (only sftp)")
    if command is not None:
        return ["/bin/sh", "-c", command]
    return ["/bin/sh", "-c", 'if [ -x /bin/bash ]; then exec /bin/bash -l; else exec /bin/sh -l; fi']


def pick_pod(pods: list[dict[str, Any]], job: str, index: int) -> dict[str, Any] | None:
    """The newest running pod of completion ``index`` of the role ``job`` (a Kubernetes Job, or a bare pod)."""
    best = None
    for pod in pods:
        meta = pod.get("metadata") or {}
        if not runs_role(pod, job) or completion_index(pod) != int(index) or \
                (pod.get("status") or {}).get("phase") != "Running":
            continue
        if best is None or meta.get("creationTimestamp", "") > best["metadata"].get("creationTimestamp", ""):
            best = pod
    return best


def check_owner(pod: dict[str, Any], owner: str) -> None:
    """Defense in depth: never open a session in a pod TiHub did not make for this owner."""
    meta = pod.get("metadata") or {}
    if (meta.get("annotations") or {}).get(ANN_OWNER) != owner:
        raise TargetError("this pod does not belong to you")
    if (pod.get("status") or {}).get("phase") != "Running":
        raise TargetError(f"pod {meta.get('name')} is not running")


class PortFrames:
    """Port-forward streams of one port: channel 0 carries data, channel 1 errors, and the first frame of each
    starts with the port number (2 bytes, little-endian), which is not data."""

    def __init__(self, port: int):
        self.port = port
        self._seen: set[int] = set()

    def feed(self, message: bytes) -> tuple[bytes, str]:
        """(data, error text) in one message from the API server."""
        channel, data = unframe(message)
        if channel not in (0, 1):
            return b"", ""
        if channel not in self._seen:
            self._seen.add(channel)
            if len(data) >= 2 and int.from_bytes(data[:2], "little") == self.port:
                data = data[2:]
        return (data, "") if channel == 0 else (b"", data.decode(errors="replace"))

    @staticmethod
    def outgoing(data: bytes) -> bytes:
        return frame(0, data)


# -- I/O -----------------------------------------------------------------------------------------------------
class KubeProcess(SessionProcess):
    def __init__(self, ws: Any, ctx: Any, v5: bool):
        super().__init__()
        self.ws, self.ctx, self.v5 = ws, ctx, v5
        self._paused = asyncio.Event()
        self._paused.set()
        self._result: tuple[int | None, str | None] = (None, None)
        self._out: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._queued = 0
        self._pump = asyncio.ensure_future(self._read())
        self._sender = asyncio.ensure_future(self._send_all())

    async def _send_all(self) -> None:
        """One sender, so frames leave in order even when the socket pushes back."""
        while (data := await self._out.get()) is not None:
            self._queued -= len(data)
            try:
                await self.ws.send_bytes(data)
            except (ConnectionError, RuntimeError):
                return

    async def _read(self) -> None:
        import aiohttp

        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.BINARY:
                continue
            await self._paused.wait()  # the SSH side is full: leave the rest in the socket
            channel, data = unframe(msg.data)
            if channel in (STDOUT, STDERR) and data:
                self.on_output(data, channel == STDERR)
            elif channel == ERROR and data:
                code, problem = exit_status(data)
                self._result = (code, None) if code is not None else (None, None)
                if problem:
                    self.on_output(f"ti-ssh: {problem}\r\n".encode(), True)
                    self._result = (126, None)

    def _send(self, data: bytes) -> None:
        self._queued += len(data)
        self._out.put_nowait(data)

    def input_buffered(self) -> int:
        return self._queued

    def write(self, data: bytes) -> None:
        self._send(frame(STDIN, data))

    def write_eof(self) -> None:
        if self.v5:
            self._send(close_stdin_frame())

    def resize(self, cols: int, rows: int, px_width: int = 0, px_height: int = 0) -> None:
        self._send(resize_frame(cols, rows))

    def pause_output(self) -> None:
        self._paused.clear()

    def resume_output(self) -> None:
        self._paused.set()

    async def wait(self) -> tuple[int | None, str | None]:
        try:
            await self._pump
        finally:
            self._out.put_nowait(None)
            await self.ctx.__aexit__(None, None, None)
        code, sig = self._result
        return (code if code is not None else 255), sig

    def hangup(self) -> None:
        asyncio.ensure_future(self.ws.close())


class KubeTarget:
    """One resolved pod. ``api``: a ``kubernetes_asyncio.stream.WsApiClient`` (it turns every request into a
    websocket, so pods are read with a plain ApiClient)."""

    def __init__(self, place: KubePod, pod: str, api: Any):
        self.place, self.pod, self.api = place, pod, api

    @classmethod
    async def resolve(cls, place: KubePod, plain: Any, ws_api: Any) -> KubeTarget:
        from kubernetes_asyncio import client as k8s
        from kubernetes_asyncio.client.exceptions import ApiException

        core = k8s.CoreV1Api(plain)
        try:
            if place.pod:
                pod = plain.sanitize_for_serialization(await core.read_namespaced_pod(place.pod, place.namespace))
            else:
                pod = None
                # the run label (bare pods, and Jobs' pods since it was added); then the Job controller's own
                for label in (LABEL_RUN, "job-name"):
                    listing = await core.list_namespaced_pod(place.namespace, label_selector=f"{label}={place.job}")
                    pod = pick_pod([plain.sanitize_for_serialization(p) for p in listing.items], place.job,
                                   place.index)
                    if pod is not None:
                        break
        except ApiException as e:
            raise TargetError(f"cannot read the pod of {place.name!r} ({e.status} {e.reason})") from None
        if pod is None:
            raise TargetError(f"instance {place.index} of job {place.name!r} has no running pod")
        check_owner(pod, place.owner)
        return cls(place, pod["metadata"]["name"], ws_api)

    async def start(self, *, command: str | None, subsystem: str | None, pty: tuple[int, int] | None,
                    term: str | None, client: tuple[str, int], server: tuple[str, int], login: str,
                    client_version: str = "") -> KubeProcess:
        from kubernetes_asyncio import client as k8s

        argv = session_command(command, subsystem)
        if term and pty:
            argv = ["env", f"TERM={term}", *argv]
        core = k8s.CoreV1Api(self.api)
        ctx = await core.connect_get_namespaced_pod_exec(
            self.pod, self.place.namespace, **exec_params(argv, self.place.container, bool(pty)),
            _preload_content=False, _headers={"sec-websocket-protocol": PROTOCOLS})
        ws = await ctx.__aenter__()
        response = getattr(ws, "_response", None)
        chosen = response.headers.get("Sec-WebSocket-Protocol", "") if response is not None else ""
        p = KubeProcess(ws, ctx, v5=chosen.startswith("v5"))
        if pty:
            p.resize(*pty)
        return p

    async def open_port(self, host: str, port: int) -> KubePortStream:
        from kubernetes_asyncio import client as k8s

        if host.lower().strip("[]") not in ("localhost", "127.0.0.1", "::1"):
            raise TargetError(f"only ports inside the pod can be forwarded (localhost:PORT), not {host}")
        core = k8s.CoreV1Api(self.api)
        ctx = await core.connect_get_namespaced_pod_portforward(
            self.pod, self.place.namespace, ports=str(int(port)), _preload_content=False)
        return KubePortStream(await ctx.__aenter__(), ctx, PortFrames(int(port)))


class KubePortStream:
    """One forwarded connection over a port-forward websocket (the PortStream interface of ``forward.py``)."""

    def __init__(self, ws: Any, ctx: Any, frames: PortFrames):
        self.ws, self.ctx, self.frames = ws, ctx, frames

    async def read(self) -> bytes:
        import aiohttp

        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.BINARY:
                continue
            data, error = self.frames.feed(msg.data)
            if error:
                raise ConnectionError(error)
            if data:
                return data
        return b""

    async def write(self, data: bytes) -> None:
        await self.ws.send_bytes(PortFrames.outgoing(data))

    def write_eof(self) -> None:
        pass  # the stream has no half-close: the connection ends when either side closes

    async def close(self) -> None:
        await self.ws.close()
        await self.ctx.__aexit__(None, None, None)
