"""The SSH gateway in-process (asyncssh client, a fake ti service): limits and edges the end-to-end test leaves out.

A "workspace" here is a real process in a real bubblewrap sandbox, with the environment a spawner gives it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from ti_hub.backends.local import launcher, sandbox, userdirs
from ti_hub.ssh.lookup import LookupFailed
from ti_hub.ssh.settings import TiSSHGateway

asyncssh = pytest.importorskip("asyncssh")

from ti_hub.ssh.app import host_key  # noqa: E402
from ti_hub.ssh.gateway import Gateway  # noqa: E402
from ti_hub.ssh.proc import LocalProcess  # noqa: E402
from ti_hub.ssh.server import GatewayConnection  # noqa: E402

KEY = asyncssh.generate_private_key("ssh-ed25519")
OTHER = [asyncssh.generate_private_key("ssh-ed25519") for _ in range(7)]


class FakeAPI:
    def __init__(self, docs):
        self.docs, self.fail = docs, False

    async def keys(self, user):
        if self.fail:
            raise LookupFailed("GET /ssh/keys: 503")
        return [{"name": "laptop", "key": KEY.export_public_key().decode()}] if user == "alice" else []

    async def targets(self, user, name):
        return [d for d in self.docs if d["owner"] == user and (name is None or d["name"] == name)]


class Accounts:
    async def refusal(self, user):
        return None


UID = 900444 if os.geteuid() == 0 else None


@pytest.fixture
async def gateway(tmp_path):
    """A workspace started as the local spawner starts one: a supervisor, a sandbox, the owner's uid."""
    home, run = tmp_path / "home", tmp_path / "run"
    bwrap = sandbox.find_bwrap()
    if bwrap is None:
        pytest.skip("needs bubblewrap")
    ident = launcher.identity("alice", UID, "/home/alice")
    userdirs.ensure_dir(str(home), ident.uid, ident.gid)
    userdirs.platform_dir(str(run))
    paths = {k: str(run / f) for k, f in (("log", "ws.log"), ("status", "status.json"), ("child", "child.json"),
                                          ("stop", "stop.json"), ("supervisor_log", "supervisor.log"))}
    box = launcher.plan([sandbox.Bind(str(home), ident.home, False)], tmp="", shm_mib=0, cwd=ident.home)
    env = {"PATH": os.environ["PATH"], "JUPYTERHUB_USER": "alice", "TI_WORKSPACE": "default", "HOME": ident.home}
    cfg = launcher.config(ident=ident, argv=["sleep", "600"], env=env, cwd=ident.home, box=box, bwrap=bwrap,
                          python=sys.executable, paths=paths)
    launcher.write_config(str(run / "config.json"), cfg)
    record = {"index": 0, "pid": None, "start_time": None, **paths}
    ws = launcher.spawn(sys.executable, str(run / "config.json"), str(run / "record.json"), record, str(run))
    for _ in range(100):  # until the supervisor recorded the sandbox
        if (json.loads((run / "child.json").read_text()) if (run / "child.json").exists() else {}).get("sandbox_pid"):
            break
        await asyncio.sleep(0.05)
    state = {"backend": "local", "pid": record["pid"], "start_time": record["start_time"], "child": paths["child"]}
    api = FakeAPI([{"owner": "alice", "name": "default", "kind": "workspace", "status": "running", "ssh": True,
                    "instances": 1, "backend_state": state}])
    settings = TiSSHGateway(ip="127.0.0.1", port=0, max_sessions_per_connection=2, max_connections_per_user=3,
                            max_auth_tries=3)
    gw = Gateway(settings, api, Accounts())
    server = await asyncssh.create_server(lambda: GatewayConnection(gw), "127.0.0.1", 0, encoding=None,
                                          server_host_keys=[host_key(str(tmp_path / "hostkey"))], line_editor=False)
    gw.port = server.sockets[0].getsockname()[1]
    gw.home = home
    gw.uid = ident.uid
    yield gw
    server.close()
    ws.terminate()
    ws.wait()


def connect(gw, user="alice", keys=(KEY,)):
    return asyncssh.connect("127.0.0.1", gw.port, username=user, client_keys=list(keys), known_hosts=None,
                            agent_path=None)


async def test_sessions_signals_and_sftp(gateway):
    async with connect(gateway) as c:
        r = await c.run("echo $HOME; id -u; exit 4")
        assert (r.stdout, r.exit_status) == (f"/home/alice\n{gateway.uid}\n", 4)  # the owner, in the sandbox
        p = await c.create_process("sleep 30")
        await asyncio.sleep(0.3)
        p.send_signal("TERM")
        await asyncio.wait_for(p.wait_closed(), 10)
        assert p.exit_signal is not None or (p.exit_status is not None and p.exit_status != 0)
        async with c.start_sftp_client() as sftp:
            async with sftp.open("made.txt", "w") as f:
                await f.write("via sftp")
        assert (gateway.home / "made.txt").read_text() == "via sftp"
        assert (gateway.home / "made.txt").stat().st_uid == gateway.uid  # written by the owner, not the gateway


async def test_session_and_connection_limits(gateway):
    async with connect(gateway) as c:
        a = await c.create_process("sleep 5")
        b = await c.create_process("sleep 5")
        with pytest.raises(asyncssh.ChannelOpenError, match="at most 2 sessions per connection"):
            await c.create_process("true")
        a.terminate(), b.terminate()
    conns = [await connect(gateway) for _ in range(3)]
    with pytest.raises(asyncssh.DisconnectError, match="3 SSH connections open already"):
        async with connect(gateway) as c:
            await c.run("true")
    for c in conns:
        c.close()


