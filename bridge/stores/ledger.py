"""The per-sink delivery ledger (docs/design.md, section 2): what reached a sink.

One key per (sink, alert): `dlq_bridge:delivered:{<sink>}:<idempotency key>:<digest>`
(or a Notification's ledger key: `notification_key`; a resolve's: `resolve_key`, `resolve:<idempotency
key>`). It goes through two states:

    (absent) --SET NX PX--> "sending:<owner>:<token>" --2xx--> {"at": ...} (TTL ledger_ttl_s)
                                     |--final failure / cancel--> (deleted by its owner)
                                     |--owner killed -9---------> (expires: reservation_ttl_s)

A sender reserves before its first attempt. While another owner holds the
reservation, a second sender (e.g. the consumer that reaped a live consumer's
entry) waits: it returns "already delivered" once the mark appears, or
reserves and sends itself once the reservation is released or has expired. So
a reaped-but-alive consumer and its replacement never both send, and a sender
killed mid-send holds the job up by at most `reservation_ttl_s` (its owner
refreshes the TTL while it is alive). A value without the `sending:` prefix
is a delivery mark, including marks written before reservations existed.

A restart after kill -9 keeps its consumer id (and `recover_own` gives it its
own entries back at once): a reservation of the same consumer id made by
another process (`sending:<consumer>:<process>:<nonce>`) can only be the dead
former self, so it is taken over at once instead of waiting for it to expire.
Consumer ids are unique per live replica (docs/design.md, section 2).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from types import TracebackType

import redis.asyncio as redis
from redis.asyncio.client import Pipeline
from redis.exceptions import RedisError

from bridge.core.models import Alert, Notification
from bridge.core.resolves import Resolve
from bridge.stores import keys
from bridge.stores.sink_queue import Reserve

log = logging.getLogger(__name__)

MARK_TRIES = 3
MARK_PAUSE_S = 0.2
POLL_S = 0.5  # how often a waiting sender looks at someone else's reservation
SENDING = "sending:"
PROCESS = uuid.uuid4().hex[:12]  # this process, in reservation tokens (constant once imported)
_ERRORS = (RedisError, OSError, TimeoutError)

# Only the owner (exact token) may extend or drop its reservation.
REFRESH = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
TAKE_OVER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return false
"""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def resolve_key(sink: str, resolve: Resolve) -> str:
    """The ledger key of a resolve: the trigger's, `resolve:` in front of its idempotency key."""
    return keys.delivered(sink, resolve.ledger_key_part, resolve.digest)


def notification_key(sink: str, notification: Notification) -> str:
    """The ledger key of a group notification (`Notification.ledger_key`, its first alert's digest)."""
    return keys.delivered(sink, notification.ledger_key, notification.first.dead_letter.raw_digest)


