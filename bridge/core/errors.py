"""One small exception tree for the whole bridge.

    BridgeError
     ├── ConfigError            bad configuration (one message per problem)
     ├── SummaryError           the summarizer could not produce a summary
     └── SinkError              a delivery attempt failed
          ├── SinkRetryable     408/425/429/5xx, timeouts, connection errors
          └── SinkPermanent     anything else (400, 401, 404, 410, ...)

Messages never contain secrets: sink errors name the sink and the HTTP status,
never the URL or a key. A sink error carries its parts as fields (`sink`,
`status`, `detail`, `retry_after_s`): callers read those, never the message.
"""

from __future__ import annotations

from redis.exceptions import RedisError


class BridgeError(Exception):
    """Base of every error the bridge raises on purpose."""


class ConfigError(BridgeError):
    """Configuration is invalid; `problems` has one human-readable line each."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


class SummaryError(BridgeError):
    """The summarizer failed; `reason` is the fallback reason to record."""

    def __init__(self, reason: str, message: str = "") -> None:
        self.reason = reason
        super().__init__(message or reason)


class SinkError(BridgeError):
    """A delivery attempt to a sink failed.

    `detail` is the secret-free what-happened (`HTTP 400: bad payload`, `connection refused
    (ConnectionRefusedError)`: bridge.clients.net_errors); `status` the HTTP status when there was a
    response. `str(exc)` is `sink <name>: <detail>`.
    """

    def __init__(
        self,
        sink: str,
        detail: str,
        *,
        status: int | None = None,
        retry_after_s: float | None = None,
        idempotency_key: str | None = None,
    ) -> None:
        self.sink = sink
        self.detail = detail
        self.status = status
        self.retry_after_s = retry_after_s
        self.idempotency_key = idempotency_key
        super().__init__(f"sink {sink}: {detail}")


class SinkRetryable(SinkError):
    """Worth another attempt (after `retry_after_s` when the server said so)."""


class SinkPermanent(SinkError):
    """Another attempt would fail the same way."""


REDIS_ERRORS: tuple[type[Exception], ...] = (RedisError, OSError)
"""What a Redis call raises when the server is away (a refused or reset connection is an OSError)."""
