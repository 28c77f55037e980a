"""Retry predicate and wait computation (respx for the HTTP side, no real sleeps); the URL
scrubbing is also checked over loopback against a real receiver."""

from __future__ import annotations

import asyncio
import random
import time
from email.utils import formatdate

import httpx
import pytest
import respx
from pydantic import SecretStr

from bridge.clients.http import build_http_client, parse_retry_after
from bridge.core.errors import SinkError, SinkPermanent, SinkRetryable
from bridge.delivery.retry import backoff_s, is_retryable, retrying, wait_s
from bridge.settings import DeliverySettings, HttpSettings
from bridge.sinks.slack import SlackSink
from tests.support.receiver import make_alert

URL = "https://hooks.slack.test/services/T000/B000/SECRETPART"
SETTINGS = DeliverySettings(base_delay_s=1.0, max_delay_s=8.0, max_retry_after_s=30.0)


async def attempt_error(response: httpx.Response | Exception) -> SinkError | None:
    """What one Slack attempt raises when the server answers `response`."""
    with respx.mock:
        route = respx.post(URL)
        if isinstance(response, Exception):
            route.side_effect = response
        else:
            route.return_value = response
        async with httpx.AsyncClient() as http:
            try:
                await SlackSink("slack", SecretStr(URL), http).send(make_alert())
            except SinkError as exc:
                return exc
    return None


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504, 599])
async def test_retryable_statuses(status: int) -> None:
    exc = await attempt_error(httpx.Response(status))
    assert isinstance(exc, SinkRetryable) and exc.status == status
    assert is_retryable(exc)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 410, 413, 422, 301])
async def test_permanent_statuses(status: int) -> None:
    exc = await attempt_error(httpx.Response(status))
    assert isinstance(exc, SinkPermanent) and exc.status == status
    assert not is_retryable(exc)


@pytest.mark.parametrize(
    "error",
    [httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), httpx.ConnectTimeout("slow"),
     httpx.RemoteProtocolError("eof")],
)
async def test_timeouts_and_connection_errors_are_retryable(error: Exception) -> None:
    exc = await attempt_error(error)
    assert isinstance(exc, SinkRetryable) and exc.status is None


async def test_success_raises_nothing_and_errors_never_contain_the_url() -> None:
    assert await attempt_error(httpx.Response(200, text="ok")) is None
    exc = await attempt_error(httpx.Response(400, text=f"invalid_payload for {URL}"))
    assert exc is not None and "SECRETPART" not in str(exc) and "HTTP 400" in str(exc)
    exc = await attempt_error(httpx.ConnectError(f"cannot reach {URL}"))
    assert exc is not None and "SECRETPART" not in str(exc)


async def test_over_loopback_errors_never_contain_the_url() -> None:
    """The same over a real receiver on loopback and the bridge's own client: the answer echoes the
    URL (raw and JSON-escaped), and a refused connection names the address it tried."""
    from tests.support.http_server import serve
    from tests.support.receiver import Receiver, Reply
    from tests.support.redis_server import free_port

    secret_path = "services/T000/B000/SECRETPART"
    echo = Receiver(script=[Reply(400, body=f"invalid_payload for /{secret_path}"),
                            Reply(503, body='{"url": "' + secret_path.replace("/", "\\/") + '"}')])
    async with serve(echo.app) as base, build_http_client(HttpSettings()) as http:
        errors = []
        for url in (f"{base}/{secret_path}", f"{base}/{secret_path}", f"http://127.0.0.1:{free_port()}/{secret_path}"):
            try:
                await SlackSink("slack", SecretStr(url), http).send(make_alert())
            except SinkError as exc:
                errors.append(exc)
    assert [type(e) for e in errors] == [SinkPermanent, SinkRetryable, SinkRetryable], errors
    assert [e.status for e in errors] == [400, 503, None]
    assert [r.path for r in echo.requests] == [secret_path, secret_path], "it did reach the receiver"
    leaks = [str(e) for e in errors if "SECRETPART" in f"{e} {e.detail}"]
    assert not leaks, leaks


async def test_retry_after_seconds_is_parsed_from_a_429() -> None:
    exc = await attempt_error(httpx.Response(429, headers={"Retry-After": "7"}))
    assert exc is not None and exc.retry_after_s == 7.0
    assert wait_s(1, exc, SETTINGS, random.Random(1)) == 7.0


async def test_retry_after_http_date_is_parsed_from_a_503() -> None:
    date = formatdate(time.time() + 12, usegmt=True)
    exc = await attempt_error(httpx.Response(503, headers={"Retry-After": date}))
    assert exc is not None and exc.retry_after_s is not None
    assert 10.5 <= wait_s(1, exc, SETTINGS, random.Random(1)) <= 12.0


def test_parse_retry_after_edge_cases() -> None:
    now = 1_800_000_000.0
    assert parse_retry_after("0", now) == 0.0
    assert parse_retry_after(" 3 ", now) == 3.0
    assert parse_retry_after(formatdate(now - 60, usegmt=True), now) == 0.0  # in the past
    assert parse_retry_after(formatdate(now + 90, usegmt=True), now) == 90.0
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after("", now) is None
    assert parse_retry_after(None, now) is None
    assert parse_retry_after("86400", now) == 300.0  # one parser for sinks and gateway: capped
    zoneless = formatdate(now + 30, usegmt=True).replace(" GMT", " -0000")
    assert parse_retry_after(zoneless, now) == 30.0  # a date without a zone is UTC


