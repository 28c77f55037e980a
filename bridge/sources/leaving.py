"""Jobs leaving an owner-held dead store: resolve their PagerDuty alert (docs/design.md, section 2b).

When a watched record (Sidekiq dead set, BullMQ failed set, RQ failed registry) is alerted to at
least one PagerDuty sink with `resolve_on_retry`, its cursor finish also *holds* it: the job id,
its score in the store, and a `LeaveNote` (which sinks, and the `Resolve` with the trigger's
dedup_key) go into `dlq_bridge:cursor:{<cursor>}:held` / `:held_notes`, in the same script as the
finish. Every `leave_check_s` each replica walks the held jobs page by page (ZSCAN) and asks the
store whether each is still there (one pipelined batch per page). A job gone from the store is
judged by its kind (`Judge`): retried or deleted by hand → its resolve goes into the cursor slot's
outbox in the same script that forgets the job, then to each sink's queue like any hand-off; trimmed
by the producer (or impossible to tell apart from a trim) → forgotten without a resolve. That script
checks the job is still held at the score seen, so one caller in the fleet takes each departure; a
crash after it leaves the resolve in the outbox, which the hand-off sweep forwards.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, cast

import redis.asyncio as aioredis

from bridge.core.models import Alert
from bridge.core.resolves import Reason, Resolve, incident_key
from bridge.intake.cause import cause_key
from bridge.stores.cursor import Position


@dataclass(frozen=True)
class LeaveNote:
    """What resolves one alerted job's alert when it leaves the store."""

    sinks: tuple[str, ...]
    resolve: Resolve

    def encode(self) -> str:
        return json.dumps({"sinks": list(self.sinks), "resolve": self.resolve.model_dump(mode="json")})

    @classmethod
    def decode(cls, raw: str) -> LeaveNote:
        data = json.loads(raw)
        return cls(tuple(str(s) for s in data["sinks"]), Resolve.model_validate(data["resolve"]))


class NamedSink(Protocol):
    """A `[[sinks]]` table, by its name."""

    @property
    def name(self) -> str: ...


class Routed(Protocol):
    """A route as the leave check sees it (`bridge.delivery.send.Route`)."""

    @property
    def settings(self) -> NamedSink: ...

    @property
    def resolves(self) -> bool: ...


def leave_note(alert: Alert, routes: Sequence[Routed]) -> LeaveNote | None:
    """The note for an alert routed to `routes`; None when no routed sink resolves (nothing is held)."""
    sinks = tuple(r.settings.name for r in routes if r.resolves)
    if not sinks or alert.is_test:
        return None
    dl = alert.dead_letter
    resolve = Resolve(
        dedup_key=incident_key(dl.job_id),
        idempotency_key=alert.idempotency_key,
        digest=dl.raw_digest,
        reason="retried",
        severity=alert.severity,
        fingerprint=dl.fingerprint,
        queue=dl.queue,
        cause=cause_key(dl.last_error, dl.parse_error),
    )
    return LeaveNote(sinks, resolve)


class Judge(Protocol):
    """Why a held job is no longer in the store: a `Reason` to resolve, or None (trimmed, or unknown)."""

    async def why_gone(self, store: aioredis.Redis, key: str, left: Position, now_s: float) -> Reason | None: ...


async def older_job_present(store: aioredis.Redis, key: str, left: Position, members_are_ids: bool) -> bool:
    """True when the store still holds a job ranked below the departed one (a lower score, or the same
    score and a member sorting first: Redis's order, which the producers' trims follow).

    Sidekiq's dead-set caps, BullMQ's removeOnFail and RQ's registry expiry all trim from the
    lowest rank up, so a departed job with an older job still present was not trimmed. Where the
    member is the job's JSON (Sidekiq), a job dead at the very same score does not count.
    """
    rows = cast(list[tuple[bytes, float]], await store.zrange(key, 0, 0, withscores=True))
    if not rows:
        return False
    member, score = rows[0][0], float(rows[0][1])
    if score != float(left.score):
        return score < float(left.score)
    return members_are_ids and member < left.member_id.encode()
