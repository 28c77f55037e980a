"""The static alert of a quarantined entry: built from the source key and digest alone.

An entry whose consumer died or timed out while holding it
`sources.quarantine_after` times, or whose processing ran past
`sources.entry_deadline_s`, is never parsed again: it is moved, unparsed, to
`dlq_bridge:quarantine:<source ref>` and announced by this alert (docs/design.md,
section 2). The entry is never parsed again: the alert carries only what a streamed read of its
first `HEAD_BYTES` gives (job id, name, attempts, error; `bridge.intake.envelope.identity_of`), redacted
like any envelope, else the digest. `dlq-bridge redrive QUEUE --quarantine` pushes it back.
"""

from __future__ import annotations

import hashlib

from bridge.core import names
from bridge.core.models import Alert, DeadLetter, Severity, Summary, SummarySource
from bridge.intake.envelope import identity_of
from bridge.intake.redact import redact_envelope, redact_key_name

FALLBACK_REASON = "quarantined"
QUARANTINED_PREFIX = "quarantined:"
HEAD_BYTES = 16 * 1024  # of a quarantined entry, read for its identity, never more
_STEPS = [
    "Inspect the entry in its quarantine list: `LRANGE dlq_bridge:quarantine:<source ref> 0 -1`",
    "Fix or drop it, then push it back to its DLQ: `dlq-bridge redrive <queue> --quarantine`",
]


def quarantine_title(claims: int, deadline_s: float | None) -> str:
    if deadline_s is not None:
        return f"Quarantined dead letter: processing took over {deadline_s:g} s"
    return f"Quarantined dead letter: processing failed {claims} times"


def quarantine_alert(
    source_key: str, digest: str, severity: Severity, title: str, raw: bytes | None = None,
    *, queue: str | None = None,
) -> Alert:
    """A minimal alert: queue from the (displayed) source key, or `queue` (a kind record's); job id
    (`quarantined:<id>`), name, attempts and error from the first `HEAD_BYTES` of `raw` when they
    hold them, else job id `quarantined:sha256:<digest>`."""
    shown = redact_key_name(source_key)
    dead_letter = DeadLetter(
        source_key=shown,
        queue=queue or names.queue_of(shown),
        job_id=f"{QUARANTINED_PREFIX}sha256:{digest}",
        raw_digest=digest,
        parse_error="quarantined: not parsed",
        fingerprint=hashlib.sha256(f"quarantine\x1f{shown}".encode()).hexdigest()[:16],
    )
    if raw is not None:
        dead_letter = _with_identity(dead_letter, raw[:HEAD_BYTES])
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


def _with_identity(dead_letter: DeadLetter, head: bytes) -> DeadLetter:
    """The job id, name, attempts and error of a streamed read of `head`, redacted; nothing else."""
    try:
        found = redact_envelope(identity_of(head, dead_letter.source_key, dead_letter.raw_digest, "", 64), 64)
    except Exception:  # never lose the alert to the read: the digest stands
        return dead_letter
    return dead_letter.model_copy(update={
        # `quarantined:<id>`: its own Idempotency-Key, ledger mark and dedup_key, so the job's normal
        # alert after `redrive --quarantine` (same bytes, same digest) is not taken for this one
        "job_id": f"{QUARANTINED_PREFIX}{found.job_id}",
        "job_name": found.job_name,
        "attempts": found.attempts,
        "last_error": found.last_error,
    })
