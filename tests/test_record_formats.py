"""Record formats (bridge.core.formats): what one release writes, the release beside it reads.

The whole rolling upgrade runs in tests/compat/; these try each part on its own, on a real Redis.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from hypothesis import given
from hypothesis import strategies as st
from redis.crc import key_slot

from bridge import __version__
from bridge.core.formats import READS, RecordFormat, format_of, stamp, unstamp
from bridge.core.models import Alert, Summary
from bridge.delivery.downgrade import downgrade
from bridge.settings import Settings
from bridge.stores import keys
from bridge.stores.fleet import live_replicas
from bridge.stores.groups import Grouper
from bridge.stores.sink_queue import SinkQueue
from bridge.stores.undeliverable_records import UndeliverableStore, unreadable_record
from tests.support.bridge_process import write_config
from tests.support.receiver import make_alert


def alert_with_repairs() -> Alert:
    alert = make_alert(job_id="r1")
    summary = Summary(**{**alert.summary.model_dump(), "repairs": ("next_steps",)})
    return alert.model_copy(update={"summary": summary})


# --- the format itself -------------------------------------------------------------------------


@given(st.dictionaries(st.text(max_size=5), st.integers(), max_size=4), st.integers(1, 9))
def test_a_stamp_is_read_back_and_removed_exactly(fields: dict[str, int], fmt: int) -> None:
    text = json.dumps(fields)
    stamped = stamp(text, fmt)
    assert format_of(stamped) == fmt
    assert json.loads(unstamp(stamped)) == fields
    assert (stamped == text) == (fmt == 1), "format 1 carries no number (0.1.0 forbids one in a summary)"


def test_format_1_is_what_0_1_0_wrote_and_format_2_carries_repairs_and_its_number() -> None:
    alert = alert_with_repairs()
    old, new = RecordFormat(writes=1), RecordFormat(writes=2)
    as_one = json.loads(old.alert_json(alert))
    assert "v" not in as_one and "repairs" not in as_one["summary"]
    assert format_of(new.alert_json(alert)) == 2
    assert Alert.model_validate_json(new.alert_json(alert)).summary.repairs == ("next_steps",)


def test_a_summary_with_a_field_of_a_later_release_is_read() -> None:
    alert = json.loads(make_alert().model_dump_json())
    alert["summary"]["confidence"] = 0.9  # a field some later release adds
    assert Alert.model_validate(alert).summary.title == make_alert().summary.title


def test_the_fleet_writes_what_its_oldest_replica_reads_and_never_newer_than_its_own() -> None:
    formats = RecordFormat()
    assert formats.follow([1, READS]) == 1, "a 0.1.0 replica is alive: format 1"
    assert formats.follow([READS + 1]) == READS, "a newer replica does not raise what this one writes"
    assert formats.follow([]) == READS
    posing = RecordFormat.of_release(pose_as_next=True)
    assert (posing.reads, posing.follow([READS])) == (READS + 1, READS)


# --- the fleet -------------------------------------------------------------------------------------


async def test_heartbeats_of_both_releases_are_read_and_0_1_0_reads_format_1(aredis: aioredis.Redis) -> None:
    await aredis.set(keys.heartbeat("old-1"), json.dumps({"host": "h", "pid": 7, "at": 1.0}), ex=30)
    await aredis.set(keys.heartbeat("new-1"), json.dumps({"host": "h", "pid": 8, "at": 1.0, "version": "0.2.0",
                                                          "reads": 2}), ex=30)
    await aredis.set(keys.heartbeat("odd-1"), "not json", ex=30)
    found = {r.consumer: (r.version, r.reads) for r in await live_replicas(aredis)}
    assert found == {"old-1": ("", 1), "new-1": ("0.2.0", 2), "odd-1": ("", 1)}


# --- queued items of a newer format ----------------------------------------------------------------


async def test_an_item_of_a_newer_format_waits_for_a_replica_that_reads_it_and_is_never_dropped(
    aredis: aioredis.Redis,
) -> None:
    this, newer = SinkQueue(aredis, "hook", reads=2), SinkQueue(aredis, "hook", reads=3)
    body = stamp(make_alert().model_dump_json(), 3)
    await this.put("2:100:orders:job-1:0123456789abcdef", body)
    [taken] = await this.take(5)
    assert await this.leave_newer(taken.id, format_of(taken.body))
    assert await this.take(5) == [], "the replica that left it never takes it again"
    assert (await this.stats()).newer == 1 and (await this.stats()).depth == 0
    [again] = await newer.take(5)
    assert again.body == body, "a replica of the newer release takes it as it was"
    await newer.ack(again.id)
    assert (await newer.stats()).newer == 0 and await aredis.hlen(this.keys.items) == 0


async def test_an_older_replica_joining_gets_the_queue_and_the_groups_rewritten_in_its_format(
    aredis: aioredis.Redis, make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(sinks=[{"name": "grouped", "type": "webhook", "url": "http://127.0.0.1:9/in",
                                     "secret": "s", "group_by": "fingerprint", "group_wait_s": 60}])
    sink = settings.effective_sinks()[0]
    newer = RecordFormat.of_release(pose_as_next=True)  # writes 3 while it runs alone
    queue, groups = SinkQueue(aredis, "grouped", reads=newer.reads), Grouper(aredis, sink, formats=newer)
    await groups.add(alert_with_repairs())
    await queue.put("2:100:orders:job-1:0123456789abcdef", newer.alert_json(alert_with_repairs()))
    older = SinkQueue(aredis, "grouped", reads=READS)
    [taken] = await older.take(5)
    await older.leave_newer(taken.id, format_of(taken.body))  # the older replica could not read it
    assert await downgrade(queue, groups, newer) == 0, "alone, the newer replica keeps its own format"
    newer.follow([READS])  # the older replica's heartbeat is seen
    assert await downgrade(queue, groups, newer) == 2
    [back] = await older.take(5)
    assert format_of(back.body) == READS and Alert.model_validate_json(back.body).summary.repairs == ("next_steps",)
    [(_group, first)] = [(g, f) async for g, f in _firsts(aredis)]
    assert format_of(first) == READS


async def _firsts(client: aioredis.Redis):  # type: ignore[no-untyped-def]
    for group in await client.zrange(keys.groups_due("grouped"), 0, -1):
        yield group, (await client.hget(keys.group("grouped", group.decode()), "first")).decode()


def test_the_queue_scripts_stay_in_the_sinks_slot() -> None:
    queue = keys.sink_queue("hook")
    assert len({key_slot(k.encode()) for k in (queue.ready, queue.leased, queue.items, queue.newer)}) == 1


# --- nothing unreadable is lost --------------------------------------------------------------------


async def cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bridge", *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    return int(proc.returncode or 0), out.decode(), err.decode()


async def test_an_unreadable_item_is_kept_whole_and_retry_puts_it_back_in_its_queue(
    aredis: aioredis.Redis, redis_url: str, tmp_path: Path,
) -> None:
    body = make_alert().model_dump_json()[:-1] + ', "dead_letter": 3}' + " " * 20_000  # > the old 10,000 cap
    item = "2:100:orders:job-1:0123456789abcdef"
    await UndeliverableStore(aredis).push(unreadable_record("hook", item, body))
    cfg = write_config(tmp_path / "b.toml", {"redis": {"url": redis_url, "consumer_id": "cli"},
                                             "sinks": [{"name": "hook", "type": "webhook",
                                                        "url": "http://127.0.0.1:9/in", "secret": "s"}]})
    code, out, err = await cli("--config", str(cfg), "undeliverable", "retry")
    assert code == 0, out + err
    assert "put back in its sink's queue" in out
    assert await aredis.llen(keys.UNDELIVERABLE) == 0
    assert (await aredis.hget(keys.sink_queue("hook").items, item)).decode() == body, "the whole item"
    assert await aredis.zscore(keys.sink_queue("hook").ready, item) is not None


# --- releases --------------------------------------------------------------------------------------


async def test_version_is_printed_and_announced() -> None:
    code, out, _ = await cli("--version")
    assert code == 0 and out.strip() == f"dlq-bridge {__version__} (record formats 1-{READS})"


@pytest.mark.parametrize("path", ["CHANGELOG.md"])
def test_the_changelog_has_an_upgrading_note_for_this_release(path: str) -> None:
    text = (Path(__file__).resolve().parents[1] / path).read_text()
    entry = text.split(f"## {__version__}", 1)[1].split("\n## ", 1)[0]
    assert "### Upgrading" in entry, f"CHANGELOG.md's {__version__} entry has no Upgrading note"


async def test_healthz_metrics_and_the_heartbeat_say_the_release(
    aredis: aioredis.Redis, redis_url: str, tmp_path: Path,
) -> None:
    import httpx

    from tests.support.bridge_process import start_bridge, terminate, wait_healthz
    from tests.support.redis_server import free_port

    port = free_port()
    cfg = write_config(tmp_path / "b.toml", {"server": {"port": port}, "redis": {"url": redis_url,
                                                                                "consumer_id": "pod-v"}})
    proc = start_bridge(["--config", str(cfg), "run"])
    try:
        health = await asyncio.to_thread(wait_healthz, port, proc)
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics").text
    finally:
        terminate(proc)
    assert health["version"] == __version__ and health["record_formats"] == {"reads": READS, "writes": READS}
    assert f'dlq_bridge_build_info{{reads="{READS}",version="{__version__}"}} 1.0' in metrics
    assert f"dlq_bridge_record_format_written {float(READS)}" in metrics


async def test_an_item_0_1_0_could_not_read_goes_back_when_its_record_holds_it_all(aredis: aioredis.Redis) -> None:
    store = UndeliverableStore(aredis)
    whole, cut = make_alert(job_id="w").model_dump_json(), make_alert(job_id="c").model_dump_json()[:200]
    for item, raw in (("2:1:orders:w:0123456789abcdef", whole), ("2:1:orders:c:0123456789abcdef", cut)):
        # what 0.1.0 recorded: the first 10,000 bytes, and no word on whether that is all
        await aredis.lpush(keys.UNDELIVERABLE, json.dumps({"sink": "hook", "error": "unreadable queued alert",
                                                           "item": item, "body": {"raw": raw}, "at": 1.0}))
    results = [await store.requeue(stored) for stored in await store.records()]
    assert sorted(results) == [False, True]
    assert await aredis.hkeys(keys.sink_queue("hook").items) == [b"2:1:orders:w:0123456789abcdef"]


async def test_check_lists_the_fleet_and_says_what_waits_for_a_newer_replica(
    aredis: aioredis.Redis, redis_url: str, tmp_path: Path,
) -> None:
    await aredis.set(keys.heartbeat("old-1"), json.dumps({"host": "h1", "pid": 7, "at": 1.0}), ex=30)
    await aredis.set(keys.heartbeat("new-1"), json.dumps({"host": "h2", "pid": 8, "at": 1.0, "version": "0.2.0",
                                                          "reads": 2}), ex=30)
    queue = SinkQueue(aredis, "hook", reads=2)
    await queue.put("2:100:orders:job-1:0123456789abcdef", stamp(make_alert().model_dump_json(), 3))
    [taken] = await queue.take(1)
    await queue.leave_newer(taken.id, 3)
    cfg = write_config(tmp_path / "b.toml", {"redis": {"url": redis_url, "consumer_id": "cli"},
                                             "sinks": [{"name": "hook", "type": "webhook",
                                                        "url": "http://127.0.0.1:9/in", "secret": "s"}]})
    _code, out, _err = await cli("--config", str(cfg), "check", "--json")
    fleet = {r["target"]: (r["status"], r["detail"]) for r in json.loads(out) if r["component"] == "fleet"}
    assert fleet["old-1"][1].startswith("0.1.0 or older") and "formats 1-1" in fleet["old-1"][1]
    assert fleet["new-1"][1].startswith("0.2.0, reads record formats 1-2")
    assert fleet["record format"][0] == "warn" and "writes format 1" in fleet["record format"][1]
    assert fleet["hook"] == ("warn", "1 items of a newer format wait for a newer replica: keep one running until "
                                     "this is 0")


async def test_healthz_says_how_many_items_wait_for_a_newer_replica(aredis: aioredis.Redis) -> None:
    from bridge.core.health import Health, Status
    from bridge.core.metrics import Metrics
    from bridge.delivery.monitor import QueueMonitor

    queue, metrics, health = SinkQueue(aredis, "hook", reads=2), Metrics(), Health()
    monitor = QueueMonitor([queue], metrics, health, stale_s=60)
    await monitor.check()
    assert health.get("formats") is not None and health.get("formats").status is Status.OK  # type: ignore[union-attr]
    for n in range(2):
        await queue.put(f"2:10{n}:orders:job-{n}:0123456789abcdef", stamp(make_alert().model_dump_json(), 3))
    for taken in await queue.take(5):
        await queue.leave_newer(taken.id, 3)
    await monitor.check()
    check = health.get("formats")
    assert check is not None and check.status is Status.DEGRADED and not health.failing()
    assert check.detail == "2 items of a newer format wait for a newer replica (hook 2)"
    assert metrics.registry.get_sample_value("dlq_bridge_newer_format_items", {"sink": "hook"}) == 2


async def test_retry_beside_0_1_0_puts_an_item_back_in_the_format_0_1_0_reads(
    aredis: aioredis.Redis, redis_url: str, tmp_path: Path,
) -> None:
    """A rollback to 0.1.0: it recorded a format-2 item it could not read; retried from 0.2.0 while a
    0.1.0 replica is alive, the item goes back in format 1, which 0.1.0 reads."""
    await aredis.set(keys.heartbeat("old-1"), json.dumps({"host": "h", "pid": 7, "at": 1.0}), ex=30)
    item, body = "2:100:orders:r1:0123456789abcdef", RecordFormat().alert_json(alert_with_repairs())
    await aredis.lpush(keys.UNDELIVERABLE, json.dumps({"sink": "hook", "error": "unreadable queued alert",
                                                       "item": item, "body": {"raw": body}, "at": 1.0}))
    cfg = write_config(tmp_path / "b.toml", {"redis": {"url": redis_url, "consumer_id": "cli"},
                                             "sinks": [{"name": "hook", "type": "webhook",
                                                        "url": "http://127.0.0.1:9/in", "secret": "s"}]})
    code, out, err = await cli("--config", str(cfg), "undeliverable", "retry")
    assert code == 0, out + err
    queued = (await aredis.hget(keys.sink_queue("hook").items, item)).decode()
    assert format_of(queued) == 1 and "repairs" not in json.loads(queued)["summary"]


async def test_an_item_rewritten_for_this_replica_while_it_held_it_goes_back_to_ready(aredis: aioredis.Redis) -> None:
    """A newer replica rewrites an item (for an older replica that joined) after the older one took it
    and before it could leave it: the older one finds the rewrite and puts the item back to ready."""
    older = SinkQueue(aredis, "pd", reads=2)
    item = "2:100:orders:job-1:0123456789abcdef"
    await older.put(item, stamp(make_alert().model_dump_json(), 3))
    [taken] = await older.take(5)
    assert await older.rewrite(item, stamp(make_alert().model_dump_json(), 2), 2)
    assert not await older.leave_newer(taken.id, format_of(taken.body))
    assert (await older.stats()).newer == 0
    [again] = await older.take(5)
    assert format_of(again.body) == 2
