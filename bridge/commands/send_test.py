"""`dlq-bridge send-test`: one clearly marked test alert to each configured sink.

The alert carries `is_test` (Slack, Teams and email show `[TEST]`, PagerDuty
`[TEST]` in the summary, webhooks `"test": true`, Alertmanager a `test="true"`
label) and a fresh job id, so it never collides
with a real alert; the ledger is not used. Prints one line per sink and exits
1 when any sink failed. Secrets (webhook URLs, routing keys) are never shown.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import secrets
import sys
from datetime import UTC, datetime
from typing import TextIO

from bridge.clients.http import build_http_client
from bridge.commands.common import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_OK, no_such_sink, render_table
from bridge.core.health import Health
from bridge.core.metrics import Metrics
from bridge.core.models import Alert, DeadLetter, Severity, Summary, SummarySource
from bridge.delivery.assembly import build_routes
from bridge.delivery.send import Deliverer, Result, Route
from bridge.settings import Settings

TEST_QUEUE = "dlq-bridge-test"
MAX_ATTEMPTS = 3
DEADLINE_S = 60.0

EPILOG = """examples:
  dlq-bridge send-test                     # every configured sink
  dlq-bridge send-test --sink slack-ops    # one sink
  dlq-bridge send-test --severity critical # PagerDuty pages at this severity

Up to 3 attempts per sink (Retry-After honoured), 60 s at most.
exit codes: 0 every sink accepted the alert, 1 a sink failed, 2 bad
configuration or usage, 4 no sink has the given --sink name (named on stderr)
"""


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("--sink", action="append", metavar="NAME", help="only this sink (repeatable)")
    parser.add_argument(
        "--severity", choices=[s.value for s in Severity], default="info", help="default: info"
    )


def run(settings: Settings, args: argparse.Namespace) -> int:
    return asyncio.run(send_test(settings, args.sink, Severity(args.severity), sys.stdout))


def test_alert(severity: Severity, consumer: str) -> Alert:
    now = datetime.now(UTC)
    job_id = f"send-test-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"
    dead_letter = DeadLetter(
        source_key=f"dead_letter:{TEST_QUEUE}",
        queue=TEST_QUEUE,
        job_id=job_id,
        job_name="dlq_bridge.send_test",
        attempts=1,
        correlation_id=f"send-test@{consumer}",
        last_error="TestAlert: sent by `dlq-bridge send-test`; nothing failed",
        first_failed_at=now.isoformat(timespec="seconds"),
        raw_digest=hashlib.sha256(job_id.encode()).hexdigest()[:16],
    )
    summary = Summary(
        title="TEST alert from dlq-bridge: delivery works",
        severity=severity,
        likely_cause="This is a test alert sent by `dlq-bridge send-test`; no job failed.",
        next_steps=["No action needed", "Resolve or delete this test alert"],
        source=SummarySource.FALLBACK,
        fallback_reason="send-test",
    )
    return Alert(dead_letter=dead_letter, summary=summary, severity=severity, is_test=True)


async def send_test(
    settings: Settings, only: list[str] | None, severity: Severity, out: TextIO
) -> int:
    http = build_http_client(settings.http)
    try:
        routes = build_routes(settings, http, out)
        chosen = [r for r in routes if not only or r.sink.name in only]
        unknown = sorted(set(only or []) - {r.sink.name for r in routes})
        if unknown:
            print(f"send-test: {no_such_sink(unknown, [r.sink.name for r in routes])}", file=sys.stderr)
            return EXIT_NOT_FOUND
        results = await deliver_all(settings, chosen, test_alert(severity, settings.redis.consumer_id))
    finally:
        await http.aclose()
    print(report(chosen, results), file=out)
    return EXIT_OK if all(r.outcome == "delivered" for r in results) else EXIT_FAILED


async def deliver_all(settings: Settings, routes: list[Route], alert: Alert) -> list[Result]:
    delivery = settings.delivery.model_copy(update={
        "max_attempts": min(settings.delivery.max_attempts, MAX_ATTEMPTS),
        "deadline_s": min(settings.delivery.deadline_s, DEADLINE_S),
    })
    deliverer = Deliverer(delivery, None, Metrics(), Health())
    return list(await asyncio.gather(*(deliverer.deliver(r, alert) for r in routes)))


def report(routes: list[Route], results: list[Result]) -> str:
    rows = []
    for route, result in zip(routes, results, strict=True):
        ok = result.outcome == "delivered"
        status = "ok" if ok else "FAILED"
        detail = f"{result.attempts} attempt{'s' if result.attempts != 1 else ''}"
        if not ok:
            detail += f": {(result.error or '')[:200]}"
        rows.append([route.sink.name, route.settings.type, status, detail])
    return render_table(["SINK", "TYPE", "RESULT", "DETAIL"], rows)
