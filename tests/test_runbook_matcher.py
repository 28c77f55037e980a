"""The fallback's matcher on the development corpus (bench/quality/corpus.json) and on the failure
classes issue 36 added pages for. The held-out files are never used here: they judge the matcher,
they do not shape it (bench/quality/LABELS.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bridge.intake.chain import normalize
from bridge.summarize.runbooks import RunbookCatalog

CORPUS = Path(__file__).resolve().parent.parent / "bench" / "quality" / "corpus.json"
ADDED = (
    "dns-failure",
    "tls-verification",
    "lock-deadlock",
    "pool-exhausted",
    "throttled-by-cloud-api",
    "credentials-expired",
    "permission-denied",
    "disk-full",
    "unknown-task",
)


def hint_for(catalog: RunbookCatalog, error: str) -> str:
    raw = json.dumps({"queue": "q", "job_id": "j", "job_name": "job", "attempts": 3, "last_error": error})
    runbook = catalog.match(normalize(raw.encode(), "dead_letter:q"))
    return runbook.id if runbook else ""


def test_every_development_failure_gets_a_runbook_it_is_labelled_with() -> None:
    catalog = RunbookCatalog.load()
    entries = json.loads(CORPUS.read_text(encoding="utf-8"))
    misses = [
        (e["id"], hint_for(catalog, e["last_error"]))
        for e in entries
        if hint_for(catalog, e["last_error"]) not in e["runbooks"]
    ]
    assert misses == []


def test_each_added_page_says_when_it_fits_what_to_check_and_what_to_do() -> None:
    catalog = RunbookCatalog.load()
    for runbook_id in ADDED:
        runbook = catalog.get(runbook_id)
        assert runbook is not None and runbook.path is not None, runbook_id
        body = runbook.path.read_text(encoding="utf-8")
        assert runbook.use_when and runbook.patterns and 1 <= len(runbook.next_steps) <= 4, runbook_id
        assert "## What to check" in body and "## What to do" in body, runbook_id


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ("socket.gaierror: [Errno -2] Name or service not known", "dns-failure"),
        ("getaddrinfo ENOTFOUND api.example.com", "dns-failure"),
        (
            "ssl.SSLCertVerificationError: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
            "self signed certificate",
            "tls-verification",
        ),
        ("PG::TRDeadlockDetected: ERROR:  deadlock detected", "lock-deadlock"),
        ("ActiveRecord::LockWaitTimeout: Mysql2::Error::TimeoutError: Lock wait timeout exceeded", "lock-deadlock"),
        (
            "ActiveRecord::ConnectionTimeoutError: could not obtain a connection from the pool within 5.000 seconds",
            "pool-exhausted",
        ),
        ("psycopg2.OperationalError: FATAL:  sorry, too many clients already", "pool-exhausted"),
        (
            "botocore.exceptions.ClientError: An error occurred (ThrottlingException) "
            "when calling the PutItem operation",
            "throttled-by-cloud-api",
        ),
        ("google.api_core.exceptions.ResourceExhausted: 429 RESOURCE_EXHAUSTED", "throttled-by-cloud-api"),
        (
            "An error occurred (ExpiredToken) when calling the GetObject operation: The provided token has expired.",
            "credentials-expired",
        ),
        ("An error occurred (AccessDenied) when calling the PutObject operation: Access Denied", "permission-denied"),
        ("PermissionError: [Errno 13] Permission denied: '/data/out.csv'", "permission-denied"),
        ("An error occurred (InvalidAccessKeyId) when calling the ListBuckets operation", "auth-failed"),
        ("OSError: [Errno 28] No space left on device", "disk-full"),
        ("celery.exceptions.NotRegistered: 'app.tasks.resize'", "unknown-task"),
        ("NameError: uninitialized constant HardWorker", "unknown-task"),
        ("403 Forbidden: API rate limit exceeded", "rate-limited"),
        ("requests.exceptions.ReadTimeout: Read timed out. (read timeout=10)", "timeout"),
    ],
)
def test_added_failure_classes_get_their_page(error: str, expected: str) -> None:
    assert hint_for(RunbookCatalog.load(), error) == expected
