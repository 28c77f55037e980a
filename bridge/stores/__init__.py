"""The stores: each Redis structure the bridge writes has one module here that reads and writes it.

`handoff` (archive, entry records, outbox; the hand-off script), `sink_queue` (each sink's durable
queue), `groups` (with `group_scripts`, `group_reply`), `ledger` (delivered keys), `limits` and
`hold` (fleet-wide rates, with `pacing` as the in-process fallback), `undeliverable_records`,
`summary_cache`, `gateway_gate` (breaker, pause, budget), `silences`, `audit`, `search_index`,
`cursor` (watched stores), `requeue` (the redrive script). Key names are `keys`, which only the
stores import (an import-linter contract); the rest of the bridge calls the stores' methods.
See docs/design.md, section 2, for every key.
"""
