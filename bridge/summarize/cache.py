"""Summaries cached by fingerprint in Redis, and coalescing in-process and fleet-wide.

A storm of identical failures costs one gateway call: the first entry calls,
entries arriving meanwhile await that same call, later ones read the cache.
Across replicas the same holds: the first replica to miss the cache takes a
short lead on the fingerprint in Redis (SET NX with a 5 s expiry, renewed
while its call runs); the others
poll the cache while that lead lives, and call the gateway themselves only
if it ends without an answer (the leader fell back, or was killed -9).
The cache is an optimisation: a Redis error is a miss, never a failure.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Generic, TypeVar

import redis.asyncio as redis
from redis.exceptions import RedisError

from bridge import keys
from bridge.errors import SummaryError
from bridge.models import SummaryDraft
from bridge.summarize.reply import validate_draft

log = logging.getLogger(__name__)

T = TypeVar("T")
_CACHE_ERRORS = (RedisError, OSError, TimeoutError)
CACHE_TIMEOUT_S = 2.0  # a slow cache must not hold up a summary
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


class SummaryCache:
    """`dlq_bridge:summary:<fingerprint>` → the five-key draft JSON, with a TTL."""

    def __init__(
        self, client: redis.Redis, ttl_s: int, runbook_ids: Collection[str], *, writes: bool = True
    ) -> None:
        self._client = client
        self._ttl_s = ttl_s
        self._runbook_ids = runbook_ids
        self._writes = writes  # False: read-only (a dry run leaves no trace)

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
        try:
            return validate_draft(json.loads(raw), self._runbook_ids)
        except (ValueError, TypeError, SummaryError):
            return None  # stale or foreign value (e.g. a runbook was removed): a miss

    async def put(self, fingerprint: str, draft: SummaryDraft) -> None:
        if not self.enabled or not self._writes or not fingerprint:
            return
        try:
            value = draft.model_dump_json()
            async with asyncio.timeout(CACHE_TIMEOUT_S):
                await self._client.set(keys.summary(fingerprint), value, ex=self._ttl_s)
        except _CACHE_ERRORS as exc:
            log.warning("summary cache write failed (%s); continuing", type(exc).__name__)


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

    async def keep(self, fingerprint: str, token: str, hold_s: float = LEAD_TTL_S) -> None:
        """Renew this replica's lead every third of `hold_s` until cancelled (while the call runs)."""
        if not self.enabled or not self._writes or not fingerprint:
            return
        while True:
            await asyncio.sleep(hold_s / 3)
            try:
                async with asyncio.timeout(CACHE_TIMEOUT_S):
                    await self._client.eval(
                        _RENEW, 1, keys.summary_lead(fingerprint), token, max(1, int(hold_s * 1000))
                    )
            except _CACHE_ERRORS as exc:
                log.warning("summary lead renewal failed (%s)", type(exc).__name__)

    async def release(self, fingerprint: str, token: str) -> None:
        """End this replica's lead (only its own: a lead that expired may be another's by now)."""
        if not self.enabled or not self._writes or not fingerprint:
            return
        try:
            async with asyncio.timeout(CACHE_TIMEOUT_S):
                await self._client.eval(_RELEASE, 1, keys.summary_lead(fingerprint), token)
        except _CACHE_ERRORS as exc:
            log.warning("summary lead release failed (%s); it expires", type(exc).__name__)


class Coalescer(Generic[T]):
    """Concurrent calls with one key share one in-flight task."""

    def __init__(self) -> None:
        self._in_flight: dict[str, asyncio.Task[T]] = {}

    def __len__(self) -> int:
        return len(self._in_flight)

    async def run(self, key: str, work: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """The result of `work`, and True when this caller led (made) the call.

        The task is shielded: a cancelled caller does not cancel the call
        others are waiting on.
        """
        task = self._in_flight.get(key)
        if task is not None:
            return await asyncio.shield(task), False
        task = asyncio.ensure_future(work())
        self._in_flight[key] = task
        task.add_done_callback(lambda _t: self._in_flight.pop(key, None))
        return await asyncio.shield(task), True
