"""The `ti` command line: a client of the ti service's REST API (docs/api.md)."""
