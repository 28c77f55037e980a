"""The request messages: system prompt from `prompts/`, the dead letter as the user message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bridge.errors import ConfigError
from bridge.models import DeadLetter
from bridge.redact import redact_value

SYSTEM_PROMPT_FILE = "system.md"
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
    lines = [f"- {rb['id']}: {rb['title']}" for rb in catalogue]
    return f"{text}\n\nRunbook catalogue (id: title):\n" + "\n".join(lines or ["(none)"])


def user_message(dead_letter: DeadLetter) -> str:
    """The envelope as JSON, redacted once more on the way out (defence in depth)."""
    fields: dict[str, Any] = dead_letter.model_dump(mode="json", exclude=_NOT_FOR_THE_MODEL)
    return json.dumps(redact_value(fields), ensure_ascii=False, sort_keys=True)


def build_messages(system_prompt: str, dead_letter: DeadLetter) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": user_message(dead_letter)},
    ]
