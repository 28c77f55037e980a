"""The hand-off: an entry is finished once its alert is durably in Redis for every routed sink.

One Lua script on the SOURCE's slot (docs/design.md, sections 2 and 5b):

    LREM in-flight (the processing list of a `dead_letter:*` entry, the in-flight list of a kind
    record; `bridge.sources.source`) → LPUSH + LTRIM archive → HSET outbox <id> <alert for the routed sinks>
    → DEL the entry's claim counter (a finished entry starts again from zero)
    → the entry's console record and the minute's counts (`dlq_bridge:entries:<ref>`,
      `dlq_bridge:stats:<ref>:<minute>`; trimmed / expiring; docs/design.md, section 6b)

Sinks held back by an active silence (bridge.stores.silences, an in-process copy refreshed
once a second) get no parcel; the record key_names them.

A crash before it: the entry is still claimed and is simply processed again. The drain
acknowledges a kind record at its source only after it (`Source.acknowledge`).
A crash after it: the alert is in the outbox. The outbox and the sink queues
live in different slots, so the same call then forwards the item to each
sink queue (one script per sink, `{<sink>}` slot, idempotent: the item id is
fixed at hand-off) and drops it from the outbox. Anything left in an outbox
(a crash or a Redis error between the steps) is forwarded again by `sweep`,
which every replica runs; forwarding twice is harmless because the item id is
the same and the delivery ledger stops a second send.

Hot path: the hand-offs of one source within a few ms go in one script call (the
same steps per entry, all on the source's slot). The forward is batched too:
the parcels handed off within a few ms go to each sink queue in one script per
sink, then leave their outboxes in one HDEL per outbox. A crash before that
leaves them in the outbox for `sweep`, as any forward that failed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import orjson
import redis.asyncio as redis
from redis.exceptions import RedisError

from bridge.clients.batching import Batcher, flush_while_busy
from bridge.clients.replicas import ReplicaWait
from bridge.core import names
from bridge.core.claimed import Claimed
from bridge.core.formats import RecordFormat, format_of
from bridge.core.items import item_id, now_ms
from bridge.core.models import Alert
from bridge.core.resolves import RESOLVE_PREFIX
from bridge.stores import keys
from bridge.stores.claims import claims_key, processing_key
from bridge.stores.silences import SilenceFilter
from bridge.stores.sink_queue import SinkQueue

log = logging.getLogger(__name__)

# The entry's record for the console (docs/design.md, section 6b), in the same script:
# HSET records <digest> <record> (the parcel, when there is one, is appended to the record here,
# so the alert JSON crosses the wire once); ZADD index <ms> <digest>, both trimmed to the newest `max`;
# one minute's counts (alerted, and per summary source) in a bucket that expires after 2 h.
# KEYS: records, index, stats bucket. ARGV (from `at`): digest, record, ms, max, summary source, ttl.
_RECORD_LUA = """
local function record(k, at)
  local body = ARGV[at + 1]
  if ARGV[4] ~= '' then body = string.sub(body, 1, -2) .. ',"parcel":' .. ARGV[4] .. '}' end
  redis.call('HSET', KEYS[k], ARGV[at], body)
  redis.call('ZADD', KEYS[k + 1], tonumber(ARGV[at + 2]), ARGV[at])
  local over = redis.call('ZCARD', KEYS[k + 1]) - tonumber(ARGV[at + 3])
  if over > 0 then
    local old = redis.call('ZPOPMIN', KEYS[k + 1], over)
    for i = 1, #old, 2 do redis.call('HDEL', KEYS[k], old[i]) end
  end
  redis.call('HINCRBY', KEYS[k + 2], 'alerted', 1)
  redis.call('HINCRBY', KEYS[k + 2], ARGV[at + 4], 1)
  redis.call('EXPIRE', KEYS[k + 2], tonumber(ARGV[at + 5]))
