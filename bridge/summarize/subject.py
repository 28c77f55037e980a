"""What one gateway call is about: one failure, or one cause shared by many jobs.

A failure whose error says its dependency is down (unreachable, unavailable,
rate-limited: `Cause.shared`) fails the same way in every queue and kind that
uses the dependency. Such a failure is summarized once per cause, not once per
fingerprint: the model is shown the cause's three parts alone (error class,
message template, dependency), so every job of the cause gives the model the
same input, and a producer that copies another queue's error cannot write the
summary that queue's on-call reads (docs/design.md, section 4).

Every other failure is summarized from its whole dead letter, once per
fingerprint. `openclaw.summary_per_cause = false` summarizes every failure
that way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from bridge.core.models import DeadLetter
from bridge.core.seen_before import SeenBefore
from bridge.intake.cause import Cause, shared_cause
from bridge.intake.fingerprint import fold_message
from bridge.intake.redact import redact_value
from bridge.summarize.prompt import Context, build_messages, wrapped

CAUSE_PREFIX = "cause:"
NUMBER_MARK = "#"
QUOTED_MARK = '"…"'


@dataclass(frozen=True)
class Subject:
    """The key a summary is cached and coalesced under, and what the model and the defaults read."""

    key: str
    dead_letter: DeadLetter
    cause: Cause | None = None  # set: the model is shown this cause alone

    def defaults_letter(self) -> DeadLetter:
        """What runbook, severity and repair defaults are read from: the dead letter, or for a shared cause
        a stand-in holding only the cause (built when the gateway is asked, not on every cache hit)."""
        return self.dead_letter if self.cause is None else stand_in(self.cause)

    def facts(self, history: SeenBefore | None = None) -> str:
        """What the model is shown as data, as text: a specific its summary names must be in here
        (bridge.summarize.salvage.Shown). A shared cause's summary serves many jobs: only the cause counts."""
        data = self.dead_letter.model_dump_json() if self.cause is None else cause_json(self.cause)
        return data if history is None else data + json.dumps(history.for_model(), ensure_ascii=False)

    def messages(self, system_prompt: str, context: Context | None = None) -> list[dict[str, str]]:
        if self.cause is None:
            return build_messages(system_prompt, self.dead_letter, context)
        return [
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": cause_message(self.cause, context=context)},
        ]


def subject_of(dead_letter: DeadLetter, per_cause: bool) -> Subject:
    """A shared cause's subject when `per_cause` and the error says its dependency is down."""
    if per_cause and dead_letter.parse_error is None and dead_letter.last_error is not None:
        cause = shared_cause(dead_letter.last_error)  # `cause_of`, when shared; cheap when no dependency is named
        if cause is not None:
            return Subject(CAUSE_PREFIX + cause.key, dead_letter, cause)
    return Subject(dead_letter.fingerprint, dead_letter)


def cause_error(cause: Cause) -> str:
    """The error line as the cause holds it: the class as written, `#` for numbers and ids, `"…"` for quotes."""
    template = cause.template
    folded_class = fold_message(cause.error_class) if cause.error_class else ""
    if folded_class and template.startswith(folded_class):
        template = cause.error_class + template[len(folded_class):]
    return template.replace("<n>", NUMBER_MARK).replace("<q>", QUOTED_MARK)


SHARED = ("not one job: jobs of several queues fail with this error because the dependency is {condition}; "
          "`#` stands for a number or id and \"…\" for a quoted value")


def cause_fields(cause: Cause) -> dict[str, str | bool]:
    """What the model is shown of a shared cause. The system prompt (and so every other summary) is
    unchanged: the one line saying what this is comes inside the JSON, written by the bridge."""
    return {
        "shared_cause": True,
        "failure": SHARED.format(condition=cause.condition),
        "error_class": cause.error_class,
        "last_error": cause_error(cause),
        "dependency": cause.dependency,
        "condition": cause.condition,
    }


def cause_message(cause: Cause, nonce: str | None = None, context: Context | None = None) -> str:
    """The cause between the same marker lines a dead letter gets (one line of JSON, a fresh nonce),
    redacted once more on the way out, as a dead letter is (defence in depth); then the context blocks."""
    return wrapped("shared cause", cause_json(cause), nonce, context)


def cause_json(cause: Cause) -> str:
    """The cause's fields as the model reads them: one line of JSON, redacted once more."""
    return json.dumps(redact_value(cause_fields(cause)), ensure_ascii=False, sort_keys=True)


def stand_in(cause: Cause) -> DeadLetter:
    """A dead letter holding only the cause: what runbook, severity and repair defaults are read from."""
    return DeadLetter(
        source_key="", queue="", job_id="", raw_digest="",
        last_error=f"{cause_error(cause)} ({cause.dependency} {cause.condition})",
    )
