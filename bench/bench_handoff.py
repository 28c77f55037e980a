"""Drain rate with a paced sink: a Slack-like receiver (1 msg/s, 429 + Retry-After beyond) and a fast webhook.

Before the hand-off (issue 11) every entry held its worker slot until Slack
answered, so the drain ran at Slack's pace (1.00 entry/s). After it, the
entry is archived once its alert is queued for each sink; the webhook gets
everything at once and Slack drains its own queue at 1/s. Fallback
summaries (no gateway), so only delivery is measured. Receivers run in this
process (they answer at 1/s, so they cost nothing); the bridge runs in
process, non-burst, and is stopped when Slack has every alert.

    python -m bench.bench_handoff [--entries 60] [--drain-only]

`--drain-only` stops once every entry is archived and the webhook has all
(Slack's figure is then left out): for drain rates with many entries.

Runs against any checkout that has `bridge.runtime.open_runtime` (use it on
main for the before figure: PYTHONPATH=<main checkout> python -m bench.bench_handoff).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import redis.asyncio as aioredis
import uvicorn

from bench.common import _free_port, bench_redis_url, bench_settings, distinct_entry, run

SOURCE = "dead_letter:handoff"


SLACK_GAP_S = 0.95  # 1 msg/s, with 50 ms of arrival jitter forgiven (the sender paces at exactly 1.0 s)


class Receivers:
    """POST /slack/…: 200 at most once a second, else 429 Retry-After: 1. POST /hook/…: 200."""

    def __init__(self) -> None:
        self.slack_ok: list[float] = []
        self.slack_429 = 0
        self.hook_ok: list[float] = []
        self._last_slack = 0.0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        status, headers = self._answer(scope["path"], time.monotonic())
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})

    def _answer(self, path: str, now: float) -> tuple[int, list[tuple[bytes, bytes]]]:
        if path.startswith("/hook"):
            self.hook_ok.append(now)
            return 200, []
        if now - self._last_slack < SLACK_GAP_S:
            self.slack_429 += 1
            return 429, [(b"retry-after", b"1")]
        self._last_slack = now
        self.slack_ok.append(now)
        return 200, []


def toml(base: str) -> str:
    return (
        "[delivery]\nbase_delay_s = 0.05\nmax_delay_s = 1.0\n"
        f'[[sinks]]\nname = "slack"\ntype = "slack"\nurl = "{base}/slack/T/B/X"\nmessages_per_second = 1\n'
        f'[[sinks]]\nname = "api"\ntype = "webhook"\nurl = "{base}/hook/in"\nsecret = "bench-secret"\n'
    )


async def watch(
    client: aioredis.Redis, receivers: Receivers, n: int, started: float, wanted: int
) -> dict[str, float]:
    """Seconds from start until every entry is archived, the webhook has all, Slack has all."""
    marks: dict[str, float] = {}
    archive = f"dlq_bridge:alerted:{{{SOURCE}}}"
    while len(marks) < wanted and time.monotonic() - started < n * 3 + 60:
        now = time.monotonic() - started
        if "archived" not in marks and int(await client.llen(archive)) >= n:
            marks["archived"] = now
        if "webhook" not in marks and len(receivers.hook_ok) >= n:
            marks["webhook"] = now
        if "slack" not in marks and len(receivers.slack_ok) >= n:
            marks["slack"] = now
        await asyncio.sleep(0.01)
    return marks


async def main(n: int, drain_only: bool) -> None:
    from bridge.runtime import open_runtime

    url, server = bench_redis_url(12)
    receivers, port = Receivers(), _free_port()
    web = uvicorn.Server(uvicorn.Config(receivers, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    web_task = asyncio.create_task(web.serve())
    client = aioredis.Redis.from_url(url)
    try:
        while not web.started:
            await asyncio.sleep(0.01)
        await client.flushdb()
        await client.lpush(SOURCE, *[distinct_entry(i, "handoff") for i in range(n)])
        settings = bench_settings(url, toml(f"http://127.0.0.1:{port}"))
        async with open_runtime(settings) as runtime:
            stop = asyncio.Event()
            started = time.monotonic()
            task = asyncio.create_task(runtime.pipeline.run(stop))
            marks = await watch(client, receivers, n, started, 2 if drain_only else 3)
            stop.set()
            await asyncio.wait_for(task, 30)
        report(n, marks, receivers)
    finally:
        await client.flushdb()
        await client.aclose()
        web.should_exit = True
        await web_task
        if server:
            server.stop()


def report(n: int, marks: dict[str, float], receivers: Receivers) -> None:
    print(f"hand-off: {n} entries; sinks: Slack-like 1 msg/s (429 Retry-After: 1 beyond) + a fast webhook")
    if "archived" not in marks or "webhook" not in marks:
        print(f"  gave up waiting: {marks} (Slack {len(receivers.slack_ok)}, webhook {len(receivers.hook_ok)})")
        return
    print(f"  all archived (DLQ drained) after {marks['archived']:6.2f} s = {n / marks['archived']:8.2f} entries/s")
    print(f"  webhook had all after        {marks['webhook']:6.2f} s")
    if "slack" in marks:
        print(f"  Slack had all after          {marks['slack']:6.2f} s = {n / marks['slack']:8.2f} msg/s")
    else:
        print(f"  Slack had {len(receivers.slack_ok)} by then (not waited for: --drain-only)")
    print(f"  Slack 429s provoked: {receivers.slack_429}")
    print(json.dumps({"entries": n, **{k: round(v, 3) for k, v in marks.items()}, "slack_429": receivers.slack_429}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=60)
    parser.add_argument("--drain-only", action="store_true", help="stop once archived and the webhook has all")
    args = parser.parse_args()
    run(main(args.entries, args.drain_only))