def test_a_long_retry_after_is_cut_to_the_cap_not_given_up_on() -> None:
    exc = SinkRetryable("s", "HTTP 429", status=429, retry_after_s=3600)
    assert wait_s(1, exc, SETTINGS, random.Random(1)) == SETTINGS.max_retry_after_s


async def test_a_sink_s_retry_after_is_honoured_up_to_the_configured_cap_not_a_fixed_one() -> None:
    """`max_retry_after_s = 1800`: a receiver asking for 30 minutes gets 30 minutes, not 5."""
    patient = DeliverySettings(base_delay_s=1.0, max_delay_s=8.0, max_retry_after_s=1800.0)
    exc = await attempt_error(httpx.Response(429, headers={"Retry-After": "1800"}))
    assert isinstance(exc, SinkRetryable)
    assert wait_s(1, exc, patient, random.Random(1)) == 1800.0
    assert wait_s(1, exc, SETTINGS, random.Random(1)) == 30.0, "and still cut to a smaller cap"
    nan = await attempt_error(httpx.Response(503, headers={"Retry-After": "nan"}))
    assert isinstance(nan, SinkRetryable) and nan.retry_after_s is None, "unreadable: plain backoff"


def test_full_jitter_stays_inside_the_growing_window() -> None:
    rng = random.Random(7)
    for retry, window in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (10, 8.0), (500, 8.0)]:
        waits = [backoff_s(retry, SETTINGS, rng) for _ in range(300)]
        assert all(0.0 <= w <= window for w in waits)
        assert max(waits) > window * 0.8, "jitter should use the whole window"
        assert min(waits) < window * 0.2


def test_without_retry_after_the_wait_is_jitter() -> None:
    exc = SinkRetryable("s", "HTTP 503", status=503)
    waits = [wait_s(3, exc, SETTINGS, random.Random(i)) for i in range(50)]
    assert all(0 <= w <= 4.0 for w in waits) and len(set(waits)) > 1


async def run_loop(
    settings: DeliverySettings, errors: list[Exception]
) -> tuple[int, list[float], SinkError | None]:
    """Drive the tenacity loop with fake sleeps; returns (attempts, waits, final error)."""
    waits: list[float] = []
    attempts = 0

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)

    try:
        async for attempt in retrying(settings, sleep=fake_sleep, rng=random.Random(3)):
            with attempt:
                attempts += 1
                if errors:
                    raise errors.pop(0)
    except SinkError as exc:
        return attempts, waits, exc
    return attempts, waits, None


async def test_loop_honours_retry_after_then_succeeds() -> None:
    errors: list[Exception] = [SinkRetryable("s", "HTTP 429", status=429, retry_after_s=2.0),
                               SinkRetryable("s", "HTTP 503", status=503)]
    attempts, waits, error = await run_loop(SETTINGS, errors)
    assert attempts == 3 and error is None
    assert waits[0] == 2.0 and 0 <= waits[1] <= 2.0


async def test_loop_stops_at_max_attempts() -> None:
    settings = DeliverySettings(max_attempts=4, base_delay_s=0.0)
    attempts, waits, error = await run_loop(settings, [SinkRetryable("s", "HTTP 503", status=503)] * 10)
    assert attempts == 4 and len(waits) == 3 and isinstance(error, SinkRetryable)


async def test_loop_never_retries_a_permanent_error() -> None:
    attempts, waits, error = await run_loop(SETTINGS, [SinkPermanent("s", "HTTP 400", status=400)])
    assert attempts == 1 and waits == [] and isinstance(error, SinkPermanent)


async def test_loop_gives_up_at_the_deadline() -> None:
    """Counts and order, not speed: it retries until the deadline has passed, then stops (long
    before max_attempts), and no attempt follows one that failed after the deadline."""
    settings = DeliverySettings(max_attempts=100, base_delay_s=0.0, deadline_s=0.3)
    started = time.monotonic()
    failed_at: list[float] = []  # seconds since the start at which each attempt failed
    with pytest.raises(SinkRetryable):
        async for attempt in retrying(settings):
            with attempt:
                await asyncio.sleep(0.05)
                failed_at.append(time.monotonic() - started)
                raise SinkRetryable("s", "HTTP 503", status=503)
    assert 2 <= len(failed_at) < settings.max_attempts, "the deadline stopped it, not max_attempts"
    assert failed_at[-1] >= settings.deadline_s, "it kept retrying until the deadline"
    assert all(t < settings.deadline_s for t in failed_at[:-1]), "nothing was tried after the deadline"


async def test_sink_errors_carry_status_and_detail_as_fields() -> None:
    exc = await attempt_error(httpx.Response(400, text="invalid_blocks"))
    assert isinstance(exc, SinkPermanent)
    assert (exc.sink, exc.status, exc.detail) == ("slack", 400, "HTTP 400: invalid_blocks")
    assert str(exc) == "sink slack: HTTP 400: invalid_blocks"
    exc = await attempt_error(httpx.ConnectError("refused"))
    assert exc is not None and exc.status is None
    assert exc.detail == "cannot connect (ConnectError)", "no socket error behind it: cannot tell more"
