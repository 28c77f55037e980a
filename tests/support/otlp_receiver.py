"""A real OTLP/HTTP traces receiver on loopback, decoding with the official `opentelemetry-proto` messages.

`OtlpReceiver` runs in a thread (the bridge under test is a subprocess) and keeps every span it was sent
as a `ReceivedSpan`. `SilentCollector` accepts connections and never answers (a collector that hangs);
a closed port is a collector that is down.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request, Response
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from tests.support.http_server import ThreadedServer
from tests.support.ports import free_port

KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


def value_of(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [value_of(v) for v in value.array_value.values]
    return getattr(value, which) if which else None


def attributes_of(pairs: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in pairs if isinstance(kv, KeyValue)}


@dataclass(frozen=True)
class ReceivedLink:
    trace_id: str
    span_id: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    links: list[ReceivedLink] = field(default_factory=list)
    status_code: int = 0  # 0 unset, 1 ok, 2 error
    start_ns: int = 0
    end_ns: int = 0


class OtlpReceiver:
    """POST /v1/traces (application/x-protobuf), decoded; `spans` in arrival order."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        self.app = FastAPI()
        self.app.post("/v1/traces")(self._export)
        self._server = ThreadedServer(self.app)
        self.endpoint = f"{self._server.url}/v1/traces"

    def __enter__(self) -> OtlpReceiver:
        self._server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.__exit__(*exc)

    async def _export(self, request: Request) -> Response:
        message = ExportTraceServiceRequest.FromString(await request.body())
        decoded = [
            self._span(span, attributes_of(resource_spans.resource.attributes))
            for resource_spans in message.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        with self._lock:
            self.requests += 1
            self.spans.extend(decoded)
        body = ExportTraceServiceResponse().SerializeToString()
        return Response(body, media_type="application/x-protobuf")

    @staticmethod
    def _span(span: Any, resource: dict[str, Any]) -> ReceivedSpan:
        links = [
            ReceivedLink(link.trace_id.hex(), link.span_id.hex(), attributes_of(link.attributes)) for link in span.links
        ]
        return ReceivedSpan(
            span.name,
            span.trace_id.hex(),
            span.span_id.hex(),
            span.parent_span_id.hex(),
            KINDS[span.kind],
            attributes_of(span.attributes),
            resource,
            links,
            span.status.code,
            span.start_time_unix_nano,
            span.end_time_unix_nano,
        )

    def named(self, name: str) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self.spans if s.name == name]

    def starting(self, prefix: str) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self.spans if s.name.startswith(prefix)]

    def children(self, parent: ReceivedSpan) -> list[ReceivedSpan]:
        with self._lock:
            return [s for s in self.spans if s.parent_span_id == parent.span_id and s.trace_id == parent.trace_id]


class SilentCollector:
    """Accepts TCP connections and never answers: an exporter talking to it waits for its timeout."""

    def __init__(self) -> None:
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self.endpoint = f"http://127.0.0.1:{self.port}/v1/traces"

    def _accept(self) -> None:
        self._listener.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._held.append(conn)

    def __enter__(self) -> SilentCollector:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for conn in self._held:
            conn.close()
        self._listener.close()

    @property
    def connections(self) -> int:
        return len(self._held)
