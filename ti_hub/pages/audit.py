"""The audit log (ADM1): every change operators made -- who, what, when -- newest first, filterable."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from tornado import web

from ..domain.errors import ValidationError
from ..ops import audit
from .base import PAGE, PageHandler
from .html import el, field, join, table

PAGE_SIZE = 100


class AuditPageHandler(PageHandler):
    page = PAGE["audit"]

    @web.authenticated
    async def get(self):
        filters = {k: self.get_query_argument(k, "").strip() for k in audit.FILTERS}
        try:
            offset = max(0, int(self.get_query_argument("offset", "0")))
        except ValueError:
            raise ValidationError("offset must be a whole number", field="offset") from None
        listed = await self.ti.db(audit.list_entries, self.actor, filters, PAGE_SIZE, offset, readonly=True)
        rows = [[e["at"], e["actor"], e["action"], e["target"],
                 el("code", json.dumps(e["detail"], sort_keys=True, separators=(", ", ": ")))]
                for e in listed["items"]]
        kept = {k: val for k, val in filters.items() if val}
        links = []
        if offset:
            links.append(el("a", "Newer", href=self.url("audit") + "?" + urlencode(
                {**kept, "offset": max(0, offset - PAGE_SIZE)}), rel="prev"))
        if offset + PAGE_SIZE < listed["total"]:
            links.append(el("a", "Older", href=self.url("audit") + "?" + urlencode(
                {**kept, "offset": offset + PAGE_SIZE}), rel="next"))
        body = [
            el("form", field("By", "actor", value=filters["actor"]),
               field("Action or object", "action", value=filters["action"]),
               field("Target", "target", value=filters["target"]),
               el("button", "Show", type="submit"), method="get", action=self.url("audit"), id="audit-filter",
               class_="inline"),
            el("p", f"{listed['total']} change(s) recorded" + (" matching" if kept else ""), id="audit-total"),
            table("audit-table", ["when (UTC)", "by", "action", "target", "what changed"], rows,
                  "No changes recorded yet."),
            el("p", *links, class_="pager") if links else "",
        ]
        self.show(join(body))
