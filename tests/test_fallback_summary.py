from __future__ import annotations

import io
import json

from bridge.envelope import normalize
from bridge.models import Alert, Severity, SummarySource
from bridge.runbooks import RunbookCatalog
from bridge.sinks.console import ConsoleSink
from bridge.summarize.fallback import FallbackSummarizer
from tests.conftest import envelope_entry


def summarizer() -> FallbackSummarizer:
    severities = {"payments": Severity.CRITICAL}
    return FallbackSummarizer(RunbookCatalog.load(), lambda q: severities.get(q, Severity.ERROR))


def test_catalogue_has_the_required_runbooks() -> None:
    ids = set(RunbookCatalog.load().ids())
    assert {
        "timeout",
        "connection-refused",
        "auth-failed",
        "rate-limited",
        "schema-validation",
        "out-of-memory",
        "unparseable-payload",
        "unknown",
    } <= ids


async def test_fallback_names_queue_job_attempts_and_starts_with_the_error() -> None:
    dl = normalize(envelope_entry(queue="payments", attempts=5), "dead_letter:payments")
    s = await summarizer().summarize(dl)
    assert s.title == "payments: ship_order failed after 5 attempts"
    assert s.severity is Severity.CRITICAL
    assert s.likely_cause.startswith("TimeoutError: warehouse API timed out")
    assert s.runbook_hint == "timeout"
    assert s.source is SummarySource.FALLBACK and s.fallback_reason == "disabled"
    assert 1 <= len(s.next_steps) <= 4


async def test_runbooks_are_matched_by_error_patterns() -> None:
    cases = {
        "ConnectionRefusedError: [Errno 111] Connection refused": "connection-refused",
        "HTTPError: 403 Forbidden": "auth-failed",
        "429 Too Many Requests": "rate-limited",
        "pydantic ValidationError: 1 validation error": "schema-validation",
        "worker was OOMKilled (exit code 137)": "out-of-memory",
        "something odd happened": "unknown",
    }
    for error, runbook in cases.items():
        s = await summarizer().summarize(normalize(envelope_entry(last_error=error), "dead_letter:q"))
        assert s.runbook_hint == runbook, error


async def test_no_error_recorded_is_said_not_guessed() -> None:
    raw = json.dumps({"task_id": "t", "job_type": "x", "params": {}, "attempts": 2}).encode()
    s = await summarizer().summarize(normalize(raw, "dead_letter:q"))
    assert "No error was recorded" in s.likely_cause
    assert s.runbook_hint == "no-error-recorded"


async def test_unparseable_entry_gets_an_alert() -> None:
    s = await summarizer().summarize(normalize(b"\x00\xff", "dead_letter:q"))
    assert "unparseable" in s.title
    assert s.runbook_hint == "unparseable-payload"


async def test_long_errors_stay_within_limits() -> None:
    dl = normalize(envelope_entry(last_error="E" * 100_000, job_name="j" * 300), "dead_letter:q")
    s = await summarizer().summarize(dl)
    assert len(s.title) <= 120 and len(s.likely_cause) <= 500


async def test_console_card_shows_what_on_call_needs() -> None:
    dl = normalize(envelope_entry(), "dead_letter:orders")
    summary = await summarizer().summarize(dl)
    out = io.StringIO()
    await ConsoleSink(stream=out, color=False).send(Alert(dead_letter=dl, summary=summary))
    card = out.getvalue()
    for expected in (
        "dlq-bridge alert",
        summary.title,
        "ERROR",
        "orders",
        "ship_order",
        "job-1",
        "attempts   3",
        "TimeoutError",
        "step 1",
        "runbook    timeout",
        "fallback",
    ):
        assert expected in card, expected
