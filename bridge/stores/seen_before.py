"""Seen before: one small, expiring hash per cause fingerprint (docs/design.md, section 5e).

    dlq_bridge:seen:<cause>   HASH  first, last          when the cause failed first and last (epoch s)
                                    d:<day>              failures on that UTC day (days older than 30 dropped)
                                    act_kind, act_at,    the last operator action on its jobs: redriven,
                                    act_who, act_note,   retried, silenced; who, when, their note (cut)
                                    act_verdict          failed_again / held, judged at the next failure
                                    again, held          redrives (and retries) that failed again / held

At most 31 day fields and ten others: a few hundred bytes a cause. Every write sets the key to
expire `ttl_s` after it (31 days by default), so a cause nobody sees again leaves nothing behind.
`seen` records one failure and returns the history before it in one script (atomic across replicas);
`acted` records an action on the causes of the jobs it moved; `peek` reads without recording.
A redrive or retry is judged when the cause next fails: within `again_window_s` it failed again,
later it held. Release 0.2.0 neither reads nor writes these keys.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import redis.asyncio as redis
from redis.typing import EncodableT, FieldT

from bridge.core.seen_before import NOTE_CHARS, WHO_CHARS, WINDOW_DAYS, ActionKind, LastAction, SeenBefore, one_line
from bridge.stores import keys

TTL_S = (WINDOW_DAYS + 1) * 86400
AGAIN_WINDOW_S = 3600.0
DAY_S = 86400

_SEEN_LUA = """
local h = KEYS[1]
local now, day, oldest, window = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local first, last = redis.call('HGET', h, 'first'), redis.call('HGET', h, 'last')
if not first then redis.call('HSET', h, 'first', ARGV[1]) end
redis.call('HSET', h, 'last', ARGV[1])
for _, f in ipairs(redis.call('HKEYS', h)) do
  if string.sub(f, 1, 2) == 'd:' and tonumber(string.sub(f, 3)) < oldest then redis.call('HDEL', h, f) end
end
local kind = redis.call('HGET', h, 'act_kind')
if kind and (kind == 'redriven' or kind == 'retried') and not redis.call('HGET', h, 'act_verdict') then
  if now - tonumber(redis.call('HGET', h, 'act_at')) <= window then
    redis.call('HSET', h, 'act_verdict', 'failed_again')
    redis.call('HINCRBY', h, 'again', 1)
  else
    redis.call('HSET', h, 'act_verdict', 'held')
    redis.call('HINCRBY', h, 'held', 1)
  end
end
local before = redis.call('HGETALL', h)
redis.call('HINCRBY', h, 'd:' .. day, 1)
redis.call('EXPIRE', h, ARGV[5])
return {first or '', last or '', before}
"""


def _text(value: bytes | str | None) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else (value or "")


def history_of(
    cause: str, fields: dict[str, str], oldest_day: int, first: str = "", last: str = ""
) -> SeenBefore | None:
    """The history a hash holds (None: the cause was never seen)."""
    first, last = first or fields.get("first", ""), last or fields.get("last", "")
    if not first or not last:
        return None
    times = sum(int(v) for k, v in fields.items() if k.startswith("d:") and int(k[2:]) >= oldest_day)
    action = None
    if fields.get("act_kind") in ("redriven", "retried", "silenced") and fields.get("act_at"):
        action = LastAction.model_validate(
            {
                "kind": fields["act_kind"],
                "at": float(fields["act_at"]),
                "who": fields.get("act_who", ""),
                "note": fields.get("act_note", ""),
                "verdict": fields.get("act_verdict", ""),
            }
        )
    return SeenBefore(
        cause=cause,
        first_at=float(first),
        last_at=float(last),
        times_30d=times,
        last_action=action,
        redrives_failed_again=int(fields.get("again", 0)),
        redrives_held=int(fields.get("held", 0)),
    )


class SeenBeforeStore:
    """See module doc."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        ttl_s: int = TTL_S,
        again_window_s: float = AGAIN_WINDOW_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._redis = client
        self._ttl_s = ttl_s
        self._window = again_window_s
        self._clock = clock
        self._seen = client.register_script(_SEEN_LUA)

    def _oldest_day(self, now: float) -> int:
        return int(now // DAY_S) - WINDOW_DAYS + 1

    async def seen(self, cause: str) -> SeenBefore | None:
        """Record one failure of `cause`; its history before this one (None: the first time)."""
        now = self._clock()
        oldest = self._oldest_day(now)
        first, last, flat = await self._seen(
            keys=[keys.seen_before(cause)], args=[repr(now), int(now // DAY_S), oldest, self._window, self._ttl_s]
        )
        if not first:  # the first failure of this cause (or the first since its history expired)
            return None
        fields = {_text(flat[i]): _text(flat[i + 1]) for i in range(0, len(flat), 2)}
        return history_of(cause, fields, oldest, _text(first), _text(last))

    async def peek(self, cause: str) -> SeenBefore | None:
        """The cause's history now, recording nothing."""
        raw = await self._redis.hgetall(keys.seen_before(cause))
        fields = {_text(k): _text(v) for k, v in raw.items()}
        return history_of(cause, fields, self._oldest_day(self._clock()))

    async def acted(self, causes: Iterable[str], kind: ActionKind, who: str, note: str = "") -> None:
        """Operators acted on jobs of these causes: the last action of each, its verdict open again."""
        action: dict[FieldT, EncodableT] = {
            "act_kind": kind,
            "act_at": repr(self._clock()),
            "act_who": one_line(who, WHO_CHARS),
            "act_note": one_line(note, NOTE_CHARS),
        }
        async with self._redis.pipeline(transaction=False) as pipe:
            for cause in sorted(set(causes)):
                key = keys.seen_before(cause)
                pipe.hset(key, mapping=action)
                pipe.hdel(key, "act_verdict")
                pipe.expire(key, self._ttl_s)
            await pipe.execute()
