"""The dead-letter trend series in a real Redis (bridge/stores/trends.py): counted per hour and day,
per queue and cause, bounded in fields and time."""

from __future__ import annotations

import redis.asyncio as aioredis

from bridge.stores import keys, trends
from bridge.stores.trends import TrendCounter, TrendStore

NOW = 1_765_000_000.0  # a fixed clock: 2025-12-06 05:46:40 UTC


async def test_hand_offs_are_counted_per_hour_and_day_per_queue_and_cause(aredis: aioredis.Redis) -> None:
    clock = [NOW - 3 * 3600]
    counter = TrendCounter(TrendStore(aredis), lambda: clock[0])
    for _ in range(2):
        counter.count("orders", "fp1")
    clock[0] = NOW
    for _ in range(3):
        counter.count("orders", "fp2")
    counter.count("emails", "")
    await counter.close()
    fields = [trends.ALL, trends.queue_field("orders"), trends.cause_field("fp1"), trends.queue_field("emails")]
    series = await TrendStore(aredis).series(fields, NOW)
    hours, days = series[trends.ALL]
    assert len(hours) == 24 and len(days) == 30
    assert hours[-1] == 4 and hours[-4] == 2 and sum(hours) == 6, "newest hour last"
    assert days[-1] + days[-2] == 6
    assert sum(series[trends.queue_field("orders")][0]) == 5
    assert series[trends.cause_field("fp1")][0][-4] == 2
    assert sum(series[trends.queue_field("emails")][1]) == 1
    hour_ttl = await aredis.ttl(keys.trend_hour(int(NOW) // 3600))
    day_ttl = await aredis.ttl(keys.trend_day(int(NOW) // 86400))
    assert 0 < hour_ttl <= trends.HOUR_KEEP_S and trends.DAY_KEEP_S - 60 < day_ttl <= trends.DAY_KEEP_S


async def test_a_bucket_holds_at_most_fields_max_fields_but_always_counts_all(aredis: aioredis.Redis) -> None:
    counter = TrendCounter(TrendStore(aredis), lambda: NOW)
    for i in range(trends.FIELDS_MAX):
        counter.count(f"q{i}", "")
    await counter.close()
    counter.count("one-more", "fp-new")
    await counter.close()
    bucket = keys.trend_hour(int(NOW) // 3600)
    assert await aredis.hlen(bucket) <= trends.FIELDS_MAX
    assert int(await aredis.hget(bucket, "all")) == trends.FIELDS_MAX + 1, "the total is never capped"
    assert await aredis.hget(bucket, "q:one-more") is None


async def test_model_tokens_are_counted_per_utc_day_today_first(aredis: aioredis.Redis) -> None:
    clock = [NOW - 86400]
    counter = TrendCounter(TrendStore(aredis), lambda: clock[0])
    counter.count_tokens(1200, 110, False)
    clock[0] = NOW
    counter.count_tokens(1000, 100, False)
    counter.count_tokens(300, 20, True)
    await counter.close()
    days = await TrendStore(aredis).tokens_per_day(NOW)
    assert len(days) == trends.TOKEN_DAYS
    today, yesterday = days[0], days[1]
    assert today.day == int(NOW) // 86400 * 86400
    assert (today.calls, today.prompt, today.completion, today.estimated) == (2, 1300, 120, 1)
    assert (yesterday.calls, yesterday.prompt, yesterday.completion, yesterday.estimated) == (1, 1200, 110, 0)
    assert all(d.calls == 0 for d in days[2:])
    assert await aredis.hget(keys.trend_day(int(NOW) // 86400 - 1), "tokens:estimated") is None, "no zero fields"


async def test_a_full_day_bucket_still_counts_the_tokens(aredis: aioredis.Redis) -> None:
    counter = TrendCounter(TrendStore(aredis), lambda: NOW)
    for i in range(trends.FIELDS_MAX):
        counter.count(f"q{i}", "")
    await counter.close()
    counter.count_tokens(500, 50, False)
    await counter.close()
    today = (await TrendStore(aredis).tokens_per_day(NOW))[0]
    assert (today.calls, today.prompt, today.completion) == (1, 500, 50)
