"""The ti service's client of the hub: its REST API with the service's own token (api), the names of users and groups
the hub knows (names), and the OAuth login of the service's pages and API (oauth)."""
