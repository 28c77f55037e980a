"""Summaries cached by fingerprint in Redis, and coalescing in-process and fleet-wide.

A storm of identical failures costs one gateway call: the first entry calls,
entries arriving meanwhile await that same call, later ones read the cache.
Across replicas the same holds: the first replica to miss the cache takes a
short lead on the fingerprint in Redis (SET NX with a 5 s expiry, renewed
while its call runs); the others
poll the cache while that lead lives, and call the gateway themselves only
if it ends without an answer (the leader fell back, or was killed -9).
The cache is an optimisation: a Redis error is a miss, never a failure.

Hot path: `begin` reads the cache and, on a miss, takes the lead in one script
(one round trip; in the service, the reads of the next 2 ms share one pipeline of
GET + SET NX per cause, a lead taken beside a hit being dropped with the next
batched write); `end` writes the answer and drops the lead. Both keys carry the
`{<fingerprint>}` tag, so each script touches one cluster slot. With
`batch_writes` (the service) the answers of the next few ms go out in one
pipeline (SET answer, DEL lead per cause: once the answer is cached, whose lead
it was no longer matters, every replica reads the cache first); answers waiting
for that write are served to this process from memory. A fallback (no answer)
drops the lead at once, by token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Generic, TypeVar

import redis.asyncio as redis
from redis.exceptions import RedisError

from bridge.clients.batching import Batcher, flush_while_busy
from bridge.core.errors import SummaryError
from bridge.core.formats import RecordFormat, format_of, unstamp
from bridge.core.models import SummaryDraft
from bridge.stores import keys

log = logging.getLogger(__name__)

T = TypeVar("T")
_CACHE_ERRORS = (RedisError, OSError, TimeoutError)
CACHE_TIMEOUT_S = 2.0  # a slow cache must not hold up a summary
WRITE_DELAY_S = 0.005  # batched answers: gathered this long, then written in one pipeline
READ_DELAY_S = 0.002  # batched reads (`begin` in the service): gathered this long
READ_BATCH = 64
FOLLOW_POLL_S = 0.1  # how often a replica waiting on another's gateway call reads the cache
LEAD_TTL_S = 5.0  # a lead's expiry, renewed while its call runs: a leader killed -9 frees it this fast
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
# KEYS: summary, lead. ARGV: token, lead ms. {1, draft} on a hit; {0, 1} lead taken; {0, 0} another leads.
_BEGIN = """
local cached = redis.call('GET', KEYS[1])
if cached then return {1, cached} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {0, 1} end
return {0, 0}
"""
# KEYS: summary, lead. ARGV: token, draft ('' for none), ttl s.
_END = """
if ARGV[2] ~= '' then redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3]) end
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
return 1
"""


class SummaryCache:
    """`dlq_bridge:summary:<fingerprint>` → the five-key draft JSON, with a TTL."""

    def __init__(
        self,
        client: redis.Redis,
        ttl_s: int,
        runbook_ids: Collection[str],
        *,
        validate: Callable[[dict[str, Any], Collection[str]], SummaryDraft],
        writes: bool = True,
        batch_writes: bool = False,
        formats: RecordFormat | None = None,
    ) -> None:
        self._client = client
        self._formats = formats or RecordFormat()  # the runtime's: it follows the fleet (bridge.core.formats)
        self._ttl_s = ttl_s
        self._runbook_ids = runbook_ids
        self._validate = validate  # a stored draft, strictly (`bridge.summarize.reply.validate_draft`)
        self._writes = writes  # False: read-only (a dry run leaves no trace)
        self._batch_writes = batch_writes
        self._pending: dict[str, SummaryDraft] = {}  # answers waiting for the batched write
        self._idle_leads: set[str] = set()  # leads a batched read took beside a cache hit: dropped with the writes
        self._writer: asyncio.Task[None] | None = None
        self._reads: Batcher[None, tuple[str, str, int], tuple[bytes | None, bool]] = Batcher(
            self._begin_many, READ_DELAY_S, READ_BATCH
        )
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self._begin = client.register_script(_BEGIN)
        self._end = client.register_script(_END)

    @property
    def enabled(self) -> bool:
        return self._ttl_s > 0

    async def get(self, fingerprint: str) -> SummaryDraft | None:
        if not self.enabled or not fingerprint:
            return None
        try:
            async with asyncio.timeout(CACHE_TIMEOUT_S):
                raw = await self._client.get(keys.summary(fingerprint))
        except _CACHE_ERRORS as exc:
            log.warning("summary cache read failed (%s); treating as a miss", type(exc).__name__)
            return None
        return self._decode(raw) if raw is not None else None

    def _decode(self, raw: bytes | str) -> SummaryDraft | None:
        """The cached draft; a miss for a stale or foreign value, or one of a newer record format."""
        text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
        if format_of(text) > self._formats.reads:
            return None
        try:
            return self._validate(json.loads(unstamp(text)), self._runbook_ids)
        except (ValueError, TypeError, SummaryError):
            return None  # stale or foreign value (e.g. a runbook was removed): a miss

    async def put(self, fingerprint: str, draft: SummaryDraft) -> None:
        if not self.enabled or not self._writes or not fingerprint:
            return
        try:
            value = self._formats.write(draft.model_dump_json())
            async with asyncio.timeout(CACHE_TIMEOUT_S):
                await self._client.set(keys.summary(fingerprint), value, ex=self._ttl_s)
        except _CACHE_ERRORS as exc:
            log.warning("summary cache write failed (%s); continuing", type(exc).__name__)


    async def begin(self, fingerprint: str, hold_s: float = LEAD_TTL_S) -> tuple[SummaryDraft | None, str | None]:
        """`get`, then `lead` on a miss, in one round trip: (cached draft, None) or (None, lead token or None)."""
        if not self.enabled or not self._writes or not fingerprint:
            return await self.get(fingerprint), await self.lead(fingerprint, hold_s)
        if fingerprint in self._pending:
            return self._pending[fingerprint], None
        token = secrets.token_hex(8)
        names = [keys.summary(fingerprint), keys.summary_lead(fingerprint)]
        hold_ms = max(1, int(hold_s * 1000))
        try:
            async with asyncio.timeout(CACHE_TIMEOUT_S):
                if self._batch_writes:
                    return await self._begin_batched(fingerprint, token, hold_ms)
                hit, value = await self._begin(keys=names, args=[token, hold_ms])
        except _CACHE_ERRORS as exc:
            log.warning("summary cache read failed (%s); treating as a miss, asking the gateway", type(exc).__name__)
            return None, token
        if int(hit):
            draft = self._decode(value)
            return (draft, None) if draft is not None else (None, await self.lead(fingerprint, hold_s))
        return None, token if int(value) else None

    async def _begin_batched(
        self, fingerprint: str, token: str, hold_ms: int
    ) -> tuple[SummaryDraft | None, str | None]:
        """`begin` in a pipeline shared with the reads of the next few ms: GET, and SET NX the lead
        alongside (no script: a cache hit's needless lead is dropped with the next batched write)."""
        raw, taken = await self._reads.submit(None, (fingerprint, token, hold_ms))
        draft = self._decode(raw) if raw is not None else None
        if draft is not None:
            if taken:
                self._drop_lead_soon(fingerprint)
            return draft, None
        return None, token if taken else None

    async def _begin_many(self, _key: None, reads: list[tuple[str, str, int]]) -> list[tuple[bytes | None, bool]]:
        async with self._client.pipeline(transaction=False) as pipe:
            for fingerprint, token, hold_ms in reads:
                pipe.get(keys.summary(fingerprint))
                pipe.set(keys.summary_lead(fingerprint), token, nx=True, px=hold_ms)
            replies = await pipe.execute()
        return [(replies[i], bool(replies[i + 1])) for i in range(0, len(replies), 2)]

    def _drop_lead_soon(self, fingerprint: str) -> None:
        self._idle_leads.add(fingerprint)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_soon())

    async def end(self, fingerprint: str, token: str, draft: SummaryDraft | None) -> None:
        """`put` the answer (if any) and `release` the lead, in one round trip."""
        if not self.enabled or not self._writes or not fingerprint:
            return
        if draft is not None and self._batch_writes:
            self._pending[fingerprint] = draft
            if self._writer is None or self._writer.done():
                self._writer = asyncio.create_task(self._write_soon())
            return
        value = self._formats.write(draft.model_dump_json()) if draft is not None else ""
        try:
            async with asyncio.timeout(CACHE_TIMEOUT_S):
                await self._end(keys=[keys.summary(fingerprint), keys.summary_lead(fingerprint)],
                                args=[token, value, self._ttl_s])
        except _CACHE_ERRORS as exc:
            log.warning("summary cache write failed (%s); continuing (the lead expires)", type(exc).__name__)

    async def _write_soon(self) -> None:
        await flush_while_busy(lambda: bool(self._pending or self._idle_leads), self.flush, WRITE_DELAY_S)

    async def flush(self) -> None:
        """Write the batched answers (and drop their leads) in one pipeline; an error is logged, not raised."""
        batch, self._pending = self._pending, {}
        idle, self._idle_leads = self._idle_leads, set()
        if not batch and not idle:
            return
        try:
            async with asyncio.timeout(CACHE_TIMEOUT_S), self._client.pipeline(transaction=False) as pipe:
                for fingerprint, draft in batch.items():
                    pipe.set(keys.summary(fingerprint), self._formats.write(draft.model_dump_json()), ex=self._ttl_s)
                    pipe.delete(keys.summary_lead(fingerprint))
                for fingerprint in idle - set(batch):
                    pipe.delete(keys.summary_lead(fingerprint))
                await pipe.execute()
        except _CACHE_ERRORS as exc:
            log.warning("summary cache write failed (%s); continuing (the leads expire)", type(exc).__name__)

    async def aclose(self) -> None:
        """Write what is still batched (a stop)."""
        if self._writer is not None and not self._writer.done():
            self._writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._writer
        await self.flush()

    async def lead(self, fingerprint: str, hold_s: float = LEAD_TTL_S) -> str | None:
        """A token when this replica should ask the gateway; None while another replica is asking.

        Without a shared cache (disabled, read-only, no fingerprint) or on a
        Redis error, every caller leads: the call is made, as without a fleet.
        """
        token = secrets.token_hex(8)
        if not self.enabled or not self._writes or not fingerprint:
            return token
        try:
            async with asyncio.timeout(CACHE_TIMEOUT_S):
                taken = await self._client.set(
                    keys.summary_lead(fingerprint), token, nx=True, px=max(1, int(hold_s * 1000))
                )
        except _CACHE_ERRORS as exc:
            log.warning("summary lead failed (%s); asking the gateway", type(exc).__name__)
            return token
        return token if taken else None

    async def follow(self, fingerprint: str, patience_s: float) -> SummaryDraft | None:
        """The answer another replica's call cached, polled while its lead lives (at most `patience_s`)."""
        deadline = time.monotonic() + patience_s
        while time.monotonic() < deadline:
            await asyncio.sleep(FOLLOW_POLL_S)
            draft = await self.get(fingerprint)
            if draft is not None:
                return draft
            try:
                async with asyncio.timeout(CACHE_TIMEOUT_S):
                    if not await self._client.exists(keys.summary_lead(fingerprint)):
                        return await self.get(fingerprint)
            except _CACHE_ERRORS:
                return None
        return None

    def keep(self, fingerprint: str, token: str, hold_s: float = LEAD_TTL_S) -> LeadKeeper:
        """Renew this replica's lead every third of `hold_s` while its call runs; `stop()` it after."""
        return LeadKeeper(self, fingerprint, token, hold_s)

    async def renew(self, fingerprint: str, token: str, hold_s: float = LEAD_TTL_S) -> None:
        if not self.enabled or not self._writes or not fingerprint:
            return
        try:
            async with asyncio.timeout(CACHE_TIMEOUT_S):
                await self._renew(keys=[keys.summary_lead(fingerprint)], args=[token, max(1, int(hold_s * 1000))])
        except _CACHE_ERRORS as exc:
            log.warning("summary lead renewal failed (%s)", type(exc).__name__)

    async def release(self, fingerprint: str, token: str) -> None:
        """End this replica's lead (only its own: a lead that expired may be another's by now)."""
        if not self.enabled or not self._writes or not fingerprint:
            return
        try:
            async with asyncio.timeout(CACHE_TIMEOUT_S):
                await self._release(keys=[keys.summary_lead(fingerprint)], args=[token])
        except _CACHE_ERRORS as exc:
            log.warning("summary lead release failed (%s); it expires", type(exc).__name__)


