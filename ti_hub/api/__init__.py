"""Tornado handlers of the REST API, by resource."""
