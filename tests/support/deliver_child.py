"""A separate process that delivers alerts the way a replica does (for fleet-wide tests).

    python -m tests.support.deliver_child <config.toml> <sink> <job prefix> <count> [<spacing s>]

Builds its routes, ledger and limiter from the config exactly as the runtime
does (its own Redis and HTTP clients), delivers `count` alerts concurrently to
`sink` (or, with a spacing, one after another, starting one every `spacing`
seconds), and prints one JSON line: the outcomes and its rate-limit wait metrics.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import redis.asyncio as aioredis

from bridge.clients.http import build_http_client
from bridge.core.health import Health
from bridge.core.metrics import Metrics
from bridge.delivery.assembly import build_ledger, build_routes
from bridge.delivery.send import Deliverer
from bridge.settings import load_settings
from tests.support.receiver import make_alert


async def run(config: Path, sink: str, prefix: str, count: int, spacing_s: float = 0.0) -> dict[str, object]:
    settings = load_settings(config, {})
    assert settings.redis.url is not None
    client = aioredis.Redis.from_url(settings.redis.url.get_secret_value())
    http = build_http_client(settings.http)
    metrics = Metrics()
    try:
        routes = {r.sink.name: r for r in build_routes(settings, http, client=client, metrics=metrics)}
        deliverer = Deliverer(settings.delivery, build_ledger(settings, client), metrics, Health())
        alerts = [make_alert(job_id=f"{prefix}-{i}") for i in range(count)]
        if spacing_s > 0:
            results = []
            for alert in alerts:
                results.append(await deliverer.deliver(routes[sink], alert))
                await asyncio.sleep(spacing_s)
        else:
            results = await asyncio.gather(*(deliverer.deliver(routes[sink], a) for a in alerts))
    finally:
        await http.aclose()
        await client.aclose()
    registry = metrics.registry
    return {
        "outcomes": [r.outcome for r in results],
        "waits": registry.get_sample_value("dlq_bridge_rate_limit_waits_total", {"sink": sink}) or 0.0,
        "wait_seconds": registry.get_sample_value(
            "dlq_bridge_rate_limit_wait_seconds_total", {"sink": sink}) or 0.0,
    }


def main() -> None:
    config, sink, prefix, count = sys.argv[1:5]
    spacing = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    print(json.dumps(asyncio.run(run(Path(config), sink, prefix, int(count), spacing))), flush=True)


if __name__ == "__main__":
    main()
