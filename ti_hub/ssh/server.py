"""One SSH connection: who may log in (registered keys, an authorized account, the rate limits), then its sessions
(``session.py``) and local port forwards (``forward.py``). No passwords, no agent or X11 forwarding, no remote
forwards.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import asyncssh

from .authkeys import RegisteredKey, find_match, fingerprint
from .forward import ForwardSession
from .logins import Login, LoginError, TargetError, parse_login
from .lookup import LookupFailed
from .session import GatewaySession

if TYPE_CHECKING:
    from .gateway import Gateway

log = logging.getLogger("ti_hub.ssh")


class GatewayConnection(asyncssh.SSHServer):
    def __init__(self, gw: Gateway):
        self.gw = gw
        self.conn: asyncssh.SSHServerConnection | None = None
        self.peer: tuple[str, int] = ("?", 0)
        self.local: tuple[str, int] = ("?", 0)
        self.login: Login = Login("?")
        self.account: str | None = None  # the account name tried (for the per-account limit)
        self.keys: list[RegisteredKey] | None = None
        self.tried: set[bytes] = set()
        self.reason = "no public key offered"
        self.auth_started = self.authenticated = self.bad_login = False
        self.uncounted = False  # refused before trying (limits): not one more failed login
        self.counted = False
        self.sessions = 0
        self.closing = False

    # -- connection ------------------------------------------------------------------------------------
    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        peer, local = conn.get_extra_info("peername") or ("?", 0), conn.get_extra_info("sockname") or ("?", 0)
        self.peer, self.local = (str(peer[0]), int(peer[1])), (str(local[0]), int(local[1]))
        if self.gw.connections >= self.gw.settings.max_connections:
            self._disconnect(asyncssh.DISC_TOO_MANY_CONNECTIONS, "the SSH gateway is full; try again later", False)
            return
        self.gw.connections += 1
        self.counted = True

    def connection_lost(self, exc: Exception | None) -> None:
        if self.counted:
            self.gw.connections -= 1
        if self.authenticated:
            self.gw.per_user[self.login.user] -= 1
            if self.gw.per_user[self.login.user] <= 0:
                del self.gw.per_user[self.login.user]
        elif self.auth_started and not self.uncounted:
            self.gw.login_failed(self.peer[0], self.account, self.reason)

    def _disconnect(self, code: int, message: str, counts: bool) -> None:
        self.uncounted = not counts
        self.closing = True
        if self.conn is not None:
            self.conn.disconnect(code, message)

    # -- authentication --------------------------------------------------------------------------------
    def begin_auth(self, username: str) -> bool:
        self.auth_started = True
        try:
            self.login = parse_login(username)
            self.account = self.login.user
        except LoginError as e:
            self.account, self.reason, self.bad_login = username[:64], str(e), True
        refusal = self.gw.limiter.refusal(self.peer[0], self.account)
        if refusal:
            log.warning("ssh login refused: user=%s source=%s reason=%s", self.account, self.peer[0], refusal)
            self._disconnect(asyncssh.DISC_NO_MORE_AUTH_METHODS_AVAILABLE, refusal, False)
        return True

    def public_key_auth_supported(self) -> bool:
        return True

    async def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        if self.closing or self.bad_login:
            return False  # refused already, or a login name that names nothing (reason kept from begin_auth)
        blob = key.public_data
        if blob not in self.tried:
            self.tried.add(blob)
            if len(self.tried) > self.gw.settings.max_auth_tries:
                self.reason = f"more than {self.gw.settings.max_auth_tries} keys offered"
                self._disconnect(asyncssh.DISC_NO_MORE_AUTH_METHODS_AVAILABLE, "too many authentication failures",
                                 True)
                return False
        try:
            if self.keys is None:
                self.keys = await self.gw.keys_of(self.login.user)
            match = find_match(self.keys, blob)
            if match is None:
                self.reason = ("no SSH key registered" if not self.keys else
                               f"key {fingerprint(blob)} is not one of the account's registered keys")
                return False
            refusal = await self.gw.account_refusal(self.login.user)
        except LookupFailed as e:
            self.reason = f"look-up failed: {e}"
            log.error("ssh: %s", e)
            return False
        if refusal:
            self.reason = refusal
            return False
        limit = self.gw.settings.max_connections_per_user
        if self.gw.per_user[self.login.user] >= limit:
            log.warning("ssh login refused: user=%s source=%s reason=%d connections open", self.login.user,
                        self.peer[0], limit)
            self._disconnect(asyncssh.DISC_TOO_MANY_CONNECTIONS,
                             f"you have {limit} SSH connections open already; close one first", False)
            return False
        self.reason = f"key {match.name!r} accepted"
        return True

    def auth_completed(self) -> None:
        self.authenticated = True
        self.gw.limiter.succeeded(self.peer[0], self.login.user)
        self.gw.per_user[self.login.user] += 1
        log.info("ssh login: %s from %s:%s (%s)", self.login.label, *self.peer, self.reason)

    # -- channels --------------------------------------------------------------------------------------
    def session_requested(self) -> GatewaySession:
        if self.sessions >= self.gw.settings.max_sessions_per_connection:
            raise asyncssh.ChannelOpenError(
                asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED,
                f"at most {self.gw.settings.max_sessions_per_connection} sessions per connection")
        self.sessions += 1
        return GatewaySession(self)

    def session_closed(self) -> None:
        self.sessions -= 1

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int):
        if not self.gw.settings.allow_port_forwarding:
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED,
                                            "port forwarding is turned off on this gateway")
        return self._open_forward(dest_host, dest_port)

    async def _open_forward(self, host: str, port: int) -> ForwardSession:
        try:
            target = await self.gw.resolve(self.login)
            stream = await target.open_port(host, port)
        except TargetError as e:
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, e.message) from None
        except LookupFailed as e:
            log.error("ssh: %s", e)
            raise asyncssh.ChannelOpenError(asyncssh.OPEN_CONNECT_FAILED, "TiHub did not answer") from None
        return ForwardSession(stream, f"{self.login.label} -> {host}:{port}")

    def server_requested(self, listen_host: str, listen_port: int) -> bool:
        return False  # ssh -R: nothing in a workspace should listen on the gateway's machine

    def unix_connection_requested(self, dest_path: str) -> bool:
        return False
