"""dlq-bridge: dead letters in, actionable alerts out."""

__version__ = "0.5.0"
