"""The request messages: system prompt from `prompts/`, the dead letter as the user message.

A real OpenClaw gateway wraps both (docs/design.md, section 4): our system
prompt lands inside the gateway's own, and the user message gains a
timestamp prefix and a runtime trailer. So the dead letter is delimited
unambiguously, between a BEGIN and an END line that carry a random nonce
drawn per request:

    dlq-bridge dead letter <nonce>: the JSON between the two marker lines below is the whole of it.
    -----BEGIN DEAD LETTER <nonce>-----
    {"attempts": 3, "job_id": "...", ...}
    -----END DEAD LETTER <nonce>-----

The JSON is written on one line (newlines inside strings are escaped), so no
payload can start a line of its own, and none can guess the nonce to fake
the END line.

After the END line come the bridge's own blocks, each a heading line and its
lines (`Context`): `RUNBOOKS that may fit:`, the few runbooks the dead letter
most plausibly needs (by the fallback's matcher and the cause), one
`- <id>: <use when>` line each; and `HISTORY of this cause:`, when the cause
was seen before (bridge.core.seen_before): one line of JSON whose operator
note is data like the dead letter. They need no nonce of their own: nothing
the dead letter or the note holds can start a line, and the END line before
them cannot be forged. The nonce is drawn once and written twice (about 18
tokens each time: a model evaluates every marker line of every request). The
system prompt is the same for every request (a model server caches its prefix).
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bridge.core.errors import ConfigError
from bridge.core.models import DeadLetter
from bridge.core.seen_before import SeenBefore
from bridge.intake.redact import redact_value

SYSTEM_PROMPT_FILE = "system.md"
NONCE_BYTES = 12
BEGIN = "-----BEGIN DEAD LETTER {nonce}-----"
END = "-----END DEAD LETTER {nonce}-----"
HEADER = "dlq-bridge {what}: the JSON between the two marker lines below is the whole of it."
RUNBOOKS_HEADING = "RUNBOOKS that may fit:"
HISTORY_HEADING = "HISTORY of this cause:"
_WRAPPED = re.compile(
    r"^-----BEGIN DEAD LETTER (?P<nonce>[0-9a-f]+)-----\n(?P<body>.*)\n-----END DEAD LETTER (?P=nonce)-----$",
    re.MULTILINE,
)
# Identifying but useless to the model; left out of the user message (a timestamp is about 20 tokens:
# the model's tokenizer spells each digit; the cause's own first and last times are in HISTORY).
_NOT_FOR_THE_MODEL = {"fingerprint", "raw_digest", "first_failed_at"}
# A field with no value is left out (tokens the model evaluates for every dead letter), except these:
# the system prompt says what a null `last_error` means.
_SHOWN_WHEN_NULL = {"last_error"}


def default_prompt_dir() -> Path:
    """Prompts: packaged copy in a wheel, else the repo's `prompts/`."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "_data" / "prompts"
    return packaged if packaged.is_dir() else here.parent / "prompts"


def load_system_prompt(directory: Path | None = None) -> str:
    """`system.md`: the same for every request; the runbooks that may fit come with each dead letter."""
    path = (directory or default_prompt_dir()) / SYSTEM_PROMPT_FILE
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError([f"system prompt {path} cannot be read ({exc.strerror})"]) from None
    return f"{text}\n(end of the dlq-bridge instructions)"


def catalogue_line(runbook: dict[str, str]) -> str:
    """`- <id>: <use when>` (the title when the runbook has no "use when" line)."""
    return f"- {runbook['id']}: {runbook.get('use_when') or runbook['title']}"


@dataclass(frozen=True)
class Context:
    """What the bridge adds after the dead letter: the runbooks that may fit, and the cause's history."""

    runbooks: tuple[dict[str, str], ...] = ()
    history: SeenBefore | None = None

    def lines(self) -> list[str]:
        found = [RUNBOOKS_HEADING, *(catalogue_line(rb) for rb in self.runbooks)] if self.runbooks else []
        if self.history is not None:
            found += [HISTORY_HEADING, json.dumps(self.history.for_model(), ensure_ascii=False, sort_keys=True)]
        return found


def envelope_json(dead_letter: DeadLetter) -> str:
    """The envelope as one line of JSON without empty fields, redacted once more on the way out
    (defence in depth)."""
    dumped: dict[str, Any] = dead_letter.model_dump(mode="json", exclude=_NOT_FOR_THE_MODEL)
    fields = {k: v for k, v in dumped.items() if v is not None or k in _SHOWN_WHEN_NULL}
    if fields.get("reported_queue") == fields.get("queue"):  # the same name twice
        fields.pop("reported_queue", None)
    return json.dumps(redact_value(fields), ensure_ascii=False, sort_keys=True)


def wrapped(what: str, data: str, nonce: str | None = None, context: Context | None = None) -> str:
    """One line of JSON between marker lines that carry a fresh random nonce, then the context blocks."""
    nonce = nonce or secrets.token_hex(NONCE_BYTES)
    return "\n".join([
        HEADER.format(what=what),
        BEGIN.format(nonce=nonce),
        data,
        END.format(nonce=nonce),
        *(context.lines() if context else []),
    ])


def user_message(dead_letter: DeadLetter, nonce: str | None = None, context: Context | None = None) -> str:
    """The dead letter between marker lines that carry a fresh random nonce, then the context blocks."""
    return wrapped("dead letter", envelope_json(dead_letter), nonce, context)


def unwrap_dead_letter(text: str) -> str | None:
    """The JSON between the first BEGIN line and the END line with the same nonce, or None."""
    found = _WRAPPED.search(text)
    return found.group("body") if found else None


def build_messages(system_prompt: str, dead_letter: DeadLetter, context: Context | None = None) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": user_message(dead_letter, context=context)},
    ]
