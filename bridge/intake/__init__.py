"""The intake: raw bytes of a dead letter → one redacted, fingerprinted DeadLetter (pure, no I/O).

`chain` runs the stages in order: `envelope` (parse any bytes into a bounded envelope, with
`streamed_fields` for an entry too big to parse whole) → `redact` (`secret_patterns`, linear-time
RE2) → `fingerprint`; `cause` reads the cause fingerprint (class, template, dependency) that
grouping and the summarizer share.
"""