class Ledger:
    """Reserves, marks and reads deliveries; Redis errors propagate to the caller."""

    def __init__(
        self,
        client: redis.Redis,
        ttl_s: int,
        *,
        reservation_ttl_s: float = 30.0,
        owner: str = "bridge",
        poll_s: float = POLL_S,
    ) -> None:
        self._redis = client
        self._ttl_s = ttl_s
        self.reservation_ttl_s = reservation_ttl_s
        self._owner = owner
        self._poll_s = poll_s
        self._refresh = client.register_script(REFRESH)
        self._take_over = client.register_script(TAKE_OVER)
        self._release = client.register_script(RELEASE)

    @property
    def ttl_s(self) -> int:
        return self._ttl_s

    @staticmethod
    def mark_value() -> str:
        """What a delivery mark holds (the time of the 2xx)."""
        return json.dumps({"at": time.time()})

    def reserve_spec(self, sink: str) -> Reserve:
        """For `SinkQueue.take(reserve=...)`: reservations made by the take script, tokens of this owner."""
        head = f"{SENDING}{self._owner}:{PROCESS}:{uuid.uuid4().hex[:12]}"
        return Reserve(keys.delivered_prefix(sink), head, max(1, round(self.reservation_ttl_s * 1000)))

    def reserved(self, key: str, token: str) -> Reservation:
        """A reservation the take script already made (`token` holds `key`)."""
        return Reservation(self, key, token)

    @staticmethod
    def item_key(sink: str, item: str) -> str:
        """The ledger key of a queued item (`<urgency>:<ms>:<idempotency key>:<digest>`)."""
        return keys.delivered_prefix(sink) + item.split(":", 2)[2]

    @staticmethod
    def key(sink: str, alert: Alert) -> str:
        return keys.delivered(sink, alert.idempotency_key, alert.dead_letter.raw_digest)

    @staticmethod
    def queue_mark(pipe: Pipeline, sink: str, alert: Alert) -> None:
        """Queue a read of the alert's ledger value for `sink` (one GET reply: a mark, a reservation, None)."""
        pipe.get(Ledger.key(sink, alert))

    async def delivered(self, sink: str, alert: Alert) -> bool:
        """True once the alert is marked delivered to `sink` (a reservation is not)."""
        value = await self._redis.get(self.key(sink, alert))
        return value is not None and not _is_reservation(value)

    async def reserve(self, key: str) -> Reservation | None:
        """Reserve `key` for one send; None when it is already delivered.

        Waits while another owner holds it (see the module docstring).
        """
        token = f"{SENDING}{self._owner}:{PROCESS}:{uuid.uuid4().hex[:12]}"
        ttl_ms = max(1, round(self.reservation_ttl_s * 1000))
        while True:
            if await self._redis.set(key, token, nx=True, px=ttl_ms):
                return Reservation(self, key, token)
            value = await self._redis.get(key)
            if value is not None and not _is_reservation(value):
                return None
            if value is not None and self._former_self(value):
                if await self._take_over(keys=[key], args=[value, token, ttl_ms]):
                    log.info("ledger: took over %s from this consumer's previous process", key)
                    return Reservation(self, key, token)
            elif value is not None:
                await asyncio.sleep(self._poll_s)

    def _former_self(self, value: bytes | str) -> bool:
        """A reservation of this consumer id made by another (so dead) process."""
        text = value.decode(errors="replace") if isinstance(value, bytes) else value
        parts = text[len(SENDING):].split(":")
        return len(parts) == 3 and parts[0] == self._owner and parts[1] != PROCESS

    async def mark(self, sink: str, alert: Alert) -> None:
        """Record a success for (sink, alert) whoever holds it (a few shielded tries)."""
        await self.mark_key(self.key(sink, alert))

    async def mark_key(self, key: str) -> None:
        await asyncio.shield(self._mark_with_tries(key))

    async def _mark_with_tries(self, key: str) -> None:
        value = self.mark_value()
        for attempt in range(MARK_TRIES):
            try:
                await self._redis.set(key, value, ex=self._ttl_s)
                return
            except RedisError:
                if attempt == MARK_TRIES - 1:
                    raise
                await asyncio.sleep(MARK_PAUSE_S * (attempt + 1))

    async def refresh(self, key: str, token: str) -> bool:
        ttl_ms = max(1, round(self.reservation_ttl_s * 1000))
        return bool(await self._refresh(keys=[key], args=[token, ttl_ms]))

    async def release(self, key: str, token: str) -> None:
        await self._release(keys=[key], args=[token])


class Reservation:
    """One owner's right to send `key`: refreshed while held, released unless marked."""

    def __init__(self, ledger: Ledger, key: str, token: str) -> None:
        self.key = key
        self._ledger = ledger
        self._token = token
        self._marked = False
        self._refresher: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    async def __aenter__(self) -> Reservation:
        """The refresh runs on a timer: a send shorter than a third of the TTL costs no task."""
        self._schedule()
        return self

    def _schedule(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(self._ledger.reservation_ttl_s / 3, self._due)

    def _due(self) -> None:
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.ensure_future(self._refresh_once())
        self._schedule()

    async def __aexit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
        if not self._marked:
            await asyncio.shield(self._release_quietly())

    async def mark(self) -> None:
        """The send succeeded: the reservation becomes the delivery mark."""
        await self._ledger.mark_key(self.key)
        self._marked = True

    def mark_later(self) -> str:
        """The send succeeded and the caller writes the mark (with its queue ack): keep the reservation."""
        self._marked = True
        return self.key

    async def _refresh_once(self) -> None:
        try:
            if not await self._ledger.refresh(self.key, self._token):
                log.warning("ledger reservation %s lapsed while sending", self.key)
                if self._timer is not None:
                    self._timer.cancel()
        except _ERRORS as exc:
            log.warning("ledger reservation refresh failed (%s)", type(exc).__name__)

    async def _release_quietly(self) -> None:
        try:
            await self._ledger.release(self.key, self._token)
        except _ERRORS as exc:  # it expires on its own
            log.warning("ledger reservation release failed (%s)", type(exc).__name__)


def _is_reservation(value: bytes | str) -> bool:
    text = value.decode(errors="replace") if isinstance(value, bytes) else value
    return text.startswith(SENDING)
