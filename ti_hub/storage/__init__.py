"""Volume drivers: where a volume's bytes live (directories locally, PVCs on Kubernetes)."""
