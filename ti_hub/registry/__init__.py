"""Reading images' facts (version, size, creation time) from OCI registries: SPEC IMG3."""
