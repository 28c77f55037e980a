"""clients."""
