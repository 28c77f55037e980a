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
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Any

from bridge.core.errors import ConfigError
from bridge.core.models import DeadLetter
from bridge.intake.redact import redact_value

SYSTEM_PROMPT_FILE = "system.md"
NONCE_BYTES = 12
BEGIN = "-----BEGIN DEAD LETTER {nonce}-----"
END = "-----END DEAD LETTER {nonce}-----"
_WRAPPED = re.compile(
    r"^-----BEGIN DEAD LETTER (?P<nonce>[0-9a-f]+)-----\n(?P<body>.*)\n-----END DEAD LETTER (?P=nonce)-----$",
    re.MULTILINE,
)
# Identifying but useless to the model; left out of the user message.
_NOT_FOR_THE_MODEL = {"fingerprint", "raw_digest"}


def default_prompt_dir() -> Path:
    """Prompts: packaged copy in a wheel, else the repo's `prompts/`."""
    here = Path(__file__).resolve().parent.parent
    packaged = here / "_data" / "prompts"
    return packaged if packaged.is_dir() else here.parent / "prompts"


def load_system_prompt(catalogue: list[dict[str, str]], directory: Path | None = None) -> str:
    """`system.md` followed by the runbook ids and titles the model may choose from."""
    path = (directory or default_prompt_dir()) / SYSTEM_PROMPT_FILE
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError([f"system prompt {path} cannot be read ({exc.strerror})"]) from None
    lines = [catalogue_line(rb) for rb in catalogue]
    catalogue_text = "\n".join(lines or ["(none)"])
    return (
        f"{text}\n\nRunbook catalogue (id: use when):\n{catalogue_text}\n"
        "(end of the dlq-bridge instructions)"
    )


def catalogue_line(runbook: dict[str, str]) -> str:
    """`- <id>: <use when>` (the title when the runbook has no "use when" line)."""
    return f"- {runbook['id']}: {runbook.get('use_when') or runbook['title']}"


def envelope_json(dead_letter: DeadLetter) -> str:
    """The envelope as one line of JSON, redacted once more on the way out (defence in depth)."""
    fields: dict[str, Any] = dead_letter.model_dump(mode="json", exclude=_NOT_FOR_THE_MODEL)
    return json.dumps(redact_value(fields), ensure_ascii=False, sort_keys=True)


def user_message(dead_letter: DeadLetter, nonce: str | None = None) -> str:
    """The dead letter between marker lines that carry a fresh random nonce."""
    nonce = nonce or secrets.token_hex(NONCE_BYTES)
    return "\n".join([
        f"dlq-bridge dead letter {nonce}: the JSON between the two marker lines below is the whole of it.",
        BEGIN.format(nonce=nonce),
        envelope_json(dead_letter),
        END.format(nonce=nonce),
    ])


def unwrap_dead_letter(text: str) -> str | None:
    """The JSON between the first BEGIN line and the END line with the same nonce, or None."""
    found = _WRAPPED.search(text)
    return found.group("body") if found else None


def build_messages(system_prompt: str, dead_letter: DeadLetter) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": user_message(dead_letter)},
    ]
