from __future__ import annotations

import io
import json

from bridge.core.models import Alert, Severity, SummarySource
from bridge.intake.chain import normalize
from bridge.sinks.console import ConsoleSink
from bridge.sinks.slack import render_card as slack_card
from bridge.summarize.fallback import FallbackSummarizer
from bridge.summarize.runbooks import RunbookCatalog
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
        "HTTPError: 403 Forbidden": "permission-denied",
        "HTTPError: 401 Unauthorized": "auth-failed",
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


# --- issue 10, defect 10: cards ------------------------------------------------------------

async def test_one_attempt_is_singular() -> None:
    s = await summarizer().summarize(normalize(envelope_entry(attempts=1), "dead_letter:orders"))
    assert s.title == "orders: ship_order failed after 1 attempt"


async def test_fallback_cards_show_the_last_error_once() -> None:
    """The fallback's cause is the error (the contract); the cards say it once, as the last error."""
    for error in ("TimeoutError: warehouse API timed out after 30s", "something odd happened at 12:00"):
        dl = normalize(envelope_entry(last_error=error), "dead_letter:orders")
        s = await summarizer().summarize(dl)
        assert s.likely_cause.startswith(error)
        card = json.dumps(slack_card(Alert(dead_letter=dl, summary=s)), ensure_ascii=False)
        assert card.count(error.split(": ")[-1]) == 1  # in "Last error", not again in "Likely cause"
        assert "Likely cause" not in card and "Last error" in card


async def test_a_model_cause_is_shown_beside_the_last_error() -> None:
    dl = normalize(envelope_entry(), "dead_letter:orders")
    s = (await summarizer().summarize(dl)).model_copy(update={"likely_cause": "The warehouse API is down."})
    card = json.dumps(slack_card(Alert(dead_letter=dl, summary=s)), ensure_ascii=False)
    assert "Likely cause" in card and "The warehouse API is down." in card and "Last error" in card


async def test_console_card_of_an_unparseable_entry_shows_its_text() -> None:
    dl = normalize(b'{"job_id": "half-written", "queue": "ord', "dead_letter:orders")
    assert dl.parse_error
    summary = await summarizer().summarize(dl)
    out = io.StringIO()
    await ConsoleSink(stream=out, color=False).send(Alert(dead_letter=dl, summary=summary))
    card = out.getvalue()
    assert '│ payload    {"job_id": "half-written", "queue": "ord' in card


async def test_console_card_shows_the_last_error_once_beside_the_cause() -> None:
    dl = normalize(envelope_entry(), "dead_letter:orders")
    summary = await summarizer().summarize(dl)
    card = io.StringIO()
    await ConsoleSink(stream=card, color=False).send(Alert(dead_letter=dl, summary=summary))
    assert card.getvalue().count("warehouse API timed out after 30s") == 1
    assert "│ error      TimeoutError: warehouse API timed out after 30s" in card.getvalue()


async def test_a_newcomers_card_says_no_gateway_is_configured_and_steps_name_the_real_queue_and_job() -> None:
    """Issue 34: not `(disabled)`, `<queue>` or `<id>`: a command on the card can be pasted as it is."""
    dl = normalize(envelope_entry(job_id="pay 1", last_error="RecordNotFound: no such record 7"), "dead_letter:orders")
    summary = await summarizer().summarize(dl)
    card = io.StringIO()
    await ConsoleSink(stream=card, color=False).send(Alert(dead_letter=dl, summary=summary))
    text = card.getvalue()
    assert "│ summary    fallback (no gateway configured)" in text and "(disabled)" not in text
    assert "<queue>" not in text and "<id>" not in text
    assert "dlq-bridge redrive orders --job-id 'pay 1'" in text, text
