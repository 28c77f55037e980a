"""What a summary costs: prompt and completion tokens of one gateway call (docs/design.md, section 4).

From the reply's `usage` (`prompt_tokens`, `completion_tokens`: OpenAI-compatible servers, llama.cpp,
the OpenClaw gateway) when it holds whole numbers; else estimated as characters / 4. Counted in
`dlq_bridge_summary_tokens_total{model,source,kind}` (`source`: the summary the call ended in,
`openclaw` or `fallback` when the reply was unusable; `kind`: prompt or completion) and the estimated
calls in `dlq_bridge_summary_tokens_estimated_total{model}`; the service also adds each call to the
day's counts the console's overview shows (a `TokenSink`: bridge.stores.trends).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bridge.core.metrics import Metrics

CHARS_PER_TOKEN = 4
MAX_TOKENS = 10_000_000  # a count beyond this is not believed (a hostile or broken `usage`)
TokenSink = Callable[[int, int, bool], None]  # (prompt, completion, estimated) of one call


@dataclass(frozen=True)
class Tokens:
    prompt: int
    completion: int
    estimated: bool


def _count(usage: dict[str, Any], field: str) -> int | None:
    value = usage.get(field)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS else None


def _reply_text(response: Any) -> str:
    try:
        content = response["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return ""
    return content if isinstance(content, str) else ""


def tokens_of(messages: list[dict[str, str]], response: Any) -> Tokens:
    """The call's tokens: the reply's `usage`, else estimated from the characters sent and received."""
    usage = response.get("usage") if isinstance(response, dict) else None
    if isinstance(usage, dict):
        prompt, completion = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
        if prompt is not None and completion is not None:
            return Tokens(prompt, completion, estimated=False)
    sent = sum(len(m.get("content", "")) for m in messages)
    return Tokens(-(-sent // CHARS_PER_TOKEN), -(-len(_reply_text(response)) // CHARS_PER_TOKEN), estimated=True)


def count_tokens(metrics: Metrics, model: str, source: str, tokens: Tokens) -> None:
    metrics.child(metrics.summary_tokens, model, source, "prompt").inc(tokens.prompt)
    metrics.child(metrics.summary_tokens, model, source, "completion").inc(tokens.completion)
    if tokens.estimated:
        metrics.child(metrics.summary_tokens_estimated, model).inc()
