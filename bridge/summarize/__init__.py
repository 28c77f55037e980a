"""Summaries: DeadLetter → Summary, from the OpenClaw gateway, the cache, or the static fallback.

`openclaw_summarizer` (coalesce → cache → gate → gateway → salvage, else fallback), `subject` (one call's
subject: a failure or a shared cause), `openclaw` (the gateway request), `prompt`, `reply` and
`salvage` (reading and repairing the model's reply), `fallback` (the static summary), `runbooks`
(the catalogue), `factory` (building it from settings) and `summarizer` (the Summarizer protocol). The
cache and the fleet-wide gate keep their state in the stores.
"""
