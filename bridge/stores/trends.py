"""Dead letters per hour (24 h) and per day (30 d), per queue and per cause, and the model's tokens per day.

`dlq_bridge:trends:h:<epoch hour>` and `dlq_bridge:trends:d:<epoch day>` are hashes whose fields
are `all`, `q:<queue>` and `c:<cause fingerprint>`, each a count of entries handed off (archived or
quarantined) in that hour or day. A day bucket also holds the model calls of that day (release
0.4.0 on): `tokens:calls`, `tokens:prompt`, `tokens:completion` and `tokens:estimated` (calls whose
reply had no `usage`, bridge.summarize.tokens); 0.3.0 reads named fields only and never sees them.
A bucket expires HOUR_KEEP_S / DAY_KEEP_S after it was last written and holds at most FIELDS_MAX
fields (a new queue or cause past that is not counted there; `all` and the token fields always
are). The pipeline counts each hand-off in memory (`TrendCounter.count`), the summarizer each model
call (`TrendCounter.count_tokens`), and the counts are written at most every FLUSH_S, one script per
bucket, off the hand-off script: a process stopped in between loses its last FLUSH_S of counts, so
the series is a near count, not a ledger. docs/design.md, section "Console and JSON API" (trends).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis.asyncio as redis
from redis.exceptions import RedisError

from bridge.stores import keys

HOUR_S = 3600
DAY_S = 86400
HOURS = 24
DAYS = 30
HOUR_KEEP_S = (HOURS + 2) * HOUR_S
DAY_KEEP_S = (DAYS + 1) * DAY_S
FIELDS_MAX = 2000
FLUSH_S = 2.0
ALL = "all"
TOKEN_DAYS = 7  # the console's overview shows this many days of model tokens
TOKEN_FIELDS = ("tokens:calls", "tokens:prompt", "tokens:completion", "tokens:estimated")
log = logging.getLogger(__name__)

# KEYS[1] the bucket; ARGV ttl, fields max, then field, count pairs
_ADD_LUA = """
local size = redis.call('HLEN', KEYS[1])
for i = 3, #ARGV, 2 do
  local field = ARGV[i]
  local always = field == 'all' or string.sub(field, 1, 7) == 'tokens:'
  if always or size < tonumber(ARGV[2]) or redis.call('HEXISTS', KEYS[1], field) == 1 then
    if redis.call('HINCRBY', KEYS[1], field, ARGV[i + 1]) == tonumber(ARGV[i + 1]) then size = size + 1 end
  end
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return size
"""


def queue_field(queue: str) -> str:
    return f"q:{queue}"


def cause_field(fingerprint: str) -> str:
    return f"c:{fingerprint}"


@dataclass(frozen=True)
class TokenDay:
    """One UTC day of model calls (`day`: its start, epoch seconds)."""

    day: int
    calls: int
    prompt: int
    completion: int
    estimated: int


class TrendStore:
    """Reads and writes the buckets (see module doc)."""

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._add = client.register_script(_ADD_LUA)

    async def add(self, counts: dict[tuple[str, int], Counter[str]]) -> None:
        """Add `counts` ((`h`|`d`, bucket number) → field → count) to their buckets."""
        for (unit, number), fields in counts.items():
            key = keys.trend_hour(number) if unit == "h" else keys.trend_day(number)
            ttl = HOUR_KEEP_S if unit == "h" else DAY_KEEP_S
            args: list[str | int] = [ttl, FIELDS_MAX]
            for field, n in fields.items():
                if n:
                    args += [field, n]
            await self._add(keys=[key], args=args)

    async def series(self, fields: Sequence[str], now: float) -> dict[str, tuple[list[int], list[int]]]:
        """field → (counts of the last HOURS hours, oldest first; of the last DAYS days, oldest first)."""
        hour, day = int(now) // HOUR_S, int(now) // DAY_S
        hours = [keys.trend_hour(h) for h in range(hour - HOURS + 1, hour + 1)]
        days = [keys.trend_day(d) for d in range(day - DAYS + 1, day + 1)]
        if not fields:
            return {}
        async with self._redis.pipeline(transaction=False) as pipe:
            for key in hours + days:
                pipe.hmget(key, list(fields))
            replies = await pipe.execute()
        found: dict[str, tuple[list[int], list[int]]] = {}
        for i, field in enumerate(fields):
            counts = [int(reply[i] or 0) for reply in replies]
            found[field] = (counts[:HOURS], counts[HOURS:])
        return found

    async def tokens_per_day(self, now: float, days: int = TOKEN_DAYS) -> list[TokenDay]:
        """The model's calls and tokens of the last `days` UTC days, today first."""
        today = int(now) // DAY_S
        numbers = range(today, today - days, -1)
        async with self._redis.pipeline(transaction=False) as pipe:
            for number in numbers:
                pipe.hmget(keys.trend_day(number), list(TOKEN_FIELDS))
            replies = await pipe.execute()
        return [TokenDay(number * DAY_S, *(int(v or 0) for v in reply))
                for number, reply in zip(numbers, replies, strict=True)]


class TrendCounter:
    """Counts hand-offs in memory and writes them to the store at most every FLUSH_S (see module doc)."""

    def __init__(self, store: TrendStore, clock: Callable[[], float]) -> None:
        self._store = store
        self._clock = clock
        self._pending: dict[tuple[str, int], Counter[str]] = {}
        self._flusher: asyncio.Task[None] | None = None

    def count(self, queue: str, fingerprint: str) -> None:
        now = int(self._clock())
        fields = [ALL, queue_field(queue)] + ([cause_field(fingerprint)] if fingerprint else [])
        for bucket in (("h", now // HOUR_S), ("d", now // DAY_S)):
            self._pending.setdefault(bucket, Counter()).update(fields)
        self._flush_later()

    def count_tokens(self, prompt: int, completion: int, estimated: bool) -> None:
        """One model call of today and its tokens (bridge.summarize.tokens)."""
        bucket = ("d", int(self._clock()) // DAY_S)
        calls, prompt_f, completion_f, estimated_f = TOKEN_FIELDS
        self._pending.setdefault(bucket, Counter()).update(
            {calls: 1, prompt_f: prompt, completion_f: completion, estimated_f: int(estimated)}
        )
        self._flush_later()

    def _flush_later(self) -> None:
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_soon())

    async def _flush_soon(self) -> None:
        await asyncio.sleep(FLUSH_S)
        await self.flush()

    async def flush(self) -> None:
        pending, self._pending = self._pending, {}
        if not pending:
            return
        try:
            await self._store.add(pending)
        except RedisError as exc:  # the counts of these seconds are lost; the hand-offs are not
            log.warning("dead-letter trends not written (%s)", type(exc).__name__)

    async def close(self) -> None:
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher
        await self.flush()
