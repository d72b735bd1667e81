"""The ti service process (hub-managed): API, scheduler loop, backend."""
