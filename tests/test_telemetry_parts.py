"""The telemetry's parts: the stored alert's `bridge_trace` beside releases 0.1.0 and 0.2.0, the `gen_ai`
attributes read from a reply, the no-op port, and `check`/`run` when the `tracing` extra is missing."""

from __future__ import annotations

import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bridge.cli import main
from bridge.commands.check import FAIL, OK, check_tracing
from bridge.core.exit_codes import EXIT_USAGE
from bridge.core.formats import RecordFormat
from bridge.core.models import Alert, DeadLetter, Severity, Summary, SummarySource
from bridge.settings import Settings
from bridge.telemetry.attributes import messaging_system, model_reply
from bridge.telemetry.build import build_telemetry, tracing_problem
from bridge.telemetry.otel import span_context
from bridge.telemetry.port import NO_SPAN, NO_TELEMETRY

ROOT = Path(__file__).resolve().parent.parent
RELEASES = {"0.1.0": ("c062e084", "bridge/models.py"), "0.2.0": ("72a1f3f", "bridge/core/models.py")}
BRIDGE_TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def alert(**extra: Any) -> Alert:
    letter = DeadLetter(source_key="dead_letter:orders", queue="orders", job_id="j1", raw_digest="ab" * 8)
    summary = Summary(
        title="t",
        severity=Severity.ERROR,
        likely_cause="c",
        next_steps=["s"],
        runbook_hint="",
        source=SummarySource.FALLBACK,
    )
    return Alert(dead_letter=letter, summary=summary, severity=Severity.ERROR, **extra)


def released_models(release: str) -> types.ModuleType:
    commit, path = RELEASES[release]
    shown = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, text=True)
    if shown.returncode != 0:
        pytest.skip(f"git history lacks release {release} ({commit}): {shown.stderr.strip()[:200]}")
    module = types.ModuleType(f"released_models_{release.replace('.', '_')}")
    sys.modules[module.__name__] = module  # pydantic resolves the annotations through it
    try:
        exec(compile(shown.stdout, path, "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    return module


def test_an_alert_without_a_bridge_trace_is_stored_as_before() -> None:
    for fmt in (1, 2):
        assert "bridge_trace" not in RecordFormat(writes=fmt).alert_json(alert())
    assert '"bridge_trace":"' + BRIDGE_TRACE in RecordFormat().alert_json(alert(bridge_trace=BRIDGE_TRACE))


@pytest.mark.parametrize("release", ["0.1.0", "0.2.0"])
def test_the_previous_releases_read_an_alert_carrying_a_bridge_trace(release: str) -> None:
    fmt = 1 if release == "0.1.0" else 2
    stored = RecordFormat(writes=fmt).alert_json(alert(bridge_trace=BRIDGE_TRACE))
    old = released_models(release)
    read = old.Alert.model_validate_json(stored)  # as its sink worker reads a queued item
    assert read.dead_letter.job_id == "j1"
    assert not hasattr(read, "bridge_trace")


def test_this_release_reads_an_alert_the_previous_one_wrote() -> None:
    old = released_models("0.2.0")
    written = old.Alert.model_validate_json(alert().model_dump_json()).model_dump_json()
    assert Alert.model_validate_json(written).bridge_trace is None


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "garbage",
        "00-" + "0" * 32 + "-" + "1" * 16 + "-01",
        BRIDGE_TRACE + "\r\nX-Evil: 1",
        "https://evil.example/" + "a" * 40,
    ],
)
def test_a_stored_bridge_trace_that_is_not_a_valid_traceparent_parents_nothing(value: str | None) -> None:
    assert span_context(value) is None


def test_a_valid_bridge_trace_parents_the_delivery() -> None:
    context = span_context(BRIDGE_TRACE)
    assert context is not None and context.is_remote and context.trace_flags.sampled
    assert f"{context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"


def test_gen_ai_attributes_are_read_from_the_reply() -> None:
    reply = {
        "id": "chatcmpl-7",
        "model": "qwen2.5-1.5b",
        "usage": {"prompt_tokens": 412, "completion_tokens": 57},
        "choices": [{"finish_reason": "stop"}],
    }
    assert model_reply(reply) == {
        "gen_ai.usage.input_tokens": 412,
        "gen_ai.usage.output_tokens": 57,
        "gen_ai.response.id": "chatcmpl-7",
        "gen_ai.response.model": "qwen2.5-1.5b",
        "gen_ai.response.finish_reasons": ["stop"],
    }
    assert model_reply({"usage": {"input_tokens": 3, "output_tokens": 4}})["gen_ai.usage.output_tokens"] == 4


@pytest.mark.parametrize(
    "reply",
    [
        None,
        [],
        "text",
        {"usage": "many"},
        {"usage": {"prompt_tokens": -1}},
        {"usage": {"prompt_tokens": True}},
        {"usage": {"prompt_tokens": "12"}},
        {"id": "x" * 500, "choices": "stop"},
    ],
)
def test_a_reply_without_usable_usage_gives_no_token_counts(reply: Any) -> None:
    assert not any(key.startswith("gen_ai.usage") or key == "gen_ai.response.id" for key in model_reply(reply))


def test_the_messaging_system_of_each_kind() -> None:
    assert messaging_system(None) == "redis"
    assert messaging_system("sidekiq:dead") == "redis"
    assert messaging_system("rabbitmq:orders.dlq") == "rabbitmq"
    assert messaging_system("sqs:orders") == "aws_sqs"


def test_without_an_endpoint_the_telemetry_is_the_no_op(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(tracing={"trace_url": "https://tempo.example/explore?traceId={trace_id}"})
    telemetry = build_telemetry(settings.tracing, "x")
    assert telemetry is NO_TELEMETRY and not telemetry.enabled
    with telemetry.entry("dead_letter:a", 0.0, 0, "redis") as span:
        assert span is NO_SPAN
        assert telemetry.current_traceparent() is None
    assert check_tracing(settings) == []


@pytest.fixture
def no_tracing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if `pip install 'dlq-bridge[tracing]'` had not been run: the exporter cannot be imported."""
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http", None)


def test_check_and_run_say_when_the_tracing_extra_is_missing(
    make_settings: Callable[..., Settings], no_tracing_extra: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = make_settings(tracing={"otlp_endpoint": "http://collector:4318/v1/traces"})
    [row] = check_tracing(settings)
    assert row.status == FAIL and "pip install 'dlq-bridge[tracing]'" in row.detail
    assert tracing_problem(settings.tracing) == row.detail
    assert main(["--config", str(tmp_path / "bridge.toml"), "run", "--port", "0"]) == EXIT_USAGE
    assert "run: tracing.otlp_endpoint is set but" in capsys.readouterr().err


def test_check_passes_the_tracing_row_with_the_extra(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(tracing={"otlp_endpoint": "http://collector:4318/v1/traces", "sample_ratio": 0.25})
    [row] = check_tracing(settings)
    assert row.status == OK and "sample ratio 0.25" in row.detail
