"""Pure: the hub roles TiHub needs, and the names of its hub services. The hub's config loads them
(hub/config.py), the Helm chart's hub configuration too, and the People page shows them."""

from __future__ import annotations

from . import scopes as S

SERVICE = "ti"
SPAWNER_SERVICE = "ti-spawner"


def preset_roles() -> list[dict]:
    """The hub roles TiHub needs (also used by the Helm chart's hub configuration)."""
    return [
        # all seven permissions as a CEILING: the hub cannot change role assignments while it runs, so TiHub's own
        # roles and grants decide what each user may do within it (ti_hub/ops/grants.py; `ti role`)
        {"name": "user", "description": "TiHub preset role 'User' (the ceiling: TiHub's roles decide)",
         "scopes": ["self", f"access:services!service={SERVICE}", *S.PERMISSIONS]},
        {"name": "ti-admin", "description": "TiHub preset role 'System Admin'",
         "scopes": [*S.ADMIN_SCOPES, f"access:services!service={SERVICE}", "admin-ui", "admin:users",
                    "admin:servers", "admin:groups", "tokens"],
         "groups": [S.ADMIN_GROUP]},
        # read:roles:*: the People page shows which roles users and groups hold (ti_hub/pages/people.py)
        {"name": "ti-service", "scopes": ["list:users", "read:users", "list:groups", "read:groups",
                                          "read:roles:users", "read:roles:groups",
                                          # an admin's kill of a running workspace stops its server
                                          "servers",
                                          # People (ti_hub/ops/hubpeople.py): admins create, delete, demote
                                          # users and create their password accounts at /hub/ti-users (the
                                          # hub's POST/DELETE /users and PATCH admin need admin:users), and
                                          # create, rename, delete groups and change members (admin:groups)
                                          "admin:users", "admin:groups"],
         "services": [SERVICE]},
        {"name": "ti-spawner", "scopes": [S.ADMIT_WORKSPACES, f"access:services!service={SERVICE}"],
         "services": [SPAWNER_SERVICE]},
    ]
