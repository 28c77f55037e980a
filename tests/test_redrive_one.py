"""One redrive (issue 34): the shell does what the console does. `dlq-bridge redrive` reads the archive by
default, queues the resolves of every sink that resolves, lands in the audit list as `cli:<login>`, and
says in one line what moved, or which list it read and which flag reads another."""

from __future__ import annotations

import asyncio
import getpass
import json
from collections.abc import Callable
from pathlib import Path

import redis.asyncio as aioredis

from bridge.runtime import Runtime, open_runtime
from bridge.settings import Settings
from bridge.stores import keys
from bridge.stores.search_index import acted_key
from tests.conftest import envelope_entry
from tests.support.http_server import serve
from tests.support.ops import cli
from tests.support.receiver import Receiver, Reply

FAST = {"base_delay_s": 0.01, "max_delay_s": 0.05, "request_timeout_s": 2.0, "max_attempts": 2}
DLQ = "dead_letter:orders"


async def drain(runtime: Runtime) -> None:
    await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 30)


def sinks(pd_url: str, hook_url: str) -> list[dict[str, object]]:
    return [{"name": "pd", "type": "pagerduty", "group_by": "none", "routing_key": "rk",
             "events_url": f"{pd_url}/v2/enqueue"},
            {"name": "api", "type": "webhook", "url": f"{hook_url}/in", "secret": "x"}]


async def test_a_shell_redrive_of_an_alerted_job_resolves_its_incident_and_says_who(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, tmp_path: Path
) -> None:
    pd, hook = Receiver(default=Reply(202)), Receiver()
    await aredis.lpush(DLQ, envelope_entry(job_id="pay-1", attempts=5), envelope_entry(job_id="pay-2"))
    async with serve(pd.app) as p, serve(hook.app) as h:
        settings = make_settings(delivery=FAST, sinks=sinks(p, h))
        async with open_runtime(settings) as runtime:
            await drain(runtime)
            assert await aredis.llen(DLQ) == 0, "the bridge drained the DLQ"
            done = await cli(tmp_path / "bridge.toml", "redrive", "orders", "--job-id", "pay-1")
            await drain(runtime)  # the sink workers send the queued resolve
    assert done.code == 0, done
    assert done.out == (f"redrive: moved 1 entry from {keys.alerted(DLQ)} (its archive) to orders, attempts reset; "
                        "resolves queued for pd\n")
    assert [json.loads(x)["job_id"] for x in await aredis.lrange("orders", 0, -1)] == ["pay-1"]
    events = [json.loads(x.body) for x in pd.requests]
    assert sorted((e["event_action"], e["dedup_key"]) for e in events) == [
        ("resolve", "pay-1"), ("trigger", "pay-1"), ("trigger", "pay-2")]
    assert len(hook.requests) == 2, "a webhook does not resolve"
    (audit,) = [json.loads(x) for x in await aredis.lrange(keys.AUDIT, 0, -1)]
    assert (audit["who"], audit["action"], audit["target"], audit["outcome"]) == (
        f"cli:{getpass.getuser()}", "redrive", DLQ, "ok")
    (acted,) = [json.loads(v) for v in (await aredis.hgetall(acted_key(DLQ))).values()]
    assert [(a["who"], a["action"]) for a in acted] == [(f"cli:{getpass.getuser()}", "redrive")]


async def test_nothing_matched_is_one_line_naming_the_list_read_and_the_flag_that_reads_another(
    make_settings: Callable[..., Settings], aredis: aioredis.Redis, tmp_path: Path
) -> None:
    await aredis.lpush(DLQ, envelope_entry(job_id="pay-1"))
    async with open_runtime(make_settings()) as runtime:
        await drain(runtime)
    config = tmp_path / "bridge.toml"
    from_dlq = await cli(config, "redrive", "orders", "--from-dlq", "--job-id", "pay-1")
    quarantined = await cli(config, "redrive", "orders", "--quarantine", "--dry-run")
    archived = await cli(config, "redrive", "orders", "--job-id", "nope")
    assert archived.code == 4 and archived.err == (
        f"redrive: no entry of {keys.alerted(DLQ)} (its archive) has job id nope (1 entry scanned); "
        "the DLQ and its quarantine list hold nothing either\n")
    assert from_dlq.code == 4 and from_dlq.out == ""
    assert from_dlq.err == (f"redrive: no entry of {DLQ} (the DLQ) has job id pay-1 (0 entries scanned); "
                            "1 entry alerted and archived (the default reads them)\n")
    assert quarantined.code == 0 and quarantined.err == ""
    assert quarantined.out == (
        f"redrive (dry run): would move 0 of 0 scanned entries from {keys.quarantine(DLQ)} (its quarantine list) "
        f"to {DLQ}; nothing changed; 1 entry alerted and archived (the default reads them)\n")
    assert "work queue" not in quarantined.out
    assert await aredis.llen(keys.alerted(DLQ)) == 1
    audit = [json.loads(x) for x in await aredis.lrange(keys.AUDIT, 0, -1)]
    assert [(a["action"], a["outcome"]) for a in audit] == [("redrive", "refused")] * 2, "audited as a refusal"
