"""The sections of the configuration; `bridge.settings` assembles them into `Settings` (docs/design.md, section 6)."""