async def test_too_many_keys_a_lookup_failure_and_bad_names_all_fail(gateway):
    with pytest.raises((asyncssh.DisconnectError, asyncssh.PermissionDenied)):
        async with connect(gateway, keys=OTHER):
            pass
    gateway.api.fail = True
    with pytest.raises(asyncssh.PermissionDenied):
        async with connect(gateway):
            pass
    gateway.api.fail = False
    with pytest.raises(asyncssh.PermissionDenied):
        async with connect(gateway, user="alice+x"):  # not a valid target name
            pass
    assert gateway.limiter.sources.wait_seconds("127.0.0.1", gateway.limiter.clock()) == 0  # 3 of 10 used
    assert len(gateway.limiter.sources) == 1


async def test_a_local_process_on_pipes_and_on_a_pty():
    out: list[bytes] = []
    p = LocalProcess([sys.executable, "-c", "import sys; d = sys.stdin.read(); print(d.upper()); "
                                            "sys.stderr.write('err'); sys.exit(3)"], dict(os.environ), "/", None)
    p.on_output = lambda data, err: out.append((b"E:" if err else b"") + data)
    await p.start()
    p.write(b"hello")
    p.write_eof()
    assert await p.wait() == (3, None)
    assert b"".join(x for x in out if not x.startswith(b"E:")) == b"HELLO\n" and b"E:err" in out
    out.clear()
    p = LocalProcess(["/bin/sh", "-c", "stty size; tty; kill -TERM $$"], dict(os.environ), "/", (90, 20))
    p.on_output = lambda data, err: out.append(data)
    await p.start()
    assert await p.wait() == (None, "TERM")
    text = b"".join(out).decode()
    assert "20 90" in text and "/dev/pts/" in text


async def test_hub_accounts_are_read_only_and_safe_from_many_threads(tmp_path):
    import sqlite3

    from ti_hub.ssh.lookup import HubAccounts

    db = tmp_path / "jupyterhub.sqlite"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE users (name TEXT)")
        c.execute("CREATE TABLE users_info (username TEXT, is_authorized BOOLEAN)")
        c.executemany("INSERT INTO users VALUES (?)", [("ann",), ("ben",)])
        c.executemany("INSERT INTO users_info VALUES (?, ?)", [("ann", 1), ("ben", 0)])
    accounts = HubAccounts(f"sqlite:///{db}")
    answers = await asyncio.gather(*(accounts.refusal(u) for u in ("ann", "ben", "cid") * 40))
    assert answers[:3] == [None, "the account is not authorized in the hub (an admin took its approval back)",
                           "no such account in the hub"]
    assert answers == answers[:3] * 40  # the same from every worker thread
    with pytest.raises(Exception):
        with accounts._engine.connect() as conn:  # read-only: the gateway can change nothing there
            conn.exec_driver_sql("DELETE FROM users")
    with sqlite3.connect(db) as c:
        c.execute("DROP TABLE users_info")  # another authenticator: no approvals to check
    assert await accounts.refusal("ben") is None
    assert await HubAccounts("").refusal("anyone") is None


class FakeWS:
    """What KubeProcess and KubePortStream use of aiohttp's websocket."""

    def __init__(self, incoming: list[bytes]):
        self.incoming, self.sent, self.closed = incoming, [], False

    def __aiter__(self):
        return self  # like aiohttp: every `async for` goes on where the last one stopped

    async def __anext__(self):
        import aiohttp
        from types import SimpleNamespace

        await asyncio.sleep(0)
        if not self.incoming:
            raise StopAsyncIteration
        return SimpleNamespace(type=aiohttp.WSMsgType.BINARY, data=self.incoming.pop(0))

    async def send_bytes(self, data: bytes) -> None:
        self.sent.append(data)

    async def close(self) -> None:
        self.closed = True


class FakeCtx:
    async def __aexit__(self, *exc):
        return None


async def test_kube_exec_stream_in_order_with_its_exit_status():
    pytest.importorskip("aiohttp")
    from ti_hub.ssh.kube import KubePortStream, KubeProcess, PortFrames

    status = b'\x03{"status":"Failure","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}'
    ws = FakeWS([b"\x01hello ", b"\x02oops", b"\x01world", status])
    p = KubeProcess(ws, FakeCtx(), v5=True)
    got: list[tuple[bytes, bool]] = []
    p.on_output = lambda data, err: got.append((data, err))
    p.write(b"input")
    p.write_eof()
    p.resize(100, 30)
    assert await p.wait() == (3, None)
    await p._sender
    assert got == [(b"hello ", False), (b"oops", True), (b"world", False)]
    assert ws.sent == [b"\x00input", b"\xff\x00", b'\x04{"Width": 100, "Height": 30}']
    port = (8888).to_bytes(2, "little")
    stream = KubePortStream(FakeWS([b"\x00" + port, b"\x01" + port, b"\x00GET / HTTP"]), FakeCtx(), PortFrames(8888))
    assert await stream.read() == b"GET / HTTP" and await stream.read() == b""
    await stream.write(b"reply")
    assert stream.ws.sent == [b"\x00reply"]
    await stream.close()
    assert stream.ws.closed


def test_host_key_is_made_once_or_read_from_a_read_only_pem(tmp_path):
    made = host_key(str(tmp_path / "made" / "key"))
    assert host_key(str(tmp_path / "made" / "key")).export_public_key() == made.export_public_key()
    assert (tmp_path / "made" / "key").stat().st_mode & 0o777 == 0o600
    # the Helm chart's key: PKCS#8 PEM (helm's genPrivateKey "ed25519"), mode 0440 from its Secret volume
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    pem = ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    (tmp_path / "ssh-host-key").write_bytes(pem)
    (tmp_path / "ssh-host-key").chmod(0o440)
    assert host_key(str(tmp_path / "ssh-host-key")).algorithm == b"ssh-ed25519"
