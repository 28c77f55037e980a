"""The static alert of a quarantined entry: built from the source key, the digest and a bounded read.

An entry whose consumer died or timed out while holding it
`sources.quarantine_after` times, or whose processing ran past
`sources.entry_deadline_s`, is never parsed again: it is moved, unparsed, to
`dlq_bridge:quarantine:<source ref>` and announced by this alert (docs/design.md,
section 2). Only its first `QUARANTINE_READ_BYTES` are read, streaming and keeping top-level
scalars only (`bridge.identity.head_identity`), for its job id, name and error (redacted like any
envelope); without them the job id is `sha256:<digest>`.
"""

from __future__ import annotations

import hashlib

from bridge import keys
from bridge.envelope import identified
from bridge.identity import head_identity
from bridge.models import Alert, Severity, Summary, SummarySource
from bridge.redact import redact_envelope

FALLBACK_REASON = "quarantined"
_STEPS = [
    "Inspect the entry in its quarantine list: `LRANGE dlq_bridge:quarantine:<source ref> 0 -1`",
    "Fix or drop it, then push it back to its DLQ to alert on it normally",
]


def quarantine_title(claims: int, deadline_s: float | None) -> str:
    if deadline_s is not None:
        return f"Quarantined dead letter: processing took over {deadline_s:g} s"
    return f"Quarantined dead letter: processing failed {claims} times"


def quarantine_alert(source_key: str, raw: bytes, digest: str, severity: Severity, title: str) -> Alert:
    """A minimal alert: queue from the (displayed) source key; job id, name and error from the head
    of the entry when it names them, else job id `sha256:<digest>`."""
    shown = keys.display(source_key)
    found = identified(head_identity(raw), shown, digest)
    dead_letter = redact_envelope(found, 0).model_copy(update={
        "parse_error": "quarantined: not parsed",
        "fingerprint": hashlib.sha256(f"quarantine\x1f{shown}".encode()).hexdigest()[:16],
    })
    summary = Summary(
        title=title,
        severity=severity,
        likely_cause=(
            "The bridge could not finish processing this dead letter: its consumer died, or ran past "
            "the processing deadline, while holding it. It is kept unparsed in the quarantine list of its DLQ."
        ),
        next_steps=_STEPS,
        source=SummarySource.FALLBACK,
        fallback_reason=FALLBACK_REASON,
    )
    return Alert(dead_letter=dead_letter, summary=summary, severity=severity)
