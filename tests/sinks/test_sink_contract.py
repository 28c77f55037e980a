"""One contract every sink type passes, subclassed per type (like saq's `TestQueue`), against real
local HTTP receivers: it renders the job, one `send` is one request carrying what `render` gave, a
429 is retryable with its Retry-After, a 5xx retryable, a 4xx permanent, and a group of one renders
exactly as the single alert. Each sink is built through its plug-in (bridge/sinks/sink_registry.py)."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import httpx
import pytest

from bridge.core.errors import SinkPermanent, SinkRetryable
from bridge.core.models import Alert, GroupJob, Notification
from bridge.sinks.sink import Sink
from bridge.sinks.sink_plugin import SinkContext
from bridge.sinks.sink_registry import SINKS
from tests.support.http_server import serve
from tests.support.receiver import Received, Receiver, Reply, make_alert

T0 = 1_800_000_000.0


def group_of_one(alert: Alert) -> Notification:
    job = GroupJob.of(alert, T0)
    return Notification(
        sink="s", group_key=f"fp:{alert.dead_letter.fingerprint}", kind="single", sequence=1, count=1, new_count=1,
        previous_at=None, first_seen=T0, last_seen=T0, queues=[alert.dead_letter.queue],
        queue_counts={alert.dead_letter.queue: 1}, sample_job_ids=[alert.dead_letter.job_id],
        severity=alert.severity, first=alert, jobs=[job], opened_at=T0, claim="t",
    )


class SinkContract:
    """Every sink: subclass with `type` (the plug-in's type name) and `table(base_url)` (its table)."""

    type: ClassVar[str]

    def table(self, base_url: str) -> dict[str, Any]:
        raise NotImplementedError

    @pytest.fixture
    async def http(self) -> AsyncIterator[httpx.AsyncClient]:
        async with httpx.AsyncClient(trust_env=False) as client:
            yield client

    def build(self, base_url: str, http: httpx.AsyncClient, stdout: io.StringIO | None = None) -> Sink:
        plugin = SINKS.named(self.type)
        settings = plugin.settings.model_validate({"name": f"contract-{self.type}", "type": self.type,
                                                   **self.table(base_url)})
        return plugin.build(settings, SinkContext(http, 5.0, "contract-1", stdout))

    def test_render_names_the_job_and_its_queue(self, http: httpx.AsyncClient) -> None:
        alert = make_alert(queue="billing", job_id="inv-4711")
        text = json.dumps(self.build("http://127.0.0.1:9", http).render(alert), ensure_ascii=False)
        assert "inv-4711" in text and "billing" in text

    def test_a_group_of_one_renders_as_the_single_alert(self, http: httpx.AsyncClient) -> None:
        alert = make_alert(job_id="solo-1")
        sink = self.build("http://127.0.0.1:9", http)
        assert sink.render_group(group_of_one(alert)) == sink.render(alert)


class HttpSinkContract(SinkContract):
    """A sink that posts to an HTTP receiver: also one request per send and the answer mapping."""

    def sent_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """The part of a received request body that `render` produced (a sink may add fields)."""
        return body

    def received_body(self, request: Received) -> Any:
        """A received request's body as its receiver reads it (a CloudEvents receiver: through the SDK)."""
        return json.loads(request.body)

    async def test_one_send_is_one_request_with_the_rendered_body(self, http: httpx.AsyncClient) -> None:
        receiver = Receiver(default=Reply(202))
        alert = make_alert(job_id="once-1")
        async with serve(receiver.app) as base:
            sink = self.build(base, http)
            await sink.send(alert)
        assert len(receiver.requests) == 1
        assert self.sent_body(self.received_body(receiver.requests[0])) == sink.render(alert)

    @pytest.mark.parametrize(("status", "error"), [(429, SinkRetryable), (503, SinkRetryable), (500, SinkRetryable),
                                                   (400, SinkPermanent), (404, SinkPermanent)])
    async def test_answers_map_to_retryable_or_permanent(
        self, http: httpx.AsyncClient, status: int, error: type[Exception]
    ) -> None:
        headers = {"Retry-After": "7"} if status == 429 else {}
        receiver = Receiver(default=Reply(status, headers=headers, body="no"))
        async with serve(receiver.app) as base:
            with pytest.raises(error) as raised:
                await self.build(base, http).send(make_alert())
        assert len(receiver.requests) == 1, "one attempt per send: retries belong to bridge.delivery"
        assert self.received_body(receiver.requests[0])  # a refused request was a well-formed one too
        if status == 429:
            assert isinstance(raised.value, SinkRetryable) and raised.value.retry_after_s == 7.0


class TestSlackContract(HttpSinkContract):
    type = "slack"

    def table(self, base_url: str) -> dict[str, Any]:
        return {"url": f"{base_url}/slack"}


class TestPagerDutyContract(HttpSinkContract):
    type = "pagerduty"

    def table(self, base_url: str) -> dict[str, Any]:
        return {"routing_key": "R0UTING", "events_url": f"{base_url}/v2/enqueue"}

    def sent_body(self, body: dict[str, Any]) -> dict[str, Any]:
        assert body.pop("routing_key") == "R0UTING"
        return body


class TestWebhookContract(HttpSinkContract):
    type = "webhook"

    def table(self, base_url: str) -> dict[str, Any]:
        return {"url": f"{base_url}/hook", "secret": "whsec_contract"}


class TestConsoleContract(SinkContract):
    type = "console"

    def table(self, base_url: str) -> dict[str, Any]:
        return {"color": False}

    async def test_one_send_prints_one_card(self, http: httpx.AsyncClient) -> None:
        out = io.StringIO()
        sink = self.build("", http, stdout=out)
        await sink.send(make_alert(job_id="printed-1"))
        assert out.getvalue().count("printed-1") == 1
