"""HubOAuth whose login state travels sealed in the state parameter instead of one process's memory.

With several API processes (TiService.api_processes) a browser's OAuth callback may reach another process
than the one that sent it to the hub; HubOAuth keeps the state (next URL, PKCE code verifier) in memory.
Sealing it with the service's Fernet key lets any process finish the login, and the verifier stays secret.
"""

from __future__ import annotations

import json

from cryptography.fernet import InvalidToken
from jupyterhub.services.auth import HubOAuth
from traitlets import Any, Integer

STATE_TTL = 600


class SealedStateHubOAuth(HubOAuth):
    state_key = Any(help="The Fernet that seals OAuth state.")
    state_ttl = Integer(STATE_TTL, help="Seconds a login may take between leaving and coming back.")

    def generate_state(self, next_url=None, **extra_state):
        state = {"next_url": next_url, **extra_state}
        return self.state_key.encrypt(json.dumps(state).encode()).decode()

    def _decode_state(self, state_id, /):
        if not state_id:
            return {}
        try:
            return json.loads(self.state_key.decrypt(state_id.encode(), ttl=self.state_ttl))
        except (InvalidToken, ValueError, TypeError):
            return {}

    def clear_oauth_state(self, state_id):
        pass  # nothing is kept; the hub accepts each code once and the seal expires

