"""Silence matchers as Alertmanager has them: `name op value`, pure (no Redis, no I/O).

A matcher names one of the labels a silence can see (`LABELS`) and compares it with one of
Alertmanager's four operators: `=` (equal), `!=` (not equal), `=~` (regex), `!~` (regex does not
match). Regexes run on google-re2 (linear time whatever the text) and are anchored as
Alertmanager anchors them, `^(?:value)$`: `severity=~"warn.*"` matches `warning`, not `prewarn`.
A label an alert lacks (a job without a name) is the empty string, as in Alertmanager.

A silence matches when every one of its matchers matches; it needs at least one matcher that
does not match the empty string (Alertmanager's rule), so no silence holds back everything.

`parse_matcher` reads amtool's syntax: `queue=emails`, `severity=~"warn.*"`, `job_name!="x y"`.
`glob_to_regex` turns a 0.2.0 queue glob (fnmatch) into a regex body, to show and edit a 0.2.0
silence as matchers (a 0.2.0 silence is still *matched* by its glob: bridge.stores.silences).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal, get_args

import re2
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bridge.core.models import Alert

Label = Literal["queue", "job_name", "severity", "sink", "cause", "source"]
Op = Literal["=", "!=", "=~", "!~"]
LABELS: tuple[str, ...] = get_args(Label)
OPS: tuple[str, ...] = get_args(Op)
VALUE_MAX = 512  # characters of a matcher's value (a regex included)
MATCHERS_MAX = 16  # matchers per silence

_OPTIONS = re2.Options()
_OPTIONS.max_mem = 1 << 20  # a matcher's regex is short; its DFA stays small
_OPTIONS.log_errors = False  # a bad regex is the user's error, reported once (not logged by RE2 on stderr)
_SYNTAX = re.compile(r"^\s*([a-z_]+)\s*(=~|!~|!=|=)\s*(.*?)\s*$", re.DOTALL)


class MatcherError(ValueError):
    """A matcher that cannot be used (unknown label or operator, bad regex, too long)."""


@functools.lru_cache(maxsize=4096)
def compiled(value: str) -> Any:
    """The anchored RE2 program of a regex matcher's value (`re2._Regexp`; cached)."""
    try:
        return re2.compile(f"^(?:{value})$", options=_OPTIONS)
    except re2.error as exc:
        raise MatcherError(f"not a valid RE2 regex: {value!r} ({exc})") from None


@functools.lru_cache(maxsize=65536)
def regex_hit(value: str, text: str) -> bool:
    """Does the anchored regex `value` match `text`? Cached: labels repeat (queues, severities,
    sinks), and a cached answer costs a tenth of the RE2 wrapper's call (bench/bench_silences.py)."""
    return compiled(value).search(text) is not None


