"""The intake: raw DLQ bytes → normalize → redact → fingerprint → DeadLetter.

Three stages, each its own module with its own bound (docs/design.md,
sections 1 and 3): `bridge.intake.envelope` parses at most `max_parse_bytes` and
prunes every field; `bridge.intake.redact` makes one linear-time (RE2) pass over the
whole envelope; `bridge.intake.fingerprint` hashes the redacted result. Pure and
synchronous, no I/O: the pipeline may run it in a worker thread under a
deadline. It never raises.
"""

from __future__ import annotations

from bridge.config.sources import ListSourcesSettings
from bridge.core.models import DeadLetter
from bridge.intake.envelope import DEFAULT_MAX_PARSE_BYTES, parse_entry, raw_digest, unparseable
from bridge.intake.fingerprint import with_fingerprint
from bridge.intake.redact import redact_envelope


def prepare(raw: bytes, source_key: str, settings: ListSourcesSettings) -> DeadLetter:
    """The pipeline's entry point: the redacted, fingerprinted envelope of one raw entry."""
    return normalize(
        raw, source_key, excerpt_max=settings.excerpt_max_bytes, max_parse_bytes=settings.max_parse_bytes
    )


def normalize(
    raw: bytes, source_key: str, *, excerpt_max: int = 2048, max_parse_bytes: int = DEFAULT_MAX_PARSE_BYTES
) -> DeadLetter:
    """normalize → redact → fingerprint, with explicit limits (commands and tests call this)."""
    try:
        parsed = parse_entry(raw, source_key, excerpt_max=excerpt_max, max_parse_bytes=max_parse_bytes)
        return with_fingerprint(redact_envelope(parsed, excerpt_max))
    except Exception as exc:  # never lose an entry to a bug in a later stage: alert without an excerpt
        why = f"intake failed: {type(exc).__name__}"
        bare = unparseable(b"", source_key, raw_digest(raw), why, excerpt_max)
        return with_fingerprint(redact_envelope(bare, excerpt_max))
