"""Pure: failed-login limits per source address and per account, as token buckets on an injected clock.

Each failed login takes one token from the bucket of its source address and one from the bucket of the account
it tried; a bucket gives back one token every ``refill_seconds`` up to its capacity. A login is refused while
either bucket is empty. Successful logins take nothing. Buckets that are full again are forgotten, so memory
stays bounded by the number of recent offenders (and by ``max_entries`` in any case).
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
                 clock: Callable[[], float] = time.monotonic, max_entries: int = 10_000):
        self.clock = clock
        self.sources = Buckets(per_source, refill_seconds, max_entries)
        self.users = Buckets(per_user, refill_seconds, max_entries)

    def refusal(self, source: str, user: str | None = None) -> str | None:
        """Why a login from ``source`` (as ``user``, when known) is refused now, or None when it may go on."""
        now = self.clock()
        wait = self.sources.wait_seconds(source, now)
        if wait > 0:
            return f"too many failed logins from {source}; try again in {math.ceil(wait)} s"
        if user is not None:
            wait = self.users.wait_seconds(user, now)
            if wait > 0:
                return f"too many failed logins to {user}; try again in {math.ceil(wait)} s"
        return None

    def failed(self, source: str, user: str | None) -> None:
        now = self.clock()
        self.sources.drain(source, now)
        if user is not None:
            self.users.drain(user, now)
