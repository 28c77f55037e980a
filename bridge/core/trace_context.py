"""W3C trace context (`traceparent`, `tracestate`) read from what a job system kept, validated.

A value that breaks the W3C rules is dropped, never echoed: the parsed fields are rebuilt from
checked hex, so nothing a producer wrote beyond them reaches a sink (docs/tracing.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TRACEPARENT_MAX = 256  # longer input is refused before it is looked at
TRACESTATE_MAX = 512  # the W3C limit a vendor must propagate
TRACESTATE_MEMBERS_MAX = 32

_HEX = re.compile(r"[0-9a-f]+")
_STATE_KEY = re.compile(r"(?:[a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13})")
_STATE_VALUE = re.compile(r"[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]")
_AWS_ROOT = re.compile(r"1-([0-9a-f]{8})-([0-9a-f]{24})")


@dataclass(frozen=True)
class TraceContext:
    """A valid trace context: the ids as lowercase hex, the flags, and a checked `tracestate`."""

    trace_id: str
    span_id: str
    flags: str
    tracestate: str | None = None

    @property
    def traceparent(self) -> str:
        """The version-00 `traceparent` of this context (what the bridge stores and forwards)."""
        return f"00-{self.trace_id}-{self.span_id}-{self.flags}"

    @property
    def sampled(self) -> bool:
        return bool(int(self.flags, 16) & 0x01)

    @classmethod
    def parse(cls, traceparent: object, tracestate: object = None) -> TraceContext | None:
        """The context `traceparent` holds by the W3C rules, else None; `tracestate` kept when valid."""
        text = _text(traceparent)
        if text is None or len(text) > TRACEPARENT_MAX:
            return None
        fields = _fields(text.strip(" \t"))
        if fields is None:
            return None
        trace_id, span_id, flags = fields
        return cls(trace_id, span_id, flags, parse_tracestate(tracestate))

    @classmethod
    def from_aws_trace_header(cls, header: object) -> TraceContext | None:
        """An SQS `AWSTraceHeader` (`Root=1-<8 hex>-<24 hex>;Parent=<16 hex>;Sampled=0|1`) as W3C."""
        text = _text(header)
        if text is None or len(text) > TRACEPARENT_MAX:
            return None
        parts = dict(_pair(item) for item in text.split(";") if "=" in item)
        root = _AWS_ROOT.fullmatch(parts.get("Root", ""))
        parent = parts.get("Parent", "")
        if root is None or not _is_id(parent, 16):
            return None
        trace_id = root.group(1) + root.group(2)
        if not _is_id(trace_id, 32):
            return None
        return cls(trace_id, parent, "01" if parts.get("Sampled") == "1" else "00")


@dataclass(frozen=True)
class TraceLink:
    """A job's trace as sinks show it: its id, and the link to it when `[tracing] trace_url` is set."""

    trace_id: str
    url: str | None = None

    @classmethod
    def of(cls, context: TraceContext | None, url: str | None) -> TraceLink | None:
        """The link of a valid context; a stored `url` is kept only when it is an http(s) URL
        holding this trace id (`TracingSettings.trace_link` made it), else the id is shown as text."""
        if context is None:
            return None
        shaped = url is not None and url.startswith(("https://", "http://")) and url.isprintable() and " " not in url
        kept = url if shaped and url is not None and context.trace_id in url else None
        return cls(context.trace_id, kept)


def parse_tracestate(value: object) -> str | None:
    """`value` as a `tracestate` when every member is well-formed (W3C), else None."""
    text = _text(value)
    if text is None or len(text) > TRACESTATE_MAX:
        return None
    members = [m.strip(" \t") for m in text.split(",") if m.strip(" \t")]
    if not members or len(members) > TRACESTATE_MEMBERS_MAX:
        return None
    keys: set[str] = set()
    for member in members:
        key, eq, state = member.partition("=")
        if not eq or not _STATE_KEY.fullmatch(key) or not _STATE_VALUE.fullmatch(state) or key in keys:
            return None
        keys.add(key)
    return ",".join(members)


def _fields(text: str) -> tuple[str, str, str] | None:
    version = text[:2]
    if len(text) < 55 or not _is_hex(version, 2) or version == "ff":
        return None
    if version == "00" and len(text) != 55:
        return None
    if len(text) > 55 and text[55] != "-":  # a later version may append fields after a dash
        return None
    if text[2] != "-" or text[35] != "-" or text[52] != "-":
        return None
    trace_id, span_id, flags = text[3:35], text[36:52], text[53:55]
    if not (_is_id(trace_id, 32) and _is_id(span_id, 16) and _is_hex(flags, 2)):
        return None
    return trace_id, span_id, flags


def _is_hex(value: str, length: int) -> bool:
    return len(value) == length and _HEX.fullmatch(value) is not None


def _is_id(value: str, length: int) -> bool:
    return _is_hex(value, length) and value.strip("0") != ""


def _text(value: object) -> str | None:
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("ascii")
        except UnicodeDecodeError:
            return None
    return value if isinstance(value, str) else None


def _pair(item: str) -> tuple[str, str]:
    key, _, value = item.strip().partition("=")
    return key, value