class LeadKeeper:
    """Renews a lead on a timer: no task at all for a call shorter than a third of the lead."""

    def __init__(self, cache: SummaryCache, fingerprint: str, token: str, hold_s: float) -> None:
        self._cache, self._fingerprint, self._token, self._hold_s = cache, fingerprint, token, hold_s
        self._renewing: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = asyncio.get_running_loop().call_later(hold_s / 3, self._due)

    def _due(self) -> None:
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.ensure_future(self._cache.renew(self._fingerprint, self._token, self._hold_s))
        self._timer = asyncio.get_running_loop().call_later(self._hold_s / 3, self._due)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._renewing is not None:
            self._renewing.cancel()


class LeaderGone(Exception):
    """The caller that led a coalesced call was cancelled: a follower makes the call itself."""


class Coalescer(Generic[T]):
    """Concurrent calls with one key share one call, made inline by the first caller (no task)."""

    def __init__(self) -> None:
        self._in_flight: dict[str, asyncio.Future[T]] = {}

    def __len__(self) -> int:
        return len(self._in_flight)

    async def run(self, key: str, work: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """The result of `work`, and True when this caller led (made) the call.

        Followers await the leader's future, shielded: a cancelled follower does not
        disturb the others. A cancelled leader hands over: its followers are woken with
        `LeaderGone` and one of them makes the call again.
        """
        while (future := self._in_flight.get(key)) is not None:
            with contextlib.suppress(LeaderGone):
                return await asyncio.shield(future), False
        future = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            result = await work()
        except BaseException as exc:
            future.set_exception(LeaderGone() if isinstance(exc, asyncio.CancelledError) else exc)
            future.exception()  # retrieved: no "never retrieved" warning without followers
            raise
        else:
            future.set_result(result)
            return result, True
        finally:
            self._in_flight.pop(key, None)
