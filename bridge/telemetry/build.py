"""Choosing the telemetry once, at build time: the no-op, or the OpenTelemetry SDK (imported only then)."""

from __future__ import annotations

import importlib

from bridge.config.tracing import TracingSettings
from bridge.core.errors import ConfigError
from bridge.telemetry.port import NO_TELEMETRY, Telemetry

EXTRA_MODULES = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")
INSTALL_HINT = "pip install 'dlq-bridge[tracing]'"


def tracing_extra_missing() -> str | None:
    """Which module of the `tracing` extra cannot be imported, else None (asked only with an endpoint set)."""
    for module in EXTRA_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            return module
    return None


def tracing_problem(settings: TracingSettings) -> str | None:
    """One line when `otlp_endpoint` is set and the extra is not installed."""
    if settings.otlp_endpoint is None:
        return None
    missing = tracing_extra_missing()
    if missing is None:
        return None
    return f"tracing.otlp_endpoint is set but {missing} is not installed: {INSTALL_HINT}"


def build_telemetry(settings: TracingSettings, release: str) -> Telemetry:
    """`NO_TELEMETRY` without `otlp_endpoint`; else spans exported over OTLP/HTTP."""
    if settings.otlp_endpoint is None:
        return NO_TELEMETRY
    problem = tracing_problem(settings)
    if problem is not None:
        raise ConfigError([problem])
    from bridge.telemetry.otel import OtelTelemetry

    return OtelTelemetry(settings, release)
