"""Workspaces: the TiSpawner mixin (admission through the ti service) and its local implementation."""
