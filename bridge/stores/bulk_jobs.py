"""The console's bulk actions in Redis (`dlq_bridge:console:bulk:{<id>}` + `:items`, `:tried`, `:lease`);
docs/design.md, section "Console and JSON API" (bulk actions: bridge.console.bulk)."""

from __future__ import annotations

from bridge.stores import keys


def bulk_key(bulk_id: str, part: str = "") -> str:
    """`dlq_bridge:console:bulk:{<id>}` (+ `:<part>`): one slot per bulk action (a cluster's MULTI)."""
    return f"{keys.PREFIX}:console:bulk:{{{bulk_id}}}" + (f":{part}" if part else "")
