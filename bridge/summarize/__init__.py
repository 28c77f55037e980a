"""Summaries: OpenClaw, the cache, or the static fallback."""
