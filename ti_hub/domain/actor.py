"""Who is asking: a hub user (or the hub's spawner service) with the scopes of their token."""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import scopes as S
from .errors import Forbidden


@dataclass(frozen=True)
class Actor:
    name: str
    scopes: frozenset[str] = field(default_factory=frozenset)
    groups: tuple[str, ...] = ()
    kind: str = "user"  # user | service

    def can(self, scope: str) -> bool:
        return S.has(self.scopes, scope)

    def need(self, scope: str, what: str = "") -> None:
        if not self.can(scope):
            raise Forbidden(f"{what or 'this'} needs the permission {scope!r}: {S.PERMISSIONS.get(scope, '')}".strip())

    @property
    def is_admin(self) -> bool:
        return self.can(S.MANAGE_VC) and self.can(S.MANAGE_USERS)

    def may_view_job(self, owner: str) -> bool:
        return owner == self.name or self.can(S.VIEW_ALL_JOBS) or self.can(S.MANAGE_ALL_JOBS)

    def may_manage_job(self, owner: str) -> bool:
        return owner == self.name or self.can(S.MANAGE_ALL_JOBS)
