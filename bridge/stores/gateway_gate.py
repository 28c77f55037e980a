"""The fleet-wide gate in front of the gateway: circuit breaker, 429 pause and budget.

Every replica asks the same two Redis keys, on one slot (docs/design.md, section 5b):

    dlq_bridge:gateway:{gw:<sha256 of the url>}:breaker   hash: failures, opened, probe, paused (ms)
    dlq_bridge:gateway:{gw:<sha256 of the url>}:calls     sorted set: one member per call, scored ms

`admit()` is ONE script (one round trip) per gateway call: a pause or an open
circuit refuses at once; after the cool-down one replica at a time gets the
half-open probe (a lease, so a probe whose replica died frees itself); then the
calls-per-minute budget (a sliding 60 s log) is spent. A success on a healthy
breaker needs no second round trip; failures, successes that close the breaker
and pauses are reported by a second script on the same slot. Times are Redis's
own clock. When Redis cannot be reached the gate falls back to the in-process
CircuitBreaker and CallBudget, so summaries never wait on Redis.

Without a budget (`calls_per_minute = 0`) the script only reads the breaker: an
"ok, closed, no failures" answer then holds for `CLEAR_FOR_S`, during which calls
are admitted without asking (no round trip per call at high rates). Any failure or
pause this replica sees ends that at once; one another replica saw is noticed
within `CLEAR_FOR_S`.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Literal

import redis.asyncio as redis
from redis.exceptions import RedisError

from bridge.config.sections import OpenClawSettings
from bridge.core.breaker import BreakerState, CircuitBreaker
from bridge.core.budget import CallBudget
from bridge.stores import keys

log = logging.getLogger(__name__)

Verdict = Literal["ok", "paused", "open", "budget"]
_ERRORS = (RedisError, OSError, TimeoutError)
KEEP_MS = 24 * 3600 * 1000  # breaker state outlives any cool-down; idle gateways expire
CLEAR_FOR_S = 0.25  # without a budget, a closed breaker read from Redis is trusted this long

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# KEYS: breaker hash, calls zset. ARGV: cooldown ms, probe lease ms, per-minute limit, member.
# Returns {verdict, wait ms (paused/open) or probe flag (ok), consecutive failures}.
ADMIT = _NOW + """
local b = redis.call('HMGET', KEYS[1], 'failures', 'opened', 'probe', 'paused')
local failures = tonumber(b[1] or '0')
local opened = tonumber(b[2] or '0')
local probe = tonumber(b[3] or '0')
local paused = tonumber(b[4] or '0')
if paused > now then return {'paused', paused - now, failures} end
local probing = 0
if opened > 0 then
  local cooldown = tonumber(ARGV[1])
  if now - opened < cooldown then return {'open', cooldown - (now - opened), failures} end
  if probe > now then return {'open', probe - now, failures} end
  probing = 1
end
local limit = tonumber(ARGV[3])
if limit > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - 60000)
  if redis.call('ZCARD', KEYS[2]) >= limit then return {'budget', 0, failures} end
  redis.call('ZADD', KEYS[2], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[2], 61000)
end
if probing == 1 then
  redis.call('HSET', KEYS[1], 'probe', now + tonumber(ARGV[2]))
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
end
return {'ok', probing, failures}
"""

# KEYS: breaker hash. ARGV: kind (success | failure | pause), threshold, pause ms, keep ms.
# Returns {open (0/1), paused ms left}.
REPORT = _NOW + """
local kind = ARGV[1]
if kind == 'success' then
  redis.call('HSET', KEYS[1], 'failures', 0, 'opened', 0, 'probe', 0)
elseif kind == 'failure' then
  local f = redis.call('HINCRBY', KEYS[1], 'failures', 1)
  local opened = tonumber(redis.call('HGET', KEYS[1], 'opened') or '0')
  if opened > 0 or f >= tonumber(ARGV[2]) then
    redis.call('HSET', KEYS[1], 'opened', now, 'probe', 0)
  end
