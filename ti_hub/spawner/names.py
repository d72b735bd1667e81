"""Workspace names: one rule, checked before the hub stores a server.

A workspace's name is its JupyterHub server name and its TiHub job name, so it must pass both rules: the hub's for
new server names (``jupyterhub.slugs.is_valid_safe_slug``: 1-30 lowercase letters, digits and single hyphens,
beginning with a letter, ending with a letter or digit) and TiHub's for names (4-63 letters, digits, '-' and '_').
Before this check the hub created the server row first and TiHub refused it after: ``dev_box`` got the hub's bare
"Invalid server_name", and ``ab`` left a row on the home page that could never start.
"""

from __future__ import annotations

import re

from jupyterhub.slugs import is_valid_safe_slug

from ..domain import validation as v
from .messages import refusal

MIN_LENGTH, MAX_LENGTH = 4, 30
RULE = (f"{MIN_LENGTH}-{MAX_LENGTH} characters: lowercase letters, digits and single hyphens ('-'), beginning "
        "with a letter and ending with a letter or digit")
# the same rule as a regex, for the home page's check as the name is typed (templates/home.html)
PATTERN = r"^(?=.{%d,%d}$)[a-z][a-z0-9]*(-[a-z0-9]+)*$" % (MIN_LENGTH, MAX_LENGTH)
_RE = re.compile(PATTERN[:-1] + r"\Z")


def problem(name: str) -> str | None:
    """A plain sentence when ``name`` cannot name a workspace; None when it can."""
    if (isinstance(name, str) and _RE.match(name) and is_valid_safe_slug(name)
            and v.NAME_RE.match(name)):
        return None
    return f"{name!r} cannot name a workspace: workspace names are {RULE}."


def install() -> None:
    """Have the hub refuse a new server whose name cannot name a workspace, before it stores the server: every
    way in (the home page's Add, /hub/spawn/USER/NAME, the REST API's POST/PUT/PATCH of a server) asks
    ``_check_named_server_request`` first. Servers the hub already has keep working (or failing) as before."""
    from jupyterhub.handlers.base import BaseHandler

    original = BaseHandler._check_named_server_request
    if getattr(original, "_ti_names", False):
        return

    async def check(self, user, server_name, display_name, check_limit=True):
        if server_name and server_name not in user.orm_spawners:
            said = problem(server_name)
            if said:
                raise refusal(400, said)
        return await original(self, user, server_name, display_name, check_limit=check_limit)

    check._ti_names = True
    BaseHandler._check_named_server_request = check
