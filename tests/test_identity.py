"""Identity survives size and quarantine (docs/design.md, section 3): an entry too large to parse,
and a quarantined one, still alert under their own job id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bridge import keys
from bridge.identity import head_identity, read_identity
from bridge.intake import normalize
from bridge.models import Severity
from bridge.quarantine import quarantine_alert
from tests.support.bridge_process import run_until, write_config
from tests.support.http_server import serve
from tests.support.receiver import Receiver


def big_entry(job_id: str, megabytes: int) -> bytes:
    """A JSON object of about `megabytes` MB whose identity fields sit after the payload."""
    payload = {"rows": ["x" * 1000] * (megabytes * 1000)}
    return json.dumps({"payload": payload, "job_id": job_id, "job_name": "ImportBatch", "queue": "imports",
                       "attempts": 4, "last_error": "MemoryError: batch too large " + "e" * 20_000}).encode()


def test_the_streaming_read_keeps_top_level_identity_scalars_only() -> None:
    raw = json.dumps({"payload": {"job_id": "inner"}, "job_id": "outer", "attempts": 2,
                      "error": {"nested": "skipped"}, "last_error": "x" * 100_000}).encode()
    found = read_identity(raw)
    assert found["job_id"] == "outer" and found["attempts"] == 2
    assert "error" not in found and len(found["last_error"]) < 9000


@pytest.mark.parametrize("raw", [b"[1, 2]", b"not json", b"", b'{"job_id": "cut', b"\xff\xfe{"])
def test_the_streaming_read_never_raises(raw: bytes) -> None:
    assert read_identity(raw) == {} or read_identity(raw).get("job_id") is None


def test_a_cut_head_still_names_its_job() -> None:
    raw = b'{"job_id": "j-1", "job_name": "Mail", "last_error": "boom", "payload": "' + b"x" * 200_000 + b'"}'
    assert head_identity(raw) == {"job_id": "j-1", "job_name": "Mail", "last_error": "boom"}


def test_an_oversized_entry_keeps_its_identity_and_a_bounded_error() -> None:
    letter = normalize(big_entry("big-2", 2), "dead_letter:imports")
    assert (letter.job_id, letter.job_name, letter.attempts, letter.reported_queue) == ("big-2", "ImportBatch", 4,
                                                                                       "imports")
    assert letter.last_error is not None and letter.last_error.startswith("MemoryError: batch too large")
    assert len(letter.last_error) < 9000
    assert letter.parse_error is not None and letter.parse_error.startswith("oversized dead letter")


def test_a_quarantine_alert_names_the_job_from_a_bounded_read_else_the_digest() -> None:
    raw = json.dumps({"job_id": "poison-7", "job_name": "Explode", "last_error": "token=sk_live_abcdef123456"})
    alert = quarantine_alert("dead_letter:p", raw.encode(), "0123456789abcdef", Severity.ERROR, "Quarantined")
    assert (alert.dead_letter.job_id, alert.dead_letter.job_name) == ("poison-7", "Explode")
    assert "sk_live_abcdef123456" not in (alert.dead_letter.last_error or ""), "redacted like any envelope"
    opaque = quarantine_alert("dead_letter:p", b"\x00garbage", "0123456789abcdef", Severity.ERROR, "Quarantined")
    assert opaque.dead_letter.job_id == "sha256:0123456789abcdef"


async def test_2_and_20_mb_objects_alert_under_their_own_job_id(
    aredis: aioredis.Redis, redis_url: str, tmp_path: Path
) -> None:
    source = "dead_letter:imports"
    await aredis.lpush(source, big_entry("big-2mb", 2), big_entry("big-20mb", 20))
    hook, pd, slack = Receiver(), Receiver(), Receiver()
    async with serve(hook.app) as h, serve(pd.app) as p, serve(slack.app) as s:
        cfg = write_config(tmp_path / "b.toml", {
            "redis": {"url": redis_url, "consumer_id": "big"},
            "sources": {"poll_interval_s": 0.01},
            "delivery": {"base_delay_s": 0.01, "max_delay_s": 0.05},
            "sinks": [
                {"name": "hook", "type": "webhook", "url": f"{h}/in", "secret": "s", "group_by": "none"},
                {"name": "pd", "type": "pagerduty", "routing_key": "k" * 32, "events_url": f"{p}/v2/enqueue",
                 "group_by": "none"},
                {"name": "slack", "type": "slack", "url": f"{s}/services/T/B/X", "group_by": "none"},
            ],
        })

        async def delivered() -> bool:
            return len(hook.requests) >= 2 and len(pd.requests) >= 2 and len(slack.requests) >= 2

        assert await run_until(cfg, delivered, timeout_s=90) == 0
    assert await aredis.llen(keys.alerted(source)) == 2, "archived intact"
    assert sorted(r.headers["idempotency-key"] for r in hook.requests) == ["imports:big-20mb", "imports:big-2mb"]
    assert sorted(json.loads(r.body)["dedup_key"] for r in pd.requests) == ["big-20mb", "big-2mb"]
    cards = "\n".join(r.body.decode() for r in slack.requests)
    assert "big-2mb" in cards and "big-20mb" in cards