class Matcher(BaseModel):
    """One `name op value` test on an alert's labels."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Label
    op: Op = "="
    value: str = Field(default="", max_length=VALUE_MAX)

    @model_validator(mode="after")
    def _regex_compiles(self) -> Matcher:
        if self.op in ("=~", "!~"):
            try:
                compiled(self.value)
            except MatcherError as exc:
                raise ValueError(str(exc)) from None
        return self

    def matches(self, labels: Mapping[str, str]) -> bool:
        text = labels.get(self.name, "")
        if self.op == "=":
            return text == self.value
        if self.op == "!=":
            return text != self.value
        hit = regex_hit(self.value, text)
        return hit if self.op == "=~" else not hit

    def __str__(self) -> str:
        return f"{self.name}{self.op}{json.dumps(self.value)}"


class MatcherSet(BaseModel):
    """The matchers of one silence, checked: 1 to MATCHERS_MAX, one of them not matching ""."""

    model_config = ConfigDict(frozen=True)

    matchers: list[Matcher] = Field(min_length=1, max_length=MATCHERS_MAX)

    @field_validator("matchers")
    @classmethod
    def _not_everything(cls, matchers: list[Matcher]) -> list[Matcher]:
        if all(m.matches({}) for m in matchers):
            raise ValueError("at least one matcher must not match the empty string (it would silence everything)")
        return matchers


def matches_all(matchers: Iterable[Matcher], labels: Mapping[str, str]) -> bool:
    """Every matcher matches (an empty list matches nothing: a silence never holds back everything)."""
    seen = False
    for matcher in matchers:
        if not matcher.matches(labels):
            return False
        seen = True
    return seen


def alert_labels(alert: Alert, sink: str = "") -> dict[str, str]:
    """The labels a silence sees of `alert` on its way to `sink`."""
    dl = alert.dead_letter
    return {
        "queue": dl.queue,
        "job_name": dl.job_name or "",
        "severity": str(alert.severity.value),
        "sink": sink,
        "cause": dl.fingerprint,
        "source": dl.source_key,
    }


def parse_matcher(text: str) -> Matcher:
    """`queue=emails`, `severity=~"warn.*"` (amtool's syntax; a quoted value is a JSON string)."""
    found = _SYNTAX.match(text)
    if found is None:
        raise MatcherError(f"not a matcher: {text!r} (expected name=value, name!=value, name=~regex or name!~regex)")
    name, op, value = found.groups()
    if name not in LABELS:
        raise MatcherError(f"unknown label {name!r}: one of {', '.join(LABELS)}")
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            value = json.loads(value)
        except ValueError:
            raise MatcherError(f"badly quoted value: {value}") from None
    try:
        return Matcher.model_validate({"name": name, "op": op, "value": value})
    except ValidationError as exc:
        raise MatcherError(f"{text[:80]!r}: " + "; ".join(e["msg"] for e in exc.errors())) from None


def glob_to_regex(glob: str) -> str:
    """An RE2 body (to anchor) matching exactly what `fnmatch.fnmatchcase(text, glob)` matches."""
    out, i, n = [], 0, len(glob)
    while i < n:
        char = glob[i]
        i += 1
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            end = _class_end(glob, i)
            if end < 0:
                out.append(r"\[")
            else:
                out.append(_class(glob[i:end]))
                i = end + 1
        else:
            out.append(re2.escape(char) if char.isascii() else char)
    return "(?s:" + "".join(out) + ")"


def _class_end(glob: str, start: int) -> int:
    """The index of the `]` closing a class opened just before `start` (fnmatch's rules), else -1."""
    j = start
    if j < len(glob) and glob[j] == "!":
        j += 1
    if j < len(glob) and glob[j] == "]":
        j += 1
    end = glob.find("]", j)
    return end


def _class(body: str) -> str:
    negate = body.startswith("!")
    body = body[1:] if negate else body
    items, k = [], 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            low, high = body[k], body[k + 2]
            if low <= high:
                items.append(f"{_in_class(low)}-{_in_class(high)}")
            k += 3
        else:
            items.append(_in_class(body[k]))
            k += 1
    if not items:  # only reversed ranges: fnmatch matches no character (negated: any one)
        return "(?s:.)" if negate else r"[^\x00-\x{10FFFF}]"
    return ("[^" if negate else "[") + "".join(items) + "]"


def _in_class(char: str) -> str:
    return "\\" + char if char in "\\]^-[" else char


def escape_glob(text: str) -> str:
    """A 0.2.0 queue glob matching exactly `text` (`*`, `?`, `[` put in brackets)."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def selects(silence: Iterable[Matcher], filters: Iterable[Matcher]) -> bool:
    """amtool's query filter: every filter is held by the silence's matchers; an `=` filter by a
    matcher on its label that matches its value (`queue=emails` finds `queue=~"e.*"`), any other
    filter by an identical matcher."""
    held = list(silence)
    for wanted in filters:
        if wanted.op == "=":
            found = any(m.name == wanted.name and m.matches({wanted.name: wanted.value}) for m in held)
        else:
            found = wanted in held
        if not found:
            return False
    return True
