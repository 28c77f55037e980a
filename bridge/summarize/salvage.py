"""Field-by-field salvage of a model reply (docs/design.md, section 4).

A small model's reply is usually right in four fields and wrong in one; the
old rule threw the whole reply away for that one. Here each field is checked
on its own and a bad one is repaired, never trusted:

| field          | fault                                        | repair                                   |
| -------------- | -------------------------------------------- | ---------------------------------------- |
| `runbook_hint` | not a catalogue id (or not text), or one the | the static fallback's runbook choice      |
|                | dead letter contradicts (unparseable-payload |                                          |
|                | without a parse error, no-error-recorded     |                                          |
|                | with an error)                               |                                          |
|                | an id with a path, `.md`, other case          | that id                                  |
| `title`        | over 120 characters after cleaning           | cut at a word boundary, `…`              |
|                | names a specific the failure does not hold,  | the fallback's title                     |
|                | copies a shown runbook line, or is an id     |                                          |
| `likely_cause` | over 500 characters after cleaning           | cut at a word boundary, `…`              |
|                | copies a runbook line the model was shown    | the fallback's cause (the error itself)  |
|                | (32 characters in a row the dead letter does |                                          |
|                | not hold: it describes the runbook)          |                                          |
|                | names a specific the failure does not hold,  | the fallback's cause                     |
|                | or is a runbook id                           |                                          |
| `next_steps`   | over 4 steps / empty or non-text steps       | the first 4 / dropped                    |
|                | none left (or not a list)                    | the fallback runbook's steps             |
|                | a step over 200 characters                   | cut at a word boundary                   |
|                | a step naming a specific the failure does    | dropped                                  |
|                | not hold                                     |                                          |
| `severity`     | not one of the four values                   | the routed severity of the queue         |
| other keys     | present                                      | dropped                                  |

A reply still falls back (`schema`) when `title` or `likely_cause` is
missing, not text, or empty once cleaned (nothing but removed links left); and (`invalid_json`) when it holds
no JSON object at all. Every text that survives is cleaned as before
(bridge.summarize.reply.clean_text): invisible characters, links outside the
runbook base, secrets. Each repair is named by its field in `Salvaged.repairs`.

A specific is what a reader takes as a fact of this failure: a host or dotted
name, a version or address, a number of three digits or more (a status code,
a port, an errno), a file path. The model may only repeat the ones it was
shown as data (`Shown.facts`: the dead letter or shared cause, and its
history); one it made up ("a 429" for an HTTP 403, a `config/application.rb`
no trace names) would send on-call after the wrong thing. The runbook lines
the model was shown are not facts of the failure: a "429" copied from the
rate-limit runbook's line is made up too.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

from bridge.core.errors import SummaryError
from bridge.core.models import Severity, SummaryDraft
from bridge.summarize.reply import URL_REMOVED, clean_text, extract_json_object

TITLE_MAX = 120
CAUSE_MAX = 500
STEP_MAX = 200
HINT_MAX = 64
MAX_STEPS = 4
COPY_WINDOW = 32  # characters in a row of a shown runbook line that make a cause a copy of it
KNOWN_KEYS = frozenset(SummaryDraft.model_fields)
REPAIRABLE = ("title", "likely_cause", "severity", "next_steps", "runbook_hint", "extra_keys")
_SEVERITIES = {s.value: s for s in Severity}
_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)  # a link cleaning kept: under the runbook base
_SPECIFIC = re.compile(
    r"\b(?:[a-z0-9_-]+\.)+[a-z]{2,}\b"  # host and dotted names: api.github.com, database.yml
    r"|\bv?\d+(?:\.\d+)+\b"  # versions and addresses
    r"|\b\d{3,}\b"  # status codes, ports, errnos
    r"|[\w.-]+(?:/[\w.-]+)+",  # file paths
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Defaults:
    """What a repaired field becomes: the static fallback's choices for this dead letter."""

    runbook_hint: str = ""
    severity: Severity = Severity.ERROR
    next_steps: tuple[str, ...] = ("Inspect the entry with `dlq-bridge peek`",)
    ruled_out: frozenset[str] = frozenset()  # ids the dead letter contradicts (no parse error, an error recorded)
    likely_cause: str = "The job failed; read its last error."
    title: str = "A job failed"


class Fallbacks(Protocol):
    """What a repair reads: `Defaults`, or `bridge.summarize.fallback.LazyDefaults` (its runbook matched
    only when a repair first needs it)."""

    @property
    def title(self) -> str: ...

    @property
    def runbook_hint(self) -> str: ...

    @property
    def likely_cause(self) -> str: ...

    @property
    def severity(self) -> Severity: ...

    @property
    def next_steps(self) -> tuple[str, ...]: ...

    @property
    def ruled_out(self) -> frozenset[str]: ...


@dataclass(frozen=True)
class Salvaged:
    """A valid draft and the fields that had to be repaired (empty: the reply was valid as sent)."""

    draft: SummaryDraft
    repairs: tuple[str, ...] = ()


