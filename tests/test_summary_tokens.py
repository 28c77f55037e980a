"""Cost counted: tokens per summary from the reply's usage, else estimated (chars / 4), as metrics."""

from __future__ import annotations

from bridge.core.metrics import Metrics
from bridge.summarize.tokens import count_tokens, tokens_of

MESSAGES = [{"role": "system", "content": "x" * 400}, {"role": "user", "content": "y" * 203}]


def reply(content: str, usage: object = None) -> dict[str, object]:
    body: dict[str, object] = {"choices": [{"message": {"content": content}}]}
    if usage is not None:
        body["usage"] = usage
    return body


def test_usage_is_read_when_the_reply_has_it() -> None:
    tokens = tokens_of(MESSAGES, reply("{}", {"prompt_tokens": 812, "completion_tokens": 95, "total_tokens": 907}))
    assert (tokens.prompt, tokens.completion, tokens.estimated) == (812, 95, False)


def test_without_usage_or_with_a_broken_one_the_tokens_are_estimated() -> None:
    for usage in (
        None,
        {"prompt_tokens": "812"},
        {"prompt_tokens": -1, "completion_tokens": 3},
        {"prompt_tokens": True, "completion_tokens": 3},
        {"prompt_tokens": 10**12, "completion_tokens": 1},
    ):
        tokens = tokens_of(MESSAGES, reply("z" * 41, usage))
        assert (tokens.prompt, tokens.completion, tokens.estimated) == (151, 11, True), usage


def test_tokens_are_counted_per_model_and_source() -> None:
    metrics = Metrics()
    count_tokens(
        metrics, "qwen", "openclaw", tokens_of(MESSAGES, reply("{}", {"prompt_tokens": 800, "completion_tokens": 90}))
    )
    count_tokens(metrics, "qwen", "fallback", tokens_of(MESSAGES, reply("not json")))
    sample = metrics.registry.get_sample_value
    assert sample("dlq_bridge_summary_tokens_total", {"model": "qwen", "source": "openclaw", "kind": "prompt"}) == 800
    assert (
        sample("dlq_bridge_summary_tokens_total", {"model": "qwen", "source": "openclaw", "kind": "completion"}) == 90
    )
    assert sample("dlq_bridge_summary_tokens_total", {"model": "qwen", "source": "fallback", "kind": "prompt"}) == 151
    assert sample("dlq_bridge_summary_tokens_estimated_total", {"model": "qwen"}) == 1
