"""Execution backends: where and how a job's instances actually run.

``base`` defines the interface, ``envs`` and ``outcome`` are pure helpers every backend shares, and
``local`` runs jobs as processes on this machine. Nothing is imported eagerly, so light users (the
local supervisor process) do not pay for traitlets.
"""
