"""The configuration reference, generated from the Settings model.

    python -m bridge.commands.config_reference                 # print the Markdown
    python -m bridge.commands.config_reference --check README.md
    python -m bridge.commands.config_reference --write README.md

`--check` and `--write` work on the text between the markers
`<!-- config-reference:start -->` and `<!-- config-reference:end -->` only.
A field's `Field(description=...)` wins over the text in DESCRIPTIONS.
"""

from __future__ import annotations

import argparse
import enum
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from bridge.models import Severity
from bridge.settings import Settings

START, END = "<!-- config-reference:start -->", "<!-- config-reference:end -->"
DEFAULT_OVERRIDES = {"redis.consumer_id": "the host name (pod name in Kubernetes)"}

DESCRIPTIONS = {
    "server.host": "Listen address of `/healthz` and `/metrics` (the image sets 0.0.0.0).",
    "server.port": "Listen port.",
    "server.grace_s": "On SIGTERM: seconds to finish in-flight entries before leaving them in the processing list.",
    "server.log_level": "Log level.",
    "redis.url": "Redis URL (`redis://`, `rediss://`, `unix://`); unset with no `url_env`/`url_file`: embedded Redis.",
    "redis.url_env": "Environment variable holding the URL (or `<NAME>_FILE` with a path).",
    "redis.url_file": "File holding the URL.",
    "redis.consumer_id": "Stable id of this bridge: names its processing lists and heartbeat.",
    "redis.data_dir": "Data folder of the embedded Redis.",
    "redis.embedded_port": "Loopback port of the embedded Redis.",
    "redis.socket_timeout_s": "Timeout of one Redis command.",
    "sources.match": "SCAN pattern of the DLQ lists (never KEYS).",
    "sources.archive_max": "Finished entries kept per DLQ in `dlq_bridge:alerted:<ref>`.",
    "sources.concurrency": "Entries processed at once.",
    "sources.rescan_interval_s": "How often new DLQs are discovered by SCAN (raise it for huge keyspaces).",
    "sources.poll_interval_s": "Blocking wait per DLQ while all are empty.",
    "sources.heartbeat_interval_s": "How often the consumer heartbeat is refreshed.",
    "sources.heartbeat_ttl_s": "Heartbeat lifetime; after it, other consumers reap the processing list.",
    "sources.reap_interval_s": "How often processing lists of dead consumers are returned.",
    "sources.excerpt_max_bytes": "Largest payload excerpt kept in an envelope.",
    "severity.default": (
        "Fallback severity; further keys are queue globs (`\"payments*\" = \"critical\"`), first match wins."
    ),
    "openclaw.url": "Gateway base URL; without an `[openclaw]` section: fallback summaries only.",
    "openclaw.agent": "Agent id (`x-openclaw-agent-id`).",
    "openclaw.model": "Model name; default `openclaw/<agent>` (older gateways: `openclaw:<agent>`).",
    "openclaw.token": "Gateway token inline (prefer `token_env` or `token_file`).",
    "openclaw.token_env": "Environment variable holding the token (or `<NAME>_FILE`).",
    "openclaw.token_file": "File holding the token.",
    "openclaw.timeout_s": "Timeout of one gateway call; then a fallback summary.",
    "openclaw.max_concurrency": "Gateway calls in flight at most.",
    "openclaw.calls_per_minute": "Call budget per minute; over it: fallback summaries (`budget`).",
    "openclaw.cache_ttl_s": "Summary cache lifetime per fingerprint.",
    "openclaw.breaker_failures": "Consecutive failures that open the circuit.",
    "openclaw.breaker_cooldown_s": "Seconds the circuit stays open before a trial call.",
    "openclaw.json_mode": "Ask for `response_format` JSON (best effort; replies are validated anyway).",
    "delivery.max_attempts": "Attempts per sink before the delivery is recorded as undeliverable.",
    "delivery.base_delay_s": "Base of the full-jitter backoff.",
    "delivery.max_delay_s": "Cap of the backoff between attempts.",
    "delivery.max_retry_after_s": "Longest `Retry-After` honoured (longer values are cut to this).",
    "delivery.deadline_s": "Give up on a delivery after this long.",
    "delivery.request_timeout_s": "Timeout of one HTTP request to a sink.",
    "delivery.ledger_ttl_s": "How long the delivery ledger remembers a sent alert.",
    "delivery.sink_concurrency": "Deliveries in flight per unpaced sink (webhook, console) and replica.",
    "delivery.paced_sink_concurrency": "Deliveries in flight per paced sink (slack, pagerduty) and replica.",
    "delivery.lease_s": "Lease on a taken sink-queue item; a killed replica's items come back after it.",
    "delivery.queue_stale_s": "A sink queue whose oldest alert is older shows `degraded` on /healthz.",
    "http.transport": "HTTP transport under the shared httpx client.",
    "http.max_connections": "Connection pool size.",
    "runbooks.dir": "Folder of failure runbooks (default: the packaged ones).",
    "runbooks.base_url": "Where runbooks are published; alert cards link `<base_url>/<id>.md`.",
    "sinks.name": "Unique sink name (metrics labels, ledger keys).",
    "sinks.type": "Sink type.",
    "sinks.min_severity": "Lowest severity this sink receives.",
    "sinks.queues": "Queue globs this sink receives (empty: all).",
    "sinks.color": "Colours on the console (default: when stdout is a terminal).",
    "sinks.url": "Endpoint URL.",
    "sinks.slack.url": "Incoming-webhook URL, a secret: prefer `url_env` or `url_file`.",
    "sinks.url_env": "Environment variable holding the URL (or `<NAME>_FILE`).",
    "sinks.url_file": "File holding the URL.",
    "sinks.messages_per_second": "Pacing per Slack webhook.",
    "sinks.routing_key": "PagerDuty routing key inline (prefer `routing_key_env` or `routing_key_file`).",
    "sinks.routing_key_env": "Environment variable holding the routing key (or `<NAME>_FILE`).",
    "sinks.routing_key_file": "File holding the routing key.",
    "sinks.events_url": "PagerDuty Events API v2 URL.",
    "sinks.events_per_minute": "Pacing per routing key.",
    "sinks.source": "PagerDuty `payload.source` (default: the consumer id).",
    "sinks.secret": "Signing secret(s) inline, space or comma separated for rotation.",
    "sinks.secret_env": "Environment variable holding the signing secret(s) (or `<NAME>_FILE`).",
    "sinks.secret_file": "File holding the signing secret(s).",
}


