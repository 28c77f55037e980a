"""The `Resolve` item: "this dead job was retried by hand, close its incident" (docs/design.md, 5c).

The model only, below the sources and the sinks that make and send it; queueing it is
`bridge.delivery.resolve`.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from bridge.core.formats import unstamp
from bridge.core.items import item_id
from bridge.core.models import Severity

INCIDENT_KEY_CHARS = 255


def incident_key(job_id: str) -> str:
    """What a resolving sink's incident is known by: the job id, or `sha256:<hex>` of a longer one
    (PagerDuty's `dedup_key` holds at most 255 characters); a resolve names the same key."""
    if len(job_id) <= INCIDENT_KEY_CHARS:
        return job_id
    return "sha256:" + hashlib.sha256(job_id.encode()).hexdigest()


RESOLVE_TYPE = "dlq.resolve"
RESOLVE_PREFIX = '{"type":"dlq.resolve"'  # how `Resolve.model_dump_json()` starts (an alert never does)
Reason = Literal["retried", "deleted", "redriven"]


class Resolve(BaseModel):
    """One resolve for one sink queue (see module doc)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    type: Literal["dlq.resolve"] = "dlq.resolve"
    dedup_key: str  # exactly what the trigger carried (`incident_key(job_id)`)
    idempotency_key: str  # the trigger's Idempotency-Key, e.g. `billing:<jid>`
    digest: str = ""  # the trigger's raw digest (`DeadLetter.raw_digest`)
    reason: Reason = "redriven"
    severity: Severity = Severity.ERROR  # the trigger's severity: the resolve queues in the same band
    fingerprint: str = ""  # the dead letter's fingerprint, queue and cause: a grouped sink finds the job's group
    queue: str = ""
    cause: str = ""  # `bridge.intake.cause.cause_key` of the dead letter's error

    @property
    def ledger_key_part(self) -> str:
        return f"resolve:{self.idempotency_key}"

    def item_id(self, ms: int) -> str:
        """`<urgency>:<ms>:resolve:<idempotency key>:<digest>`: after its trigger, in the trigger's band."""
        return item_id(self.severity, ms, self.ledger_key_part, self.digest)


def parse_resolve(body: str) -> Resolve | None:
    """The Resolve in a queued item's body (of any record format); None when it is something else (an alert)."""
    body = unstamp(body)
    if not body.startswith(RESOLVE_PREFIX):
        return None
    try:
        return Resolve.model_validate_json(body)
    except (ValidationError, ValueError):
        return None
