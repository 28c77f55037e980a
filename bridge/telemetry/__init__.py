"""The bridge's own telemetry: spans over OTLP/HTTP, trace ids in the logs (docs/tracing.md).

port.py        `Telemetry` and `SpanHandle`, what the stages call; `NO_TELEMETRY`, the no-op
build.py       `build_telemetry`: the no-op, or the OpenTelemetry SDK when `[tracing] otlp_endpoint`
               is set (imported only then); whether the `tracing` extra is installed
otel.py        `OtelTelemetry`: a TracerProvider of its own (never the global one), a batch exporter
attributes.py  the semantic-convention attributes: messaging, `gen_ai.*` from a model reply
logs.py        a logging filter giving every record `trace_id` and `span_id`
"""
