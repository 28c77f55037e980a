"""A sink type added as a plug-in from this test module alone: configured, delivered, silenced,
listed by `check` and in the config reference, without touching any product file
(docs/architecture.md, "How to add a sink")."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal

import httpx
import pytest
import redis.asyncio as aioredis
from pydantic import Field

from bridge.commands.check import check_all
from bridge.commands.config_reference import reference
from bridge.core.errors import ConfigError
from bridge.core.models import Alert, Notification
from bridge.runtime import open_runtime
from bridge.settings import Settings, load_settings
from bridge.sinks.http_errors import post
from bridge.sinks.sink_plugin import SinkPlugin
from bridge.sinks.sink_registry import SINKS
from bridge.sinks.sink_settings import SinkSettingsBase
from bridge.stores import keys
from bridge.stores.silences import Silence, SilenceStore
from tests.conftest import envelope_entry
from tests.support.http_server import serve
from tests.support.receiver import Receiver


class ToySinkSettings(SinkSettingsBase):
    type: Literal["toy"] = Field(description="Sink type.")
    url: str = Field(description="Where the toy posts its line.")


class ToySink:
    """Posts `{"line": "<queue> <job id>"}` through the shared `post` (429/5xx retryable, 4xx permanent)."""

    def __init__(self, name: str, url: str, http: httpx.AsyncClient) -> None:
        self.name, self._url, self._http = name, url, http

    def render(self, alert: Alert) -> dict[str, Any]:
        return {"line": f"{alert.dead_letter.queue} {alert.dead_letter.job_id}"}

    def render_group(self, notification: Notification) -> dict[str, Any]:
        return {"line": f"{notification.count} jobs"}

    async def send(self, alert: Alert) -> None:
        await self._post(self.render(alert), alert.idempotency_key)

    async def send_group(self, notification: Notification) -> None:
        await self._post(self.render_group(notification), notification.group_key)

    async def _post(self, body: dict[str, Any], key: str) -> None:
        await post(self._http, self.name, key, self._url, content=json.dumps(body).encode(),
                   headers={"content-type": "application/json"}, timeout_s=5.0)


TOY = SinkPlugin(
    settings=ToySinkSettings,
    build=lambda s, ctx: ToySink(s.name, s.url, ctx.http),
    probe_url=lambda s: s.url,
)


@pytest.fixture
def toy() -> Iterator[SinkPlugin[ToySinkSettings]]:
    with SINKS.added(TOY) as plugin:
        yield plugin


def test_a_toy_table_is_validated_by_the_plug_in_model(toy: SinkPlugin[ToySinkSettings], tmp_path: Any) -> None:
    path = tmp_path / "bridge.toml"
    path.write_text('[[sinks]]\ntype = "toy"\nname = "t"\nurl = "http://127.0.0.1:9/x"\n')
    settings = load_settings(path, environ={})
    assert [type(s) for s in settings.sinks] == [ToySinkSettings]
    path.write_text('[[sinks]]\ntype = "toy"\nname = "t"\n')
    with pytest.raises(ConfigError) as missing:
        load_settings(path, environ={})
    assert missing.value.problems == ['sinks["t"].url: required key is missing']
    assert '`[[sinks]] type = "toy"` | `url` |' in reference(), "the config reference lists the new table"


def test_without_the_plug_in_the_type_is_refused(tmp_path: Any) -> None:
    path = tmp_path / "bridge.toml"
    path.write_text('[[sinks]]\ntype = "toy"\nname = "t"\nurl = "http://127.0.0.1:9/x"\n')
    with pytest.raises(ConfigError) as refused:
        load_settings(path, environ={})
    assert refused.value.problems == ['sinks["t"]: type must be one of ' + ", ".join(SINKS.types())]


async def test_the_toy_sink_is_delivered_and_held_back_by_a_silence(
    toy: SinkPlugin[ToySinkSettings], make_settings: Callable[..., Settings], aredis: aioredis.Redis
) -> None:
    receiver = Receiver()
    async with serve(receiver.app) as base:
        settings = make_settings(sinks=[{"name": "t", "type": "toy", "url": f"{base}/toy", "group_by": "none"}])
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o1"))
        async with open_runtime(settings) as runtime:
            await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 30)
        assert [json.loads(r.body) for r in receiver.requests] == [{"line": "orders o1"}]

        now = time.time()
        await SilenceStore(aredis).put(Silence(id="quiet", queue="orders", starts_at=now - 1, ends_at=now + 600))
        await aredis.lpush("dead_letter:orders", envelope_entry(job_id="o2"))
        async with open_runtime(settings) as runtime:
            await asyncio.wait_for(runtime.pipeline.run(asyncio.Event(), burst=True), 30)
    assert len(receiver.requests) == 1, "a toy sink notifies people (the default trait): the silence holds it"
    assert await aredis.llen(keys.alerted("dead_letter:orders")) == 2, "the silenced entry is still archived"


async def test_check_lists_and_probes_the_toy_sink(
    toy: SinkPlugin[ToySinkSettings], make_settings: Callable[..., Settings]
) -> None:
    receiver = Receiver()
    async with serve(receiver.app) as base:
        settings = make_settings(sinks=[{"name": "t", "type": "toy", "url": f"{base}/toy"}])
        results = await check_all(settings, 5.0)
    assert "sinks: t (toy)" in results[0].detail
    row = next(r for r in results if r.component == "sink t")
    assert row.status == "ok" and row.target.startswith("toy http://127.0.0.1:"), row
