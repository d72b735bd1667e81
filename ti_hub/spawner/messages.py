"""What the spawn-pending page says (pure): progress messages in plain words, and why a start failed.

The ti service's reasons are written for a job's history ("admitted: starting on vm"); the spawner used to prefix
them again ("admitted: admitted: starting on vm"). Here they become sentences: "Waiting in the queue: 2 jobs
ahead (...)", "Admitted, starting on vm". ``refusal`` is how a refused request reaches the hub's pages as a
sentence (the spawner and the workspace-name check both raise it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html import escape
from typing import Any

from tornado import web

from ..domain.scrub import SECRET, scrub

# lines of the server's log a failed start shows, and the most characters of each
TAIL_LINES = 12
LINE_CHARS = 300
# variables whose values are credentials (a name containing one of these), hidden wherever they appear in the log
SECRET_ENV_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH", "COOKIE")
# "token abc", "Bearer abc", "token=abc", "password: abc" written out in a line
_SECRET_WORD_RE = re.compile(r"(?P<name>\b(?:token|bearer|password|passwd|secret|api[_-]?key)\b['\"]?\s*[:= ]\s*['\"]?)"
                             r"(?P<value>[^\s'\",;&]{6,})", re.IGNORECASE)


def _sentence(text: str) -> str:
    text = text.strip()
    return text[:1].upper() + text[1:]


def admitted(reason: str) -> str:
    """'admitted: starting on vm' -> 'Admitted, starting on vm'."""
    rest = re.sub(r"^admitted\s*[:,]?\s*", "", reason or "", flags=re.IGNORECASE).strip()
    return f"Admitted, {rest}" if rest else "Admitted"


def queued(ws: dict[str, Any]) -> str:
    """'Waiting in the queue: 2 jobs ahead (waiting for 1 x demo-gpu in pool default: 0 demo-gpu free)'."""
    q = ws.get("queue") or {}
    ahead = q.get("ahead")
    if ahead is None and isinstance(q.get("position"), int):
        ahead = q["position"] - 1
    reason = re.sub(r"^(queued|waiting)\s*:\s*", "", (ws.get("reason") or "").strip(), flags=re.IGNORECASE)
    where = "first in the queue" if ahead == 0 else f"{ahead} job{'s' if ahead != 1 else ''} ahead" \
        if isinstance(ahead, int) else ""
    said = "Waiting in the queue" + (f": {where}" if where else "")
    return f"{said} ({reason})" if reason else said


def warning(text: str) -> str:
    return f"Warning: {text}"


def secret_values(env: dict[str, str]) -> list[str]:
    """The values of ``env`` that are credentials (by the variable's name), longest first."""
    found = {val for key, val in env.items()
             if isinstance(val, str) and len(val) >= 6 and any(w in key.upper() for w in SECRET_ENV_WORDS)}
    return sorted(found, key=len, reverse=True)


def scrub_log(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without credentials: the given values (the server's token, secret-named variables), secret-named
    URL parameters, and values written after 'token', 'password', 'Bearer' and the like."""
    for value in secrets:
        if value:
            text = text.replace(value, SECRET)
    text = scrub(text)
    return _SECRET_WORD_RE.sub(lambda m: m.group("name") + SECRET, text)


def tail_lines(text: str, n: int = TAIL_LINES) -> list[str]:
    """The last ``n`` non-empty lines of ``text``, each cut to LINE_CHARS."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    return [ln if len(ln) <= LINE_CHARS else ln[:LINE_CHARS] + " …" for ln in lines[-n:]]


def start_failure(what: str, log_tail: str, secrets: Iterable[str] = ()) -> tuple[str, str]:
    """(text, html) of a failed start: ``what`` happened, then the last lines of the server's log, scrubbed."""
    lines = tail_lines(scrub_log(log_tail, list(secrets)))
    if not lines:
        text = f"{what}. Its log is empty."
        return text, f"<p>{escape(text)}</p>"
    text = f"{what}. The last lines of its log:\n" + "\n".join(lines)
    html = (f"<p>{escape(what)}. The last lines of its log:</p>"
            f"<pre class=\"ti-start-log\">{escape(chr(10).join(lines))}</pre>")
    return text, html


def refusal(status: int, text: str, html: str | None = None) -> web.HTTPError:
    """An HTTPError the hub's pages show as ``text`` alone (not "HTTP 400: Bad Request (text)"); the spawn page's
    progress shows ``html`` instead when given (escaped by the caller)."""
    err = web.HTTPError(status, text)
    err.jupyterhub_message = text
    if html:
        err.jupyterhub_html_message = html
    return err
