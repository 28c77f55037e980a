"""The silences page's form: its choices, and the matchers a link fills in.

A link to `/console/silences` fills the new silence's matchers from `?matcher=` (amtool's syntax,
repeated: `?matcher=queue%3Demails&matcher=severity%3Dwarning`) and from 0.2.0's `?queue=`,
`?job_name=` and `?fingerprint=` (a cause); a value that does not parse is left out. Without
any, the form starts with one empty `queue =` row.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from starlette.datastructures import QueryParams

from bridge.console.views import SilenceView
from bridge.core.models import Severity
from bridge.core.silence_match import LABELS, MATCHERS_MAX, VALUE_MAX, MatcherError, parse_matcher

OPS = (("=", "equals"), ("!=", "does not equal"), ("=~", "matches the RE2 regex"), ("!~", "does not match the regex"))
SILENCE_FORM: dict[str, Any] = {
    "labels": LABELS,
    "ops": OPS,
    "value_max": VALUE_MAX,
    "severities": [s.value for s in Severity],
}
_LEGACY = (("queue", "queue"), ("job_name", "job_name"), ("fingerprint", "cause"))


def silence_prefill(params: QueryParams) -> list[tuple[str, str, str]]:
    """(label, op, value) rows for the new-silence form."""
    rows = [
        ("queue" if name == "queue" else label, "=", params[name][:VALUE_MAX])
        for name, label in _LEGACY
        if params.get(name)
    ]
    for text in params.getlist("matcher")[:MATCHERS_MAX]:
        try:
            found = parse_matcher(text[: VALUE_MAX + 64])
        except MatcherError:
            continue
        rows.append((found.name, found.op, found.value))
    return rows[:MATCHERS_MAX] or [("queue", "=", "")]


def matchers_json(silences: Sequence[SilenceView]) -> dict[str, str]:
    """Silence id → its matchers as JSON, for the page's Edit button (escaped in its attribute)."""
    return {s.id: json.dumps([m.model_dump() for m in s.label_matchers]) for s in silences}
