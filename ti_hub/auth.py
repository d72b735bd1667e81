"""Old path of ti_hub.hub.auth (moved in issue 32), kept so configs that name
``c.JupyterHub.authenticator_class = "ti_hub.auth.TiAuthenticator"`` still work. Name ti_hub.hub.auth instead."""

import warnings

from .hub.auth import TiAuthenticator  # noqa: F401

warnings.warn("ti_hub.auth moved to ti_hub.hub.auth; name ti_hub.hub.auth.TiAuthenticator", DeprecationWarning,
              stacklevel=2)
