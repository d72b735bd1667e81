"""Old path of ti_hub.hub.oauth (moved in issue 32), kept so configs that name e.g.
``c.JupyterHub.authenticator_class = "ti_hub.oauth.TiGitLabOAuthenticator"`` still work. Name ti_hub.hub.oauth
instead."""

import warnings

from .hub.oauth import (TiAzureAdOAuthenticator, TiGitHubOAuthenticator, TiGitLabOAuthenticator,  # noqa: F401
                        TiOIDCAuthenticator)

warnings.warn("ti_hub.oauth moved to ti_hub.hub.oauth; name the class as ti_hub.hub.oauth.<Class>", DeprecationWarning,
              stacklevel=2)