def cut_at_word(text: str, limit: int) -> str:
    """`text` within `limit` characters, cut at the last space when one is near the end, with `…`."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space >= limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:.-") + "…"


class _Repairs:
    def __init__(self) -> None:
        self.fields: list[str] = []

    def note(self, field: str) -> None:
        if field not in self.fields:
            self.fields.append(field)


def _text(value: object, limit: int, field: str, repairs: _Repairs, runbook_base: str | None) -> str:
    """Cleaned text within `limit` ('' when nothing is left or it was not text)."""
    if not isinstance(value, str):
        return ""
    cleaned = " ".join(clean_text(value, runbook_base).split())
    if len(cleaned) > limit:
        repairs.note(field)
        cleaned = cut_at_word(cleaned, limit)
    return cleaned


def _required(found: dict[str, Any], field: str, limit: int, repairs: _Repairs, base: str | None) -> str:
    text = _text(found.get(field), limit, field, repairs, base)
    if not text.replace(URL_REMOVED, "").strip(" -.,;:"):  # nothing but removed links and punctuation
        raise SummaryError("schema", f"reply has no usable {field}")
    return text


def _severity(value: object, defaults: Fallbacks, repairs: _Repairs) -> Severity:
    found = _SEVERITIES.get(value.strip().lower()) if isinstance(value, str) else None
    if found is None:
        repairs.note("severity")
        return defaults.severity
    return found


def _steps(value: object, defaults: Fallbacks, repairs: _Repairs, base: str | None, shown: Shown) -> list[str]:
    items = value if isinstance(value, list) else []
    steps = [s for s in (_text(v, STEP_MAX, "next_steps", repairs, base) for v in items)
             if s.strip(" -.") and not shown.invents(s)]
    if len(steps) != len(items) or len(steps) > MAX_STEPS:
        repairs.note("next_steps")
    if not steps:
        repairs.note("next_steps")
        steps = [cut_at_word(s, STEP_MAX) for s in defaults.next_steps]
    return steps[:MAX_STEPS]


def _names_a_runbook(text: str, runbook_ids: Collection[str]) -> bool:
    """The whole text is a runbook id (`lock-deadlock` as a cause): it names a page, not this failure."""
    return text.strip(" .`'\"").lower() in runbook_ids


def normalize_hint(value: str) -> str:
    """`runbooks/failures/Timeout.md` → `timeout`: the id a model meant, if it wrote a path or a file."""
    hint = value.strip().strip("`'\"").lower().rsplit("/", 1)[-1]
    return hint.removesuffix(".md").strip()


def _hint(value: object, runbook_ids: Collection[str], defaults: Fallbacks, repairs: _Repairs) -> str:
    if value is None or value == "":
        return ""  # the model says no runbook fits: that is an answer, not a fault
    if isinstance(value, str) and value in runbook_ids and value not in defaults.ruled_out:
        return value
    meant = normalize_hint(value) if isinstance(value, str) and len(value) <= 4 * HINT_MAX else ""
    repairs.note("runbook_hint")
    return meant if meant in runbook_ids and meant not in defaults.ruled_out else defaults.runbook_hint


@dataclass(frozen=True)
class Shown:
    """What the model was shown that is not the failure: the runbooks' use-when lines; and the dead
    letter's own text (`letter`), which a cause may quote even where a runbook line says the same."""

    lines: tuple[str, ...] = ()
    letter: str = ""
    facts: str = ""  # what the model was shown as data ('': nothing is checked)

    def copied_in(self, text: str) -> bool:
        """`text` holds COPY_WINDOW characters in a row of a shown line that the dead letter does not."""
        folded, letter = text.casefold(), self.letter.casefold()
        for line in (line.casefold() for line in self.lines):
            for start in range(0, len(line) - COPY_WINDOW + 1, 4):
                window = line[start:start + COPY_WINDOW]
                if window in folded and window not in letter:
                    return True
        return False

    def invents(self, text: str) -> bool:
        """`text` names a specific (a host, version, number of three digits or more, path) not in `facts`."""
        if not self.facts:
            return False
        named = _SPECIFIC.findall(_URL.sub(" ", text))
        return any(found.casefold().strip(".") not in self._folded_facts for found in named)

    @cached_property
    def _folded_facts(self) -> str:
        """`facts` casefolded once: a reply's title, cause and every step are checked against it."""
        return self.facts.casefold()


def salvage(
    found: dict[str, Any],
    runbook_ids: Collection[str],
    defaults: Fallbacks,
    *,
    runbook_base: str | None = None,
    shown: Shown = Shown(),
) -> Salvaged:
    """A valid draft from a reply object, repairing fields one by one; SummaryError(schema) if it cannot."""
    repairs = _Repairs()
    title = _required(found, "title", TITLE_MAX, repairs, runbook_base)
    if shown.copied_in(title) or shown.invents(title) or _names_a_runbook(title, runbook_ids):
        title = cut_at_word(defaults.title, TITLE_MAX)
        repairs.note("title")
    cause = _required(found, "likely_cause", CAUSE_MAX, repairs, runbook_base)
    if shown.copied_in(cause) or shown.invents(cause) or _names_a_runbook(cause, runbook_ids):
        cause = defaults.likely_cause  # the runbook's description or id, or a made-up fact
        repairs.note("likely_cause")
    if set(found) - KNOWN_KEYS:
        repairs.note("extra_keys")
    draft = SummaryDraft(
        title=title,
        severity=_severity(found.get("severity"), defaults, repairs),
        likely_cause=cause,
        next_steps=_steps(found.get("next_steps"), defaults, repairs, runbook_base, shown),
        runbook_hint=_hint(found.get("runbook_hint"), runbook_ids, defaults, repairs),
    )
    return Salvaged(draft, tuple(repairs.fields))


def salvage_reply(
    content: str,
    runbook_ids: Collection[str],
    defaults: Fallbacks | None = None,
    *,
    runbook_base: str | None = None,
    shown: Shown = Shown(),
) -> Salvaged:
    """The reply text salvaged into a draft; SummaryError(invalid_json | schema) when it cannot be."""
    found = extract_json_object(content)
    if found is None:
        raise SummaryError("invalid_json", "reply holds no JSON object")
    return salvage(found, runbook_ids, defaults or Defaults(), runbook_base=runbook_base, shown=shown)
