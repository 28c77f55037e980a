"""The DLQ console: read-side service, actions and the `/api/v1` JSON API (docs/design.md)."""