end
"""
HANDOFF_LUA = _RECORD_LUA + """
local removed = redis.call('LREM', KEYS[1], -1, ARGV[1])
if removed == 0 then return 0 end
redis.call('LPUSH', KEYS[2], ARGV[1])
if tonumber(ARGV[2]) > 0 then redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[2]) - 1) end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[3], ARGV[3], ARGV[4]) end
redis.call('DEL', KEYS[4])
record(5, 5)
return 1
"""
# The hand-off of several entries of one source at once (the hot path): the steps of HANDOFF_LUA
# per entry, records included, the archive and the record index trimmed once at the end.
# KEYS: processing, archive, outbox, records, index, then per entry its claim counter and stats bucket.
# ARGV: archive length, records kept, stats ttl, then per entry raw, parcel id, parcel, digest,
# record, ms, summary source. Returns 1 per entry finished, 0 per entry no longer ours, then the
# number of the archive's oldest entries trimmed at `archive_max` (also counted in the stats bucket).
HANDOFF_MANY_LUA = """
local trim, keep, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local out, last_bucket, trimmed = {}, false, 0
for i = 1, (#KEYS - 5) / 2 do
  local a = 3 + 7 * (i - 1)
  local raw, id, parcel, digest, body = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5]
  if redis.call('LREM', KEYS[1], -1, raw) == 0 then
    out[i] = 0
  else
    redis.call('LPUSH', KEYS[2], raw)
    if parcel ~= '' then
      redis.call('HSET', KEYS[3], id, parcel)
      body = string.sub(body, 1, -2) .. ',"parcel":' .. parcel .. '}'
    end
    redis.call('DEL', KEYS[4 + 2 * i])
    redis.call('HSET', KEYS[4], digest, body)
    redis.call('ZADD', KEYS[5], tonumber(ARGV[a + 6]), digest)
    local bucket = KEYS[5 + 2 * i]
    redis.call('HINCRBY', bucket, 'alerted', 1)
    redis.call('HINCRBY', bucket, ARGV[a + 7], 1)
    redis.call('EXPIRE', bucket, ttl)
    out[i] = 1
    last_bucket = bucket
  end
end
if last_bucket then
  if trim > 0 then
    trimmed = redis.call('LLEN', KEYS[2]) - trim
    if trimmed > 0 then
      redis.call('LTRIM', KEYS[2], 0, trim - 1)
      redis.call('HINCRBY', last_bucket, 'trimmed', trimmed)
    else
      trimmed = 0
    end
  end
  local over = redis.call('ZCARD', KEYS[5]) - keep
  if over > 0 then
    local old = redis.call('ZPOPMIN', KEYS[5], over)
    for j = 1, #old, 2 do redis.call('HDEL', KEYS[4], old[j]) end
  end