else
  local paused = tonumber(redis.call('HGET', KEYS[1], 'paused') or '0')
  if now + tonumber(ARGV[3]) > paused then
    redis.call('HSET', KEYS[1], 'paused', now + tonumber(ARGV[3]))
  end
  redis.call('HSET', KEYS[1], 'probe', 0)
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
local b = redis.call('HMGET', KEYS[1], 'opened', 'paused')
local left = tonumber(b[2] or '0') - now
if left < 0 then left = 0 end
local open = 0
if tonumber(b[1] or '0') > 0 then open = 1 end
return {open, left}
"""


@dataclass(frozen=True)
class Admission:
    """May a call go now? `wait_s`: how long a pause or open circuit still lasts."""

    verdict: Verdict
    wait_s: float = 0.0
    must_report_success: bool = False  # a probe, or failures to clear


@dataclass(frozen=True)
class GateState:
    open: bool
    paused_s: float


def gateway_ref(url: str) -> str:
    return f"gw:{hashlib.sha256(url.encode()).hexdigest()[:32]}"


class FleetGate:
    """Breaker, pause and budget shared by every replica through Redis."""

    def __init__(self, client: redis.Redis, settings: OpenClawSettings) -> None:
        ref = gateway_ref(settings.url)
        self._keys = [keys.gateway_breaker(ref), keys.gateway_calls(ref)]
        self._settings = settings
        self._admit = client.register_script(ADMIT)
        self._report = client.register_script(REPORT)
        self.local = LocalGate(settings)
        self._clear_until = 0.0
        self._reading_clear = False  # a call re-reads a breaker that was clear: the others need not

    async def admit(self) -> Admission:
        s = self._settings
        if s.calls_per_minute == 0 and (time.monotonic() < self._clear_until or self._reading_clear):
            return Admission("ok")  # clear a moment ago, and one call is reading it again right now
        self._reading_clear = s.calls_per_minute == 0 and self._clear_until > 0
        try:
            return await self._admit_in_redis()
        finally:
            self._reading_clear = False

    async def _admit_in_redis(self) -> Admission:
        s = self._settings
        args: list[str | int] = [_ms(s.breaker_cooldown_s), _ms(s.timeout_s + 5.0), s.calls_per_minute,
                uuid.uuid4().hex, KEEP_MS]
        try:
            verdict, value, failures = await self._admit(keys=self._keys, args=args)
        except _ERRORS as exc:
            log.warning("gateway gate in Redis unavailable (%s); deciding in process",
                        type(exc).__name__)
            return await self.local.admit()
        name = verdict.decode() if isinstance(verdict, bytes) else str(verdict)
        clear = name == "ok" and not int(value) and not int(failures) and s.calls_per_minute == 0
        self._clear_until = time.monotonic() + CLEAR_FOR_S if clear else 0.0
        if name == "ok":
            return Admission("ok", must_report_success=bool(value) or int(failures) > 0)
        return Admission(_verdict(name), wait_s=int(value) / 1000.0)

    async def success(self, admission: Admission) -> GateState:
        await self.local.success(admission)
        if not admission.must_report_success:
            return GateState(open=False, paused_s=0.0)
        return await self._send("success")

    async def failure(self) -> GateState:
        self._clear_until, self._reading_clear = 0.0, False
        await self.local.failure()
        return await self._send("failure")

    async def pause(self, seconds: float) -> GateState:
        self._clear_until, self._reading_clear = 0.0, False
        await self.local.pause(seconds)
        return await self._send("pause", seconds)

    async def _send(self, kind: str, seconds: float = 0.0) -> GateState:
        args: list[str | int] = [kind, self._settings.breaker_failures, _ms(seconds), KEEP_MS]
        try:
            is_open, left = await self._report(keys=self._keys[:1], args=args)
        except _ERRORS as exc:
            log.warning("gateway gate report not shared (%s)", type(exc).__name__)
            return self.local.state()
        return GateState(open=bool(is_open), paused_s=int(left) / 1000.0)


class LocalGate:
    """The same gate in one process (fallback while Redis is unreachable)."""

    def __init__(self, settings: OpenClawSettings) -> None:
        self.breaker = CircuitBreaker(settings.breaker_failures, settings.breaker_cooldown_s)
        self.budget = CallBudget(settings.calls_per_minute)

    async def admit(self) -> Admission:
        if not self.breaker.allow():
            if self.breaker.paused:
                return Admission("paused", wait_s=self.breaker.paused_s)
            return Admission("open")
        if not self.budget.try_acquire():
            self.breaker.abandon()
            return Admission("budget")
        return Admission("ok")

    async def success(self, _admission: Admission) -> GateState:
        self.breaker.record_success()
        return self.state()

    async def failure(self) -> GateState:
        self.breaker.record_failure()
        return self.state()

    async def pause(self, seconds: float) -> GateState:
        self.breaker.pause(seconds)
        self.breaker.abandon()
        return self.state()

    def state(self) -> GateState:
        return GateState(open=self.breaker.state is BreakerState.OPEN,
                         paused_s=self.breaker.paused_s)


def _verdict(name: str) -> Verdict:
    if name == "paused":
        return "paused"
    return "budget" if name == "budget" else "open"


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


@dataclass(frozen=True)
class GateSnapshot:
    """The fleet-wide gate as an operator sees it (read only; for the console)."""

    state: Literal["closed", "open", "half_open", "paused"]
    paused_s: float
    failures: int
    budget_left: int | None  # None: no per-minute limit


# KEYS: breaker hash, calls log. Read only; one script, so it also runs on a cluster (whose
# pipelines refuse TIME) and reads the clock of the node that holds the gate.
_READ = """
local t = redis.call('TIME')
local f = redis.call('HMGET', KEYS[1], 'failures', 'opened', 'paused')
return {t[1], t[2], f[1], f[2], f[3], redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')}
"""


async def read_gate(client: redis.Redis, settings: OpenClawSettings) -> GateSnapshot:
    """Read the breaker hash and the calls log (Redis's clock), changing nothing."""
    ref = gateway_ref(settings.url)
    script = client.register_script(_READ)
    sec, usec, failures, opened, paused, calls = await script(
        keys=[keys.gateway_breaker(ref), keys.gateway_calls(ref)]
    )
    now = int(sec) * 1000 + int(usec) // 1000
    used = sum(1 for score in calls[1::2] if float(score) > now - 60_000)
    left = max(0, settings.calls_per_minute - used) if settings.calls_per_minute > 0 else None
    paused_ms, opened_ms = int(paused or 0), int(opened or 0)
    state: Literal["closed", "open", "half_open", "paused"] = "closed"
    if paused_ms > now:
        state = "paused"
    elif opened_ms > 0:
        state = "open" if now - opened_ms < _ms(settings.breaker_cooldown_s) else "half_open"
    return GateSnapshot(state, max(0, paused_ms - now) / 1000, int(failures or 0), left)
