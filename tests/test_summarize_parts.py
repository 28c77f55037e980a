"""Small parts of the summarizer: JSON extraction, breaker, budget, Retry-After, prompt."""

from __future__ import annotations

import json

import pytest

from bridge.errors import SummaryError
from bridge.http import parse_retry_after
from bridge.runbooks import RunbookCatalog
from bridge.summarize.breaker import BreakerState, CircuitBreaker
from bridge.summarize.budget import CallBudget
from bridge.summarize.prompt import load_system_prompt, user_message
from bridge.summarize.reply import extract_json_object, parse_reply
from tests.test_summarize_gateway import VALID, dead_letter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": {"b": [1, "}"]}}\n```', {"a": {"b": [1, "}"]}}),
        ('noise {bad} [1,2] {"a": 2} {"a": 3}', {"a": 2}),
        ("no object at all", None),
        ("[1, 2, 3]", None),
        ("", None),
        ("{" * 5000, None),
    ],
)
def test_extract_first_object(text: str, expected: object) -> None:
    assert extract_json_object(text) == expected


def test_parse_reply_strips_control_chars_and_keeps_limits() -> None:
    reply = {**VALID, "title": "orders\u202e: bad\x07 " + "www.x.io " * 10}
    draft = parse_reply(json.dumps(reply), {"timeout"})
    assert "\u202e" not in draft.title and "\x07" not in draft.title
    assert len(draft.title) <= 120 and "www.x.io" not in draft.title


def test_parse_reply_rejects_type_coercion() -> None:
    with pytest.raises(SummaryError) as err:
        parse_reply(json.dumps({**VALID, "next_steps": [1, 2]}), {"timeout"})
    assert err.value.reason == "schema"


def test_breaker_cycle() -> None:
    clock = Clock()
    breaker = CircuitBreaker(2, 10.0, clock)
    breaker.record_failure()
    assert breaker.allow() and breaker.state is BreakerState.CLOSED
    breaker.record_failure()
    assert breaker.state is BreakerState.OPEN and not breaker.allow()
    clock.now += 10
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.allow() and not breaker.allow()  # one probe at a time
    breaker.record_failure()  # the probe failed: open again for a full cool-down
    assert breaker.state is BreakerState.OPEN
    clock.now += 9.9
    assert not breaker.allow()
    clock.now += 0.1
    assert breaker.allow()
    breaker.abandon()
    assert breaker.allow()
    breaker.record_success()
    assert breaker.state is BreakerState.CLOSED and breaker.consecutive_failures == 0


def test_breaker_pause() -> None:
    clock = Clock()
    breaker = CircuitBreaker(5, 10.0, clock)
    breaker.pause(3)
    assert breaker.paused and not breaker.allow()
    clock.now += 3
    assert breaker.allow()


def test_budget_window() -> None:
    clock = Clock()
    budget = CallBudget(3, clock)
    assert [budget.try_acquire() for _ in range(4)] == [True, True, True, False]
    assert budget.remaining() == 0
    clock.now += 59.9
    assert not budget.try_acquire()
    clock.now += 0.1
    assert budget.try_acquire() and budget.remaining() == 2
    unlimited = CallBudget(0, clock)
    assert all(unlimited.try_acquire() for _ in range(1000))


def test_retry_after_forms() -> None:
    assert parse_retry_after("12") == 12.0
    assert parse_retry_after("100000") == 300.0
    assert parse_retry_after("-5") == 0.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    when = parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now=1445412500.0)
    assert when == 10.0


def test_system_prompt_has_rules_and_catalogue() -> None:
    catalog = RunbookCatalog.load()
    prompt = load_system_prompt(catalog.catalogue())
    for runbook_id in catalog.ids():
        assert f"- {runbook_id}: " in prompt
    assert "runbook_hint" in prompt and "fewer" not in prompt.split("Runbook catalogue")[1]


def test_user_message_is_redacted_json() -> None:
    dl = dead_letter(last_error="boom password=hunter2 Authorization: Bearer abcdefghijklmnop")
    text = user_message(dl)
    assert "hunter2" not in text and "abcdefghijklmnop" not in text
    assert json.loads(text)["queue"] == "orders"