end
out[#out + 1] = trimmed
return out
"""
STATS_TTL_S = 2 * 3600
SWEEP_BATCH = 200
FLUSH_DELAY_S = 0.005
HANDOFF_DELAY_S = 0.005  # hand-offs of one source within this window share one script call
HANDOFF_BATCH = 32


@dataclass(frozen=True)
class Parcel:
    """An outbox item: the alert, when it was handed off, and the sinks it is for."""

    id: str
    ms: int
    sinks: list[str]
    alert: str  # Alert JSON

    def encode(self) -> str:
        return orjson.dumps({"id": self.id, "ms": self.ms, "sinks": self.sinks, "alert": self.alert}).decode()

    @classmethod
    def decode(cls, raw: bytes | str) -> Parcel:
        data = orjson.loads(raw)
        return cls(str(data["id"]), int(data["ms"]), [str(s) for s in data["sinks"]], str(data["alert"]))


@dataclass(frozen=True)
class EntryRecord:
    """The keys and script arguments that write an entry's console record (see `_RECORD_LUA`)."""

    keys: list[str]
    args: list[str | int]

    @classmethod
    def of(cls, source: str, digest: str, body: str, ms: int, keep: int, summary_source: str) -> EntryRecord:
        bucket = keys.handoff_stats(source, ms // 1000 // keys.STATS_BUCKET_S)
        return cls([keys.entry_records(source), keys.entry_index(source), bucket],
                   [digest, body, ms, keep, summary_source, STATS_TTL_S])


def entry_record(
    alert_json: str | None, ms: int, item: str, sinks: list[str], silenced: dict[str, str], quarantined: bool
) -> str:
    """`{"ms", "item", "sinks", "silenced", "quarantined"}` plus `"alert"` (embedded as it is) when given;
    without it the hand-off script appends `"parcel"` (the outbox parcel, which holds the alert)."""
    head = json.dumps({"ms": ms, "item": item, "sinks": sinks, "silenced": silenced, "quarantined": quarantined})
    return head if alert_json is None else f'{head[:-1]}, "alert": {alert_json}}}'



class HandOff:
    """Finishes entries by handing their alert to the sink queues (see module doc)."""

    def __init__(
        self,
        client: redis.Redis,
        consumer: str,
        archive_max: int,
        queues: Mapping[str, SinkQueue],
        on_enqueued: Callable[[str], None] = lambda _sink: None,
        replicas: ReplicaWait | None = None,
        *,
        silences: SilenceFilter | None = None,
        on_silenced: Callable[[str], None] = lambda _sink: None,
        on_trimmed: Callable[[str, int], None] = lambda _source, _count: None,
        formats: RecordFormat | None = None,
    ) -> None:
        self._redis = client
        self._formats = formats or RecordFormat()  # the runtime's: it follows the fleet (bridge.core.formats)
        self._replicas = replicas or ReplicaWait(client, 0, 1.0)
        self._consumer = consumer
        self._archive_max = archive_max
        self._queues = dict(queues)
        self._on_enqueued = on_enqueued
        self._silences = silences
        self._on_silenced = on_silenced
        self._on_trimmed = on_trimmed  # (source, count): archive entries dropped at archive_max
        self._script = client.register_script(HANDOFF_LUA)
        self._many_script = client.register_script(HANDOFF_MANY_LUA)
        self._batcher: Batcher[str, tuple[Claimed, Parcel | None, EntryRecord], bool] = Batcher(
            self._finish_many, HANDOFF_DELAY_S, HANDOFF_BATCH
        )
        self._forwarded: dict[str, list[str]] = {}
        self._to_forward: list[tuple[str, Parcel]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._flush_lock = asyncio.Lock()

    @property
    def silences(self) -> SilenceFilter | None:
        return self._silences

    @property
    def beside_older(self) -> bool:
        """True while a live replica reads only an older record format than this one."""
        return self._formats.writes < self._formats.reads

    async def finish(
        self, claimed: Claimed, alert: Alert, routed_sinks: Sequence[str], *, quarantine: bool = False
    ) -> bool:
        """Archive the entry and hand its alert off; False when it was no longer ours (reaped).

        `quarantine=True`: the entry goes, unparsed and untrimmed, to `dlq_bridge:quarantine:<ref>`
        instead of the archive, in the same one step (docs/design.md, section 3b).
        """
        source = claimed.source_key
        parcel, record = await self._prepare(source, claimed.digest, alert, routed_sinks, quarantine)
        outbox = keys.outbox(source)
        if not quarantine:  # the hot path: with the other hand-offs of this source of the next few ms
            done = await self._batcher.submit(source, (claimed, parcel, record))
            if done and parcel is not None:
                self._forward_soon(outbox, parcel)
            return done
        # quarantine: the entry, untrimmed, to dlq_bridge:quarantine:<ref> (trim 0) in one script
        key_names = [self._inflight(claimed), keys.quarantine(source), outbox,
                 claims_key(source, claimed.digest), *record.keys]
        done = await self._replicas.script(
            self._script,
            keys=[names.encode(name) for name in key_names],  # byte-exact: a key name need not be UTF-8
            args=[claimed.raw, 0, parcel.id if parcel else "", parcel.encode() if parcel else "", *record.args],
        )
        if done and parcel is not None:
            self._forward_soon(outbox, parcel)
        return bool(done)

    async def _finish_many(
        self, source: str, batch: list[tuple[Claimed, Parcel | None, EntryRecord]]
    ) -> list[bool]:
        """One script for the hand-offs of one source (see HANDOFF_MANY_LUA); True per entry finished."""
        key_names = [self._inflight(batch[0][0]), keys.alerted(source), keys.outbox(source),
                 keys.entry_records(source), keys.entry_index(source)]
        args: list[bytes | str | int] = [self._archive_max, self._archive_max, STATS_TTL_S]
        for claimed, parcel, record in batch:
            digest, body, ms, _keep, summary_source, _ttl = record.args
            key_names += [claims_key(source, claimed.digest), record.keys[2]]
            args += [claimed.raw, parcel.id if parcel else "", parcel.encode() if parcel else "",
                     digest, body, ms, summary_source]
        done = await self._replicas.script(self._many_script, [names.encode(name) for name in key_names], args)
        if int(done[-1]):
            self._on_trimmed(source, int(done[-1]))
        return [bool(flag) for flag in done[:-1]]

    def _inflight(self, claimed: Claimed) -> str:
        """The in-flight list holding `claimed`: a kind's own, else the list DLQ's processing list."""
        return claimed.inflight or processing_key(claimed.source_key, self._consumer)

    async def forward_parcel(self, outbox: str, parcel: Parcel) -> None:
        """Forward a parcel another script put in `outbox` (the resolve of a job that left a watched
        store, `bridge.sources.leaving`); on a Redis error the outbox sweep repeats it."""
        try:
            await self._forward([(outbox, parcel)])
        except RedisError as exc:
            log.warning("hand-off forward failed (%s); the outbox sweep will repeat it", type(exc).__name__)

    async def _prepare(
        self, source: str, digest: str, alert: Alert, routed_sinks: Sequence[str], quarantined: bool
    ) -> tuple[Parcel | None, EntryRecord]:
        """The parcel for the sinks that are not silenced, and the entry's record (in memory only)."""
        sinks = list(dict.fromkeys(routed_sinks))
        silenced: dict[str, str] = {}
        if self._silences is not None and sinks:
            sinks, silenced = await self._silences.split(alert, sinks)
            for sink in silenced:
                self._on_silenced(sink)
        ms = now_ms()
        alert_json = self._formats.alert_json(alert)
        parcel = self._parcel(alert, alert_json, sinks, ms) if sinks else None
        embedded = None if parcel else alert_json  # with a parcel, the script appends it
        record = entry_record(embedded, ms, parcel.id if parcel else "", sinks, silenced, quarantined)
        body = self._formats.write(record)
        return parcel, EntryRecord.of(source, digest, body, ms, self._archive_max, alert.summary.source.value)

    @staticmethod
    def _parcel(alert: Alert, alert_json: str, sinks: list[str], ms: int) -> Parcel:
        ident = item_id(alert.severity, ms, alert.idempotency_key, alert.dead_letter.raw_digest)
        return Parcel(ident, ms, sinks, alert_json)

    def _forward_soon(self, outbox: str, parcel: Parcel) -> None:
        """Forward with the hand-offs of the next few ms (the parcel is safe in its outbox meanwhile)."""
        self._to_forward.append((outbox, parcel))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_soon())

    async def _forward(self, parcels: list[tuple[str, Parcel]]) -> None:
        """Enqueue every parcel for its sinks (one script per sink), then mark them for the outbox HDEL."""
        per_sink: dict[str, list[tuple[str, str]]] = {}
        for _outbox, parcel in parcels:
            for sink in parcel.sinks:
                per_sink.setdefault(sink, []).append((parcel.id, parcel.alert))
        for sink, items in per_sink.items():
            # with wait_replicas, the parcels leave the outbox only once their sink items are on replicas
            await self._queue(sink).forward_many(items, self._replicas)
            self._on_enqueued(sink)
        for outbox, parcel in parcels:
            self._forwarded.setdefault(outbox, []).append(parcel.id)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_soon())  # the HDELs

    async def _flush_soon(self) -> None:
        await flush_while_busy(lambda: bool(self._to_forward or self._forwarded), self._flush_logged, FLUSH_DELAY_S)

    async def _flush_logged(self) -> None:
        try:
            await self.flush()
        except RedisError as exc:  # the parcels stay; a sweep forwards them again (harmless)
            log.warning("hand-off forward failed (%s); the outbox sweep will repeat it", type(exc).__name__)

    async def flush(self) -> None:
        """Forward pending parcels, then drop forwarded ones from their outboxes: one HDEL per outbox."""
        async with self._flush_lock:
            await self._flush_now()

    async def _flush_now(self) -> None:
        pending, self._to_forward = self._to_forward, []
        if pending:
            await self._forward(pending)
        batch, self._forwarded = self._forwarded, {}
        if batch:
            async with self._redis.pipeline(transaction=False) as pipe:
                for outbox, fields in batch.items():
                    pipe.hdel(names.encode(outbox), *fields)
                await pipe.execute()

    def _queue(self, sink: str) -> SinkQueue:
        """The configured queue; a sink only another replica knows (a config roll-out) still gets its item."""
        if sink not in self._queues:
            self._queues[sink] = SinkQueue(self._redis, sink)
        return self._queues[sink]

    async def sweep(self, older_than_s: float) -> int:
        """Forward outbox parcels older than `older_than_s` (left by a crash or an error)."""
        await self.flush()  # after a flush under way (a lock): our own forwarded parcels are not repeated
        cutoff, moved = now_ms() - int(older_than_s * 1000), 0
        async for raw_key in self._redis.scan_iter(match=keys.OUTBOX_MATCH, count=1000, _type="hash"):
            outbox = names.decode(raw_key)
            async for field, value in self._redis.hscan_iter(raw_key, count=SWEEP_BATCH):
                moved += await self._sweep_one(outbox, field, value, cutoff)
        await self.flush()
        return moved

    async def _sweep_one(self, outbox: str, field: bytes, value: bytes, cutoff: int) -> int:
        try:
            parcel = Parcel.decode(value)
        except (ValueError, KeyError, TypeError):  # never dropped: an operator can still read it
            log.error("an outbox item of %s is unreadable; left in place", outbox)
            return 0
        if parcel.ms > cutoff:
            return 0
        await self._forward([(outbox, self._in_fleet_format(parcel))])
        return 1

    def _in_fleet_format(self, parcel: Parcel) -> Parcel:
        """A parcel another replica wrote in a format newer than the fleet writes now (an older replica
        joined), forwarded in the format written now; left as it is when this replica cannot read it."""
        found = format_of(parcel.alert)
        if found <= self._formats.writes or found > self._formats.reads or parcel.alert.startswith(RESOLVE_PREFIX):
            return parcel
        try:
            alert = Alert.model_validate_json(parcel.alert)
        except ValueError:
            return parcel
        return Parcel(parcel.id, parcel.ms, parcel.sinks, self._formats.alert_json(alert))