def reference() -> str:
    """The Markdown table: section, key, type, default, description; ends with a newline."""
    rows = ["| section | key | type | default | description |", "|---|---|---|---|---|"]
    for section, prefix, model in sections():
        for key, field in model.model_fields.items():
            if not (prefix.startswith("sinks.") and key == "type"):
                rows.append(_row(section, prefix, key, field))
        if section == "[sources]":
            rows.append(_severity_row())
    return "\n".join(rows) + "\n"


def _severity_row() -> str:
    default = Settings.model_fields["severity"].default_factory()  # type: ignore[call-arg,misc]
    field = FieldInfo(annotation=Severity, default=default["default"])
    return _row("[severity]", "severity", "default", field)


def sections() -> list[tuple[str, str, type[BaseModel]]]:
    """(section heading, description prefix, model) in the order of the Settings fields."""
    found: list[tuple[str, str, type[BaseModel]]] = []
    for name, field in Settings.model_fields.items():
        model = _model_of(field.annotation)
        if model is not None:
            found.append((f"[{name}]", name, model))
    for sink in _sink_models():
        kind = get_args(sink.model_fields["type"].annotation)[0]
        found.append((f'[[sinks]] type = "{kind}"', f"sinks.{kind}", sink))
    return found


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _sink_models() -> list[type[BaseModel]]:
    item = get_args(Settings.model_fields["sinks"].annotation)[0]
    union = get_args(item)[0] if get_origin(item) is typing.Annotated else item
    return [m for m in get_args(union) if isinstance(m, type) and issubclass(m, BaseModel)]


def _row(section: str, prefix: str, key: str, field: FieldInfo) -> str:
    generic = f"{prefix.split('.')[0]}.{key}"
    description = field.description or DESCRIPTIONS.get(f"{prefix}.{key}") or DESCRIPTIONS.get(generic, "")
    cells = [f"`{section}`", f"`{key}`", type_name(field), default_text(generic, field), description]
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def type_name(field: FieldInfo) -> str:
    text = _type_text(field.annotation)
    bounds = [b for b in (_bound(m) for m in field.metadata) if b]
    return f"{text} ({', '.join(bounds)})" if bounds else text


def _bound(meta: Any) -> str:
    for cls, attr, sign in ((annotated_types.Ge, "ge", "≥"), (annotated_types.Gt, "gt", ">"),
                            (annotated_types.Le, "le", "≤"), (annotated_types.Lt, "lt", "<")):
        if isinstance(meta, cls):
            return f"{sign} {getattr(meta, attr)}"
    return ""


def _type_text(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (types.UnionType, typing.Union):
        inner = [a for a in args if a is not type(None)]
        return " or ".join(_type_text(a) for a in inner) + (" (optional)" if len(inner) < len(args) else "")
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if origin is list:
        return f"list of {_type_text(args[0])}"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(str(m.value) for m in annotation)
    names = {SecretStr: "secret", Path: "path", str: "string", int: "integer", float: "number", bool: "boolean"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def default_text(dotted: str, field: FieldInfo) -> str:
    if dotted in DEFAULT_OVERRIDES:
        return DEFAULT_OVERRIDES[dotted]
    if field.default_factory is not None:
        value: Any = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str | Path):
        return f'`"{value}"`'
    return f"`{value}`"


def replace_between_markers(text: str, body: str) -> str:
    """`text` with the part between the markers replaced by `body`; ValueError without markers."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"markers {START} … {END} not found")
    return text[: start + len(START)] + "\n" + body + text[end:]


def between_markers(text: str) -> str | None:
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        return None
    return text[start + len(START) : end].strip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--check", type=Path, metavar="FILE", help="exit 1 when FILE's reference is stale")
    group.add_argument("--write", type=Path, metavar="FILE", help="replace the reference in FILE")
    args = parser.parse_args(argv)
    text = reference()
    if args.check is None and args.write is None:
        sys.stdout.write(text)
        return 0
    path = args.check or args.write
    try:
        updated = replace_between_markers(path.read_text(encoding="utf-8"), text)
    except ValueError as exc:
        print(f"config_reference: {path}: {exc}", file=sys.stderr)
        return 2
    if args.write is not None:
        path.write_text(updated, encoding="utf-8")
        return 0
    if between_markers(path.read_text(encoding="utf-8")) != text:
        print(f"config_reference: {path} is stale; run with --write {path}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
