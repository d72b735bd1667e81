"""Who is asking: a hub user (or the hub's spawner service) with the scopes of their token."""

from __future__ import annotations

from dataclasses import dataclass, field

from . import scopes as S
from . import states as st
from .errors import Forbidden

# how much of a job a caller sees (Actor.job_view)
FULL, SUMMARY = "full", "summary"


@dataclass(frozen=True)
class Actor:
    name: str
    scopes: frozenset[str] = field(default_factory=frozenset)
    groups: tuple[str, ...] = ()
    kind: str = "user"  # user | service
    roles: tuple[str, ...] = ()  # the TiHub roles a user holds (ops/grants.py effective_actor)

    def can(self, scope: str) -> bool:
        return S.has(self.scopes, scope)

    def need(self, scope: str, what: str = "") -> None:
        if not self.can(scope):
            raise Forbidden(f"{what or 'this'} needs the permission {scope!r}: {S.PERMISSIONS.get(scope, '')}".strip())

    @property
    def is_admin(self) -> bool:
        return self.can(S.MANAGE_VC) and self.can(S.MANAGE_USERS)

    @property
    def sees_others_jobs(self) -> bool:
        """May list other users' jobs at all (``?all=1``, ``?owner=``, everyone's queue)."""
        return self.can(S.VIEW_ALL_JOBS) or self.can(S.MANAGE_ALL_JOBS)

    def job_view(self, owner: str, status: str) -> str | None:
        """SPEC JOB5: how much of a job this caller sees.

        FULL (everything the API shows: command, environment names and values, volumes, ports, endpoints,
        history, logs, metrics) for the owner and for holders of ``jobs:manage-all``; SUMMARY (name, owner,
        state, resources, queue position, estimated start and reason; ``jobs.render_summary``) of another
        user's job while it waits -- queued, scheduling or paused -- for holders of ``jobs:view-all``;
        otherwise None: the job is not there for this caller (404, its existence not told). ``view-all`` never
        reaches running or finished jobs of others: what they run, with which secrets, is their owner's.
        """
        if owner == self.name or self.can(S.MANAGE_ALL_JOBS):
            return FULL
        if self.can(S.VIEW_ALL_JOBS) and status in st.SHOWN_TO_OTHERS:
            return SUMMARY
        return None

    def may_manage_job(self, owner: str) -> bool:
        return owner == self.name or self.can(S.MANAGE_ALL_JOBS)
