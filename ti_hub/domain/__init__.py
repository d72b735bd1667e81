"""Pure domain rules: validation, job specs, quotas and mount rules (no I/O)."""
