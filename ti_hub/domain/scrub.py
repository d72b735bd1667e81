"""Pure: credentials out of a text (a URI, a log line): the value of every credential-named query parameter becomes
[secret]. The ti service's access log (service/accesslog.py) and a failed start's log tail (spawner/messages.py)
use it."""

from __future__ import annotations

import re

# parameters whose values are credentials (a name *containing* one of these counts, as in JupyterHub's log)
SECRET_PARAMS = ("token", "auth", "key", "code", "state", "_xsrf", "password", "secret")
# a secret-named parameter anywhere in a text: a URI, or a log line that contains one
_PARAM_RE = re.compile(r"(?P<name>[?&;](?:[^=&\s;#]*?(?:" + "|".join(map(re.escape, SECRET_PARAMS)) +
                       r")[^=&\s;#]*)=)(?P<value>[^&\s;#'\")]*)", re.IGNORECASE)
SECRET = "[secret]"


def scrub(text: str) -> str:
    """``text`` with the value of every credential-named query parameter replaced by [secret]."""
    if "=" not in text:
        return text
    return _PARAM_RE.sub(lambda m: m.group("name") + SECRET, text)
