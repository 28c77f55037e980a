"""The bad-input corpus: stored nasty files plus generated large ones."""

from __future__ import annotations

import json
from pathlib import Path

CORPUS_DIR = Path(__file__).parent / "corpus"

PLANTED_SECRETS = (
    "Sup3rS3cretPw",
    "tok_9f8e7d6c5b4a3f2e1d0c",
    "AKIAIOSFODNN7EXAMPLE",
    "hunter2-corpus",
    "xoxb-123456789012-corpussecret",
    "sk_live_corpusSECRET123",
    "4111-1111-1111-1111",
    "4111111111111111",
    "corpus-api-key-value",
    "corpus-api-key-2",
    "corpus-client-secret",
    "corpus-cookie",
    "corpus-token-value",
    "corpus-url-pass",
)


def generated() -> dict[str, bytes]:
    """Entries too large to keep in the repository."""
    return {
        "nested_10000.json": b'{"a":' * 10_000 + b"1" + b"}" * 10_000,
        "nested_array_10000.json": b"[" * 10_000 + b"]" * 10_000,
        "blob_20mb.json": json.dumps({"job_id": "blob", "last_error": "MemoryError: " + "x" * 20_000_000}).encode(),
        "raw_20mb.bin": b"\xfe" * 20_000_000,
        "giant_array_params.json": json.dumps(
            {"job_id": "giant-array", "params": list(range(1_000_000)), "last_error": "ValueError: too many"}
        ).encode(),
        "giant_object.json": json.dumps({f"k{i}": i for i in range(100_000)}).encode(),
    }


def corpus() -> dict[str, bytes]:
    """Every corpus entry by name: the stored files and the generated ones."""
    stored = {p.name: p.read_bytes() for p in sorted(CORPUS_DIR.iterdir()) if p.suffix in (".json", ".bin")}
    return {**stored, **generated()}
