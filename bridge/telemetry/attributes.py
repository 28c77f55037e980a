"""Semantic-convention attributes (OpenTelemetry messaging and GenAI), built from plain data."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bridge.telemetry.port import AttributeValue

GEN_AI_PROVIDER = "openclaw"  # the OpenClaw gateway (an OpenAI-compatible chat completions API)

_MESSAGING_SYSTEMS = {"rabbitmq": "rabbitmq", "sqs": "aws_sqs"}  # every other kind lives in a Redis


def messaging_system(origin: str | None) -> str:
    """`messaging.system` of a claimed entry: its kind's broker (`origin` is `<kind>:<where>`; None: a list)."""
    if origin is None:
        return "redis"
    return _MESSAGING_SYSTEMS.get(origin.split(":", 1)[0], "redis")


def model_request(model: str) -> dict[str, AttributeValue]:
    """The `gen_ai.*` request attributes of one summary call."""
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": GEN_AI_PROVIDER,
        "gen_ai.system": GEN_AI_PROVIDER,  # the name before semantic conventions 1.37, still read by many backends
        "gen_ai.request.model": model,
        "gen_ai.request.temperature": 0.0,
        "gen_ai.output.type": "json",
    }


def model_reply(reply: Any) -> dict[str, AttributeValue]:
    """The `gen_ai.*` response attributes a chat completion carries (its `usage` when present)."""
    if not isinstance(reply, Mapping):
        return {}
    found: dict[str, AttributeValue] = {}
    usage = reply.get("usage")
    if isinstance(usage, Mapping):
        _count(found, "gen_ai.usage.input_tokens", usage, "prompt_tokens", "input_tokens")
        _count(found, "gen_ai.usage.output_tokens", usage, "completion_tokens", "output_tokens")
    for key, attribute in (("id", "gen_ai.response.id"), ("model", "gen_ai.response.model")):
        value = reply.get(key)
        if isinstance(value, str) and 0 < len(value) <= 200:
            found[attribute] = value
    reasons = _finish_reasons(reply.get("choices"))
    if reasons:
        found["gen_ai.response.finish_reasons"] = reasons
    return found


def _count(found: dict[str, AttributeValue], attribute: str, usage: Mapping[str, Any], *names: str) -> None:
    for name in names:
        value = usage.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            found[attribute] = value
            return


def _finish_reasons(choices: Any) -> list[str]:
    if not isinstance(choices, list):
        return []
    reasons = [c.get("finish_reason") for c in choices[:8] if isinstance(c, Mapping)]
    return [r for r in reasons if isinstance(r, str) and 0 < len(r) <= 40]
