"""Pure: failed-login limits, as token buckets on an injected clock.

Three buckets count a failed login: its source address's, the one of its account *from that address*, and its
account's across all addresses. A bucket gives back one token every ``refill_seconds`` up to its capacity; a
login is refused while one of its buckets is empty. The policy, and why:

* per source address (default 10): one address guessing at many accounts is stopped;
* per account and source (default 10): one address guessing at one account is stopped even when its own
  bucket is larger (many users behind one NAT), and it locks that account out *from that address only* -- an
  attacker at one address can no longer lock the owner out everywhere, which a bucket per account shared by
  all addresses did (10 failures from anywhere refused the owner's right key from everywhere);
* per account across addresses (default 100, a ceiling): guessing spread over many addresses is still bounded;
  an address the account logged in from successfully (within ``known_seconds``, remembered in memory) passes
  this ceiling, so even a distributed attack does not lock the owner out of the places they use.

Successful logins take nothing and mark their address as known to the account. Buckets that are full again
are forgotten, so memory stays bounded by the number of recent offenders (and by ``max_entries`` in any case).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class TokenBucket:
    capacity: float
    refill_seconds: float
    tokens: float
    updated: float

    @classmethod
    def full(cls, capacity: float, refill_seconds: float, now: float) -> TokenBucket:
        return cls(float(capacity), float(refill_seconds), float(capacity), now)

    def _refill(self, now: float) -> None:
        if now > self.updated:
            gained = (now - self.updated) / self.refill_seconds if self.refill_seconds > 0 else math.inf
            self.tokens = min(self.capacity, self.tokens + gained)
        self.updated = max(self.updated, now)

    def available(self, now: float) -> float:
        self._refill(now)
        return self.tokens

    def take(self, now: float) -> bool:
        """Take one token if there is one (True), else take nothing (False)."""
        self._refill(now)
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False

    def drain(self, now: float) -> None:
        """Take a token even when none is left (never below zero): every failure counts."""
        self._refill(now)
        self.tokens = max(0.0, self.tokens - 1)

    def wait_seconds(self, now: float) -> float:
        """Seconds until one token is available (0 when one is)."""
        self._refill(now)
        return 0.0 if self.tokens >= 1 else (1 - self.tokens) * self.refill_seconds

    def is_full(self, now: float) -> bool:
        return self.available(now) >= self.capacity


class Buckets:
    """Token buckets by key, created full on first use, forgotten when full again."""

    def __init__(self, capacity: int, refill_seconds: float, max_entries: int = 10_000):
        self.capacity, self.refill_seconds, self.max_entries = capacity, refill_seconds, max_entries
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def wait_seconds(self, key: str, now: float) -> float:
        b = self._buckets.get(key)
        return 0.0 if b is None else b.wait_seconds(now)

    def drain(self, key: str, now: float) -> None:
        b = self._buckets.pop(key, None) or TokenBucket.full(self.capacity, self.refill_seconds, now)
        b.drain(now)
        self._buckets[key] = b  # most recently used last
        if len(self._buckets) > self.max_entries:
            self.prune(now)

    def prune(self, now: float) -> None:
        for key in [k for k, b in self._buckets.items() if b.is_full(now)]:
            del self._buckets[key]
        while len(self._buckets) > self.max_entries:
            self._buckets.popitem(last=False)  # the least recently failed


class LoginLimiter:
    def __init__(self, per_source: int, per_user: int, refill_seconds: float,
                 clock: Callable[[], float] = time.monotonic, max_entries: int = 10_000,
                 per_account: int | None = None, known_seconds: float = 30 * 86400.0):
        """``per_user``: failures to one account from one address; ``per_account``: from all addresses (default
        ten times ``per_user``); ``known_seconds``: how long a successful login's address passes that ceiling."""
        self.clock = clock
        self.sources = Buckets(per_source, refill_seconds, max_entries)
        self.pairs = Buckets(per_user, refill_seconds, max_entries)
        self.accounts = Buckets(per_account if per_account is not None else 10 * per_user, refill_seconds,
                                max_entries)
        self.known_seconds, self.max_entries = known_seconds, max_entries
        self._known: OrderedDict[tuple[str, str], float] = OrderedDict()  # (account, source) -> known until

    @staticmethod
    def _pair(user: str, source: str) -> str:
        return f"{user}\0{source}"  # NUL: in neither a login name nor an address

    def known(self, source: str, user: str) -> bool:
        until = self._known.get((user, source))
        return until is not None and until > self.clock()

    def refusal(self, source: str, user: str | None = None) -> str | None:
        """Why a login from ``source`` (as ``user``, when known) is refused now, or None when it may go on."""
        now = self.clock()
        wait = self.sources.wait_seconds(source, now)
        if wait > 0:
            return f"too many failed logins from {source}; try again in {math.ceil(wait)} s"
        if user is not None:
            wait = self.pairs.wait_seconds(self._pair(user, source), now)
            if wait > 0:
                return f"too many failed logins to {user} from {source}; try again in {math.ceil(wait)} s"
            wait = self.accounts.wait_seconds(user, now)
            if wait > 0 and not self.known(source, user):
                return (f"too many failed logins to {user} from addresses it has not logged in from; try again in "
                        f"{math.ceil(wait)} s")
        return None

    def failed(self, source: str, user: str | None) -> None:
        now = self.clock()
        self.sources.drain(source, now)
        if user is not None:
            self.pairs.drain(self._pair(user, source), now)
            self.accounts.drain(user, now)

    def succeeded(self, source: str, user: str) -> None:
        """A login with the account's key: its address is one the owner uses."""
        self._known.pop((user, source), None)
        self._known[(user, source)] = self.clock() + self.known_seconds
        while len(self._known) > self.max_entries:
            self._known.popitem(last=False)  # the least recently used
