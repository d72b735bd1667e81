"""Schemas of the operators' API: the audit log (ADM1)."""

from __future__ import annotations

from ..contract import Param
from .common import ANY_OBJECT, ID, STR, TIME, answer, page, page_of, string

AUDIT_ENTRY = answer({"id": ID, "at": TIME, "actor": STR, "action": STR, "target": STR, "detail": ANY_OBJECT},
                     title="AuditEntry", description="one change an operator made: who, what, when")
AUDIT_PAGE = page_of(AUDIT_ENTRY)
AUDIT_QUERY = {"actor": Param(string(255), "only changes made by this user"),
               "action": Param(string(63), "an action (vc.create) or an object (vc)"),
               "target": Param(string(255), "only changes of this object"), **page()}
