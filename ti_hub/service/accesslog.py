"""The ti service's access log, without the credentials a URL may carry.

A hub token may come as ``?token=`` (HubAuth accepts it, and the endpoints of a job are opened that way), and the
OAuth callback's URL carries the login's ``code`` and ``state``. Tornado logs every request's URI whole, and so
does its warning for a refused request and its report of an uncaught exception: the service's log (the hub's
log file, where an administrator's eyes and log shippers go) would hold working tokens. ``scrub`` replaces the
values; the access log line is written with it, and a logging filter does the same for tornado's other lines.
"""

from __future__ import annotations

import logging
from typing import Any

from ..domain.scrub import scrub
from ..metrics.process import request_done

access_log = logging.getLogger("tornado.access")


def log_request(handler: Any) -> None:
    """Tornado's access log line (status, method, URI, remote address, time), with the URI scrubbed."""
    status = handler.get_status()
    level = logging.INFO if status < 400 else logging.WARNING if status < 500 else logging.ERROR
    request = handler.request
    access_log.log(level, "%d %s %s (%s) %.2fms", status, request.method, scrub(request.uri), request.remote_ip,
                   1000.0 * request.request_time())
    request_done(handler)  # the latency histogram, by route pattern (metrics/process.py)


class ScrubFilter(logging.Filter):
    """Rewrites a record's message when it would show a credential (tornado's warnings and tracebacks print
    the request's URI)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a broken record is the logging module's to report
            return True
        clean = scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        return True


def install(loggers: tuple[str, ...] = ("tornado.access", "tornado.application", "tornado.general")) -> None:
    """Once per process; idempotent."""
    for name in loggers:
        lg = logging.getLogger(name)
        if not any(isinstance(f, ScrubFilter) for f in lg.filters):
            lg.addFilter(ScrubFilter())
