"""Resolve items: "this dead job was retried by hand, close its incident" (docs/design.md, section 5c).

A resolve travels through the same durable sink queue as an alert (`bridge.stores.sink_queue`), so
the worker's lease, the fleet-wide pacing, 429/503 retries with Retry-After, the attempt budget
and the undeliverable store all apply. Its body is a `Resolve` JSON object (`"type":
"dlq.resolve"`), told apart from an alert by that field. It is queued for every sink whose plug-in
`resolves` (PagerDuty with `resolve_on_retry`: an Events API v2 `event_action: "resolve"` with the
trigger's `dedup_key`; Alertmanager with `resolve_on_retry`: the alert posted again, ended); no other sink
gets one.

Once per trigger: the ledger key of a resolve is `dlq_bridge:delivered:{<sink>}:resolve:<idempotency
key>:<digest>`, the trigger's own ledger key with `resolve:` in front of the idempotency key. Two
replicas (or one replica and a restart) enqueuing the same resolve send it once; a job that dies
again, is alerted again and is retried again gets a new digest, so a new resolve.
"""

from __future__ import annotations

import redis.asyncio as redis

from bridge.core.items import now_ms
from bridge.core.models import Severity
from bridge.core.resolves import RESOLVE_PREFIX, RESOLVE_TYPE, Reason, Resolve, parse_resolve
from bridge.stores.sink_queue import SinkQueue

__all__ = ["RESOLVE_PREFIX", "RESOLVE_TYPE", "Reason", "Resolve", "enqueue_resolve", "parse_resolve"]


async def enqueue_resolve(
    client: redis.Redis,
    sink: str,
    dedup_key: str,
    *,
    idempotency_key: str | None = None,
    digest: str = "",
    reason: Reason = "redriven",
    severity: Severity = Severity.ERROR,
    fingerprint: str = "",
    queue: str = "",
    cause: str = "",
) -> str:
    """Queue a PagerDuty `resolve` of `dedup_key` on `sink`'s durable queue; returns the item id.

    Durable once this returns (one script on the sink's `{<sink>}` slot). The sink's worker,
    on whichever replica takes the item, sends `event_action: "resolve"` with `dedup_key` if
    the sink is a PagerDuty sink with `resolve_on_retry = true` (the default) and drops the
    item otherwise, so callers need not know the sink's type or settings. It is sent at most
    once per (sink, idempotency key, digest), however often and by however many replicas it is
    enqueued, and is retried on 429/5xx (Retry-After honoured) like any alert.

    From a `DeadLetter` `dl` whose alert went to `sink`:

        enqueue_resolve(client, sink, incident_key(dl.job_id),
                        idempotency_key=dl.idempotency_key, digest=dl.raw_digest,
                        fingerprint=dl.fingerprint, queue=dl.queue, reason="redriven",
                        cause=cause_key(dl.last_error, dl.parse_error))

    `fingerprint`, `queue` and `cause` matter on a grouped sink (`group_by = "fingerprint" |
    "queue" | "cause"`): there the incident is the group's, and it is resolved (with the group's
    dedup key) once every job of the group has been redriven or has left its store (without
    them, a grouped sink drops the resolve). `severity` orders the item
    among the sink's queued alerts (give the trigger's, so the resolve queues behind it).
    """
    resolve = Resolve(
        dedup_key=dedup_key,
        idempotency_key=idempotency_key or dedup_key,
        digest=digest,
        reason=reason,
        severity=severity,
        fingerprint=fingerprint,
        queue=queue,
        cause=cause,
    )
    ident = resolve.item_id(now_ms())
    await SinkQueue(client, sink).put(ident, resolve.model_dump_json())
    return ident
