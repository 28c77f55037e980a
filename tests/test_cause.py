"""Cause fingerprints (docs/design.md, section 5d): real job-system errors, then properties."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.intake.cause import cause_key, cause_of, dependency
from bridge.intake.fingerprint import fingerprint

# Error texts as the sources build them (bridge/sources/*: `<class>: <message>` or a traceback),
# shaped after errors reported against Sidekiq, Celery, RQ and BullMQ apps.
SIDEKIQ_PG = (
    "PG::ConnectionBad: could not connect to server: Connection refused\n"
    '\tIs the server running on host "postgres-primary" (10.0.0.7) and accepting\n'
    "\tTCP/IP connections on port 5432?"
)
CELERY_PG = (
    "Traceback (most recent call last):\n"
    '  File "/app/tasks/billing.py", line 41, in charge\n'
    "    conn = psycopg2.connect(dsn)\n"
    'psycopg2.OperationalError: connection to server at "10.1.209.231", port 5432 failed: Connection refused\n'
    "\tIs the server running on that host and accepting TCP/IP connections?"
)
RQ_REDIS = "redis.exceptions.ConnectionError: Error 111 connecting to 127.0.0.1:11311. Connection refused."
BULLMQ_REDIS = "Error: connect ECONNREFUSED 10.59.255.141:6379"
CELERY_SQS = ('botocore.exceptions.EndpointConnectionError: Could not connect to the endpoint URL: '
              '"https://sqs.eu-west-1.amazonaws.com/"')
SIDEKIQ_SMTP = 'Errno::ECONNREFUSED: Connection refused - connect(2) for "smtp.mailgun.org" port 587'
CELERY_SOCKET = ('django.db.utils.OperationalError: connection to server on socket '
                 '"/var/run/postgresql/.s.PGSQL.5432" failed: No such file or directory')
DSN = ("sqlalchemy.exc.OperationalError: (psycopg2.OperationalError) could not connect "
       "postgresql://app:x@db.internal:5432/orders")

OPENAI_429 = "HTTPError: 429 Client Error: Too Many Requests for url: https://api.openai.com/v1/completions"
FARADAY_503 = ("Faraday::ServerError: the server responded with status 503 (Service Unavailable) "
               "for POST https://api.shipbob.com/1.0/order")
STRIPE_CARD = "Stripe::CardError: Your card was declined. (request https://api.stripe.com/v1/charges)"


@pytest.mark.parametrize(
    ("text", "klass", "dep", "label"),
    [
        (SIDEKIQ_PG, "PG::ConnectionBad", "postgres-primary:5432", "postgres-primary:5432 unreachable"),
        (CELERY_PG, "psycopg2.OperationalError", "10.1.209.231:5432", "10.1.209.231:5432 unreachable"),
        (RQ_REDIS, "redis.exceptions.ConnectionError", "127.0.0.1:11311", "127.0.0.1:11311 unreachable"),
        (BULLMQ_REDIS, "Error", "10.59.255.141:6379", "10.59.255.141:6379 unreachable"),
        (CELERY_SQS, "botocore.exceptions.EndpointConnectionError", "aws sqs eu-west-1",
         "aws sqs eu-west-1 unreachable"),
        (SIDEKIQ_SMTP, "Errno::ECONNREFUSED", "smtp.mailgun.org:587", "smtp.mailgun.org:587 unreachable"),
        (CELERY_SOCKET, "django.db.utils.OperationalError", "unix:/var/run/postgresql/.s.PGSQL.5432",
         "unix:/var/run/postgresql/.s.PGSQL.5432 unreachable"),
        (DSN, "sqlalchemy.exc.OperationalError", "db.internal:5432", "db.internal:5432 unreachable"),
        (OPENAI_429, "HTTPError", "api.openai.com", "api.openai.com rate-limited"),
        (FARADAY_503, "Faraday::ServerError", "api.shipbob.com", "api.shipbob.com unavailable"),
        (STRIPE_CARD, "Stripe::CardError", "api.stripe.com", "Stripe::CardError from api.stripe.com"),
        ("KeyError: 'sku-1234'", "KeyError", "", "KeyError: <q>"),
    ],
)
def test_real_errors_name_their_class_dependency_and_say_it_in_words(
    text: str, klass: str, dep: str, label: str
) -> None:
    cause = cause_of(text)
    assert (cause.error_class, cause.dependency, cause.label) == (klass, dep, label)


@pytest.mark.parametrize(
    ("text", "shared"),
    [(SIDEKIQ_PG, True), (CELERY_SOCKET, True), (OPENAI_429, True), (FARADAY_503, True),
     (STRIPE_CARD, False), ("KeyError: 'sku-1234'", False),
     ("ValueError: connection refused by the user", False),  # names no dependency
     ("OSError: /data/import.csv: No such file or directory", False)],  # a file, not a socket
)
def test_a_cause_is_shared_only_when_it_says_its_dependency_is_down(text: str, shared: bool) -> None:
    assert cause_of(text).shared is shared


def test_the_template_takes_out_numbers_quoted_values_and_durations() -> None:
    a = cause_of("TimeoutError: smtp.internal:25 timed out after 30s (message 17, id 'm-1')")
    b = cause_of("TimeoutError: smtp.internal:25 timed out after 5s (message 90210, id 'zz')")
    assert a.template == b.template == "TimeoutError: smtp.internal:<n> timed out after <n>s (message <n>, id <q>)"
    assert a.key == b.key


def test_a_traceback_is_read_at_its_exception_line_not_its_frames() -> None:
    other_app = CELERY_PG.replace("/app/tasks/billing.py", "/srv/reports/export.py").replace("line 41", "line 7")
    assert cause_key(other_app) == cause_key(CELERY_PG)


def test_source_files_and_node_internals_are_not_dependencies() -> None:
    assert dependency("/app/vendor/pg-1.1.4/lib/pg.rb:56:in `initialize'") == ""
    assert dependency("at TCPConnectWrap.afterConnect (node:net:1605:16)") == ""
    assert dependency('File "/app/x.py", line 699, in connect') == ""


def test_the_cause_leaves_out_queue_and_source_the_fingerprint_keeps_them() -> None:
    in_orders = fingerprint("redis:dlq:orders", "sync_inventory", RQ_REDIS, None)
    in_billing = fingerprint("rq:billing", "reindex", RQ_REDIS, None)
    assert in_orders != in_billing
    assert cause_key(RQ_REDIS) == cause_key(RQ_REDIS.replace("Error 111", "Error 61"))


def test_another_host_is_another_cause() -> None:
    assert cause_key(BULLMQ_REDIS) != cause_key(BULLMQ_REDIS.replace("10.59.255.141", "10.59.255.142"))
    assert cause_key(SIDEKIQ_PG) != cause_key(SIDEKIQ_PG.replace("postgres-primary", "postgres-replica"))


def test_an_unparseable_entry_has_its_parse_error_as_cause() -> None:
    assert cause_of(None, "invalid JSON at 17").template == "unparseable: invalid JSON at <n>"
    assert cause_key(None, "invalid JSON at 17") == cause_key(None, "invalid JSON at 99")


hosts = st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,10}){0,3}", fullmatch=True)
ports = st.integers(min_value=10, max_value=65535)


numbers = st.integers(0, 10**9)


@given(host=hosts, port=ports, a=numbers, b=numbers, q=st.text(string.ascii_letters, max_size=30))
def test_ids_numbers_and_quoted_values_never_split_a_cause(host: str, port: int, a: int, b: int, q: str) -> None:
    def text(n: int, quoted: str) -> str:
        return f"ConnectionError: Error 111 connecting to {host}:{port}. job {n} payload '{quoted}' after {n}ms"

    assert cause_key(text(a, q)) == cause_key(text(b, "x"))
    assert cause_of(text(a, q)).dependency == f"{host}:{port}"


@given(h1=hosts, h2=hosts, port=ports)
def test_two_hosts_never_share_a_cause(h1: str, h2: str, port: int) -> None:
    def text(h: str) -> str:
        return f"Error: connect ECONNREFUSED {h}:{port}"

    assert (cause_key(text(h1)) == cause_key(text(h2))) == (h1 == h2)


@given(st.text(max_size=3000))
def test_any_text_gives_a_bounded_cause(text: str) -> None:
    cause = cause_of(text)
    assert len(cause.key) == 16
    assert len(cause.template) <= 500 and len(cause.dependency) <= 260
    assert len(cause.label) <= 400
