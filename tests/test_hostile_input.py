"""Untrusted text, attacked stage by stage: redaction, ids, routing fields, model output, leaks (issue 9).

The secret corpus is generated from the formats public secret scanners
document (gitleaks rules: prefix + alphabet + length per provider), not from
our own regexes. No test here measures time: bench/bench_hostile.py does.
"""

from __future__ import annotations

import io
import json
import logging
import random
import string
import unicodedata
from collections.abc import Callable

import httpx
import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.core.errors import SinkPermanent
from bridge.core.names import queue_of
from bridge.core.untrusted import SafeFormatter, escape_controls, is_invisible, strip_invisible
from bridge.intake import secret_patterns
from bridge.intake.chain import normalize
from bridge.intake.redact import CUT_MARK, MAX_MATCHES, REDACTED, is_sensitive_key, redact_id, redact_text
from bridge.sinks.http_errors import check_response
from bridge.summarize.reply import URL_REMOVED
from bridge.summarize.salvage import salvage_reply

ALNUM = string.ascii_letters + string.digits
UPPER_NUM = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "_-"


def rand(alphabet: str, n: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


# Formats as gitleaks' rules define them (cmd/generate/config/rules/*.go).
FORMATS: dict[str, Callable[[int], str]] = {
    "aws-access-key": lambda s: "AKIA" + rand("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16, s),
    "github-pat": lambda s: "ghp_" + rand(ALNUM, 36, s),
    "github-fine-grained-pat": lambda s: "github_pat_" + rand(ALNUM + "_", 82, s),
    "github-app-token": lambda s: "ghs_" + rand(ALNUM, 36, s),
    "gitlab-pat": lambda s: "glpat-" + rand(URLSAFE, 20, s),
    "slack-bot-token": lambda s: f"xoxb-{rand(string.digits, 12, s)}-{rand(string.digits, 12, s)}-"
    + rand(ALNUM, 24, s),
    "slack-config-refresh-token": lambda s: "xoxe-1-" + rand(UPPER_NUM, 146, s),
    "slack-config-access-token": lambda s: "xoxe.xoxp-1-" + rand(UPPER_NUM, 163, s),
    "slack-webhook-url": lambda s: f"https://hooks.slack.com/services/T{rand(UPPER_NUM, 8, s)}/"
    f"B{rand(UPPER_NUM, 8, s)}/{rand(ALNUM, 24, s)}",
    "gcp-api-key": lambda s: "AIza" + rand(URLSAFE, 35, s),
    "openai-project-key": lambda s: "sk-proj-" + rand(URLSAFE, 74, s) + "T3BlbkFJ" + rand(URLSAFE, 74, s),
    "anthropic-api-key": lambda s: "sk-ant-api03-" + rand(URLSAFE, 93, s) + "AA",
    "stripe-secret-key": lambda s: "sk_live_" + rand(ALNUM, 99, s),
    "sendgrid-api-token": lambda s: f"SG.{rand(URLSAFE, 22, s)}.{rand(URLSAFE, 43, s)}",
    "npm-access-token": lambda s: "npm_" + rand(string.ascii_lowercase + string.digits, 36, s),
    "shopify-access-token": lambda s: "shpat_" + rand(HEX, 32, s),
    "pypi-upload-token": lambda s: "pypi-AgEIcHlwaS5vcmc" + rand(URLSAFE, 60, s),
    "digitalocean-pat": lambda s: "dop_v1_" + rand(HEX, 64, s),
    "jwt": lambda s: f"eyJhbGciOiJIUzI1NiJ9.eyJ{rand(URLSAFE, 40, s)}.{rand(URLSAFE, 43, s)}",
    "private-key": lambda s: "-----BEGIN RSA PRIVATE KEY-----\n" + rand(B64, 64, s) + "\n-----END RSA PRIVATE KEY-----",
    "pgp-private-key": lambda s: "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n"
    + rand(B64, 64, s) + "\n-----END PGP PRIVATE KEY BLOCK-----",
    "openssh-private-key": lambda s: "-----BEGIN OPENSSH PRIVATE KEY-----\n" + rand(B64, 70, s)
    + "\n-----END OPENSSH PRIVATE KEY-----",
}
# The part of each sample that must not survive (a URL's token, a key block's body).
CORE: dict[str, Callable[[str], str]] = {
    "slack-webhook-url": lambda v: v.rsplit("/", 1)[1],
    "private-key": lambda v: v.split("\n")[1],
    "pgp-private-key": lambda v: v.split("\n")[2],
    "openssh-private-key": lambda v: v.split("\n")[1],
}
SPELLINGS = (
    "{}",
    "error calling API with {} (401)",
    '{{"detail": "bad key {}"}}',
    "Traceback (most recent call last):\n  token {}\nValueError: rejected",
)


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_real_secret_formats_are_redacted_in_free_text(name: str, spelling: str) -> None:
    for seed in range(3):
        value = FORMATS[name](seed)
        core = CORE.get(name, lambda v: v)(value)
        out = redact_text(spelling.format(value))
        assert core not in out, (name, out)
        assert REDACTED in out


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("{'password': 'hunter2xyz'}", "hunter2xyz"),  # Python repr
        (":password=>\"hunter2xyz\"", "hunter2xyz"),  # Ruby hash
        ("{:password => 'hunter2xyz'}", "hunter2xyz"),
        ("<password>hunter2xyz</password>", "hunter2xyz"),  # XML
        ("<db_pass type=\"s\">hunter2xyz</db_pass>", "hunter2xyz"),
        ("Server=db;Uid=sa;Pwd=hunter2xyz;", "hunter2xyz"),
        ("pass: hunter2xyz", "hunter2xyz"),
        ("Authorization: Bearer:hunter2xyz", "hunter2xyz"),
        ("postgres://app:p@ss/w0rd@db.internal:5432/app failed", "p@ss/w0rd"),
        ("redis://:s3cr/t@cache:6379/0", "s3cr/t"),
        ("https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sr=b&sig=kF3%2Bq9ZbX%2F1&se=2030", "kF3%2Bq9ZbX"),
        ('msg {\\"password\\": \\"hunter2xyz\\"} end', "hunter2xyz"),  # JSON inside a JSON string
        ("pass\u200bword=hunter2xyz", "hunter2xyz"),  # zero-width inside the key
        ("token=hunter2\u00adxyz", "hunter2xyz"),  # soft hyphen inside the value
        ("AKIA\u200bIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
        ("sig= 'token': 'hunter2xyz'", "hunter2xyz"),  # a key inside the previous value (found by hypothesis)
        ("password=\"a token: hunter2xyz\"", "hunter2xyz"),
        ("paſsword=hunter2xyz", "hunter2xyz"),  # long s: RE2's (?i) folds it, so must the needles
        ("card 4111 1111 1111 1111 declined", "4111 1111 1111 1111"),
        ("card 5500-0000-0000-0004", "5500-0000-0000-0004"),
    ],
)
def test_redaction_gaps_are_closed(text: str, secret: str) -> None:
    out = redact_text(text)
    assert secret not in out, out
    assert secret.replace("\u00ad", "") not in out


@pytest.mark.parametrize(
    "name",
    ["db_pass", "pwd", "auth", "X-Auth", "credential", "signing_key", "encryption_key", "master_key",
     "private", "sas", "pin", "otp", "dbPassword", "AccountKey", "sig", "client_secret", "PIN_code"],
)
def test_nested_sensitive_key_names(name: str) -> None:
    assert is_sensitive_key(name)
    raw = json.dumps({"job_id": "1", "params": {"outer": {name: "hunter2xyz"}}}).encode()
    assert "hunter2xyz" not in normalize(raw, "dead_letter:q").model_dump_json()


@pytest.mark.parametrize(
    "name", ["spinner", "author", "authority", "compass", "passenger", "pinned", "option", "keyboard", "queue"]
)
def test_whole_words_only_for_short_key_names(name: str) -> None:
    assert not is_sensitive_key(name)
    assert redact_text(f"{name}=value1") == f"{name}=value1"


def test_every_pattern_is_re2() -> None:
    compiled = [v for k, v in vars(secret_patterns).items() if k.isupper() and hasattr(v, "finditer")]
    assert len(compiled) >= 7
    assert all(isinstance(p, type(re2.compile("x"))) for p in compiled)


def test_card_rule_needs_luhn_and_leaves_ids_alone() -> None:
    assert redact_text("ts 1732960000123 snowflake 1234567890123456789") == (
        "ts 1732960000123 snowflake 1234567890123456789")
    assert redact_text("4111 1111 1111 1112") == "4111 1111 1111 1112"  # fails Luhn
    assert redact_id("4111111111111111") == "4111111111111111"  # an id is never a card number


def test_secret_looking_ids_keep_a_digest_and_stay_distinct() -> None:
    a, b = redact_id("token=abc12345"), redact_id("token=abd12345")
    assert a != b
    assert a.startswith("token=[REDACTED:") and len(a) == len("token=[REDACTED:12345678]")
    assert "abc12345" not in a


def test_cut_ids_keep_a_digest_and_stay_distinct() -> None:
    one = normalize(json.dumps({"job_id": "x" * 600 + "1"}).encode(), "dead_letter:q")
    two = normalize(json.dumps({"job_id": "x" * 600 + "2"}).encode(), "dead_letter:q")
    assert one.job_id != two.job_id and "sha256:" in one.job_id and len(one.job_id) < 600
    assert one.idempotency_key != two.idempotency_key


def test_ids_differing_only_by_invisible_characters_stay_distinct() -> None:
    plain = normalize(json.dumps({"job_id": "j1"}).encode(), "dead_letter:q")
    hidden = normalize(json.dumps({"job_id": "j1\u200b"}).encode(), "dead_letter:q")
    assert plain.job_id == "j1" and hidden.job_id.startswith("j1…[sha256:")


def test_key_names_are_capped_and_redacted() -> None:
    raw = json.dumps({"job_id": "1", "params": {"k" * 10_000: 1, f"token={'s' * 20}": 2}}).encode()
    dl = normalize(raw, "dead_letter:" + "q" * 4000 + ":password=hunter2xyz")
    dumped = dl.model_dump_json()
    assert "k" * 200 not in dumped and "s" * 20 not in dumped and "hunter2xyz" not in dumped
    assert len(dl.source_key) < 700 and "sha256:" in dl.source_key
    assert len(dl.queue) < 700


def test_route_queue_is_the_sources() -> None:
    assert queue_of("dead_letter:{carts}") == "carts"
    assert queue_of("dead_letter:{carts}:eu") == "{carts}:eu"
    raw = json.dumps({"job_id": "7", "queue": "payments"}).encode()
    dl = normalize(raw, "dead_letter:emails")
    assert (dl.queue, dl.reported_queue, dl.idempotency_key) == ("emails", "payments", "emails:7")


def test_the_same_failure_in_two_dlqs_has_two_fingerprints() -> None:
    raw = json.dumps({"job_id": "1", "job_name": "charge", "last_error": "TimeoutError: 30s"}).encode()
    assert normalize(raw, "dead_letter:a").fingerprint != normalize(raw, "dead_letter:b").fingerprint
    assert normalize(raw, "dead_letter:a").fingerprint == normalize(raw.replace(b'"1"', b'"2"'), "dead_letter:a"
                                                                    ).fingerprint


def test_rq_func_name_and_description_name_the_job() -> None:
    rq = json.dumps({"id": "r1", "func_name": "app.tasks.send_email"}).encode()
    assert normalize(rq, "dead_letter:q").job_name == "app.tasks.send_email"
    rq = json.dumps({"id": "r1", "description": "app.tasks.send_email(42, to='x@y')"}).encode()
    assert normalize(rq, "dead_letter:q").job_name == "app.tasks.send_email"


def test_a_carriage_return_cannot_overwrite_a_line() -> None:
    raw = json.dumps({"job_id": "1", "last_error": "line one\r\nreal error\rFAKE: all good"}).encode()
    assert normalize(raw, "dead_letter:q").last_error == "line one\nreal error\\x0dFAKE: all good"


def test_an_oversized_entry_is_not_parsed_whole_but_keeps_its_identity() -> None:
    raw = b'{"job_id": "big", "last_error": "' + b"e" * 3_000_000 + b'"}'
    dl = normalize(raw, "dead_letter:q", max_parse_bytes=1024 * 1024)
    assert dl.parse_error is not None and dl.parse_error.startswith("oversized dead letter")
    assert dl.job_id == "big"  # streamed: the error's head is cut from the bytes, the rest never read
    assert dl.last_error is not None and dl.last_error.startswith("eeee") and len(dl.last_error) < 8300
    assert dl.payload_excerpt is not None and len(dl.payload_excerpt) < 2200


def test_too_many_secrets_in_one_field_cut_the_field_not_the_redaction() -> None:
    text = " ".join(f"pw=hunter{i:04d}" for i in range(MAX_MATCHES * 3))
    out = redact_text(text)
    assert "hunter" not in out and out.endswith(CUT_MARK)


def test_invisible_table_covers_every_format_character() -> None:
    missing = [hex(cp) for cp in range(0x110000) if unicodedata.category(chr(cp)) == "Cf" and not is_invisible(chr(cp))]
    assert missing == []
    assert strip_invisible("a\u061cb\u2060c\ufeffd\u00ade\U000e0041f\u200dg") == "abcdefg"


# Fragments of the patterns' own structure, to build near-misses and repetitions.
FRAGMENTS = ["a-", "password", "-", "=", ":", "://", "a.", "@", "eyJ", ".", "\"", "\\", "'", "{", "}", "<password>",
             "</", "Bearer ", "AKIA", "1234 ", "\u200b", "=>", "\n", "sig=", "-----BEGIN ", "PRIVATE KEY-----", "x"]
PLANTED = "Zq7" + "Xv9Kp2Lm4Nw8Rt6Yb3"


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(st.sampled_from(FRAGMENTS), max_size=300),
    repeat=st.integers(min_value=1, max_value=40),
    spelling=st.sampled_from(["password={}", "'token': '{}'", "<secret>{}</secret>", "Bearer {}",
                              "https://u:{}@h/", "api_key: \"{}\"", "ghp_{}abcdefghijklmnopq"]),
    where=st.floats(min_value=0, max_value=1),
)
def test_adversarial_text_never_leaks_a_planted_secret_and_stays_bounded(
    parts: list[str], repeat: int, spelling: str, where: float
) -> None:
    noise = "".join(parts) * repeat
    cut = int(len(noise) * where)
    text = f"{noise[:cut]} {spelling.format(PLANTED)} {noise[cut:]}"
    out = redact_text(text)
    assert PLANTED not in out
    assert len(out) <= len(text) + 7 * MAX_MATCHES * len(REDACTED) + len(CUT_MARK)


@settings(max_examples=100, deadline=None)
@given(value=st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=50),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=20), children, max_size=5),
    max_leaves=40,
))
def test_any_payload_normalizes_to_a_bounded_envelope_without_the_planted_secret(value: object) -> None:
    raw = json.dumps({"job_id": "j", "params": {"api_key": PLANTED, "data": value}, "last_error": value}).encode()
    dl = normalize(raw, "dead_letter:q", excerpt_max=512)
    assert PLANTED not in dl.model_dump_json()
    assert dl.payload_excerpt is not None and len(dl.payload_excerpt) < 600


@pytest.mark.parametrize(
    "text",
    ["see https://evil.example/login", "mail mailto:ops@evil.example", "click javascript:alert(1)",
     "ｈｔｔｐｓ：／／evil.example/x", "go to evil.com now", "www.evil.org", "java\u200bscript:alert(1)",
     "h\u2060ttps://evil.example", "data:text/html;base64,PHNjcmlwdD4="],
)
def test_no_link_survives_in_model_output(text: str) -> None:
    reply = {"title": "t", "severity": "error", "likely_cause": f"It failed: {text}", "next_steps": [f"Not {text}"],
             "runbook_hint": ""}
    draft = salvage_reply(json.dumps(reply), set(), runbook_base="https://runbooks.acme.io/").draft
    for field in (draft.likely_cause, draft.next_steps[0]):
        assert URL_REMOVED in field
        assert not any(bad in field.lower() for bad in ("evil.", "javascript:", "mailto:", "data:", "://"))


def test_runbook_links_survive_and_invisible_characters_do_not() -> None:
    cause = "see https://runbooks.acme.io/timeouts#retry\u061c\u2060\ufeff\u00ad\U000e0041 or https://runbooks.acme.io.evil.com/"
    reply = {"title": "t", "severity": "error", "likely_cause": cause, "next_steps": ["x"], "runbook_hint": ""}
    draft = salvage_reply(json.dumps(reply), set(), runbook_base="https://runbooks.acme.io").draft
    assert draft.likely_cause == f"see https://runbooks.acme.io/timeouts#retry or {URL_REMOVED}"


@pytest.mark.parametrize(
    "echo",
    ["{url}", "{url_json}", "{url_pct}", "{url_pct_lower}", "{url_plus}", "invalid_token: {token}"],
)
def test_the_slack_url_is_scrubbed_from_error_snippets_in_every_encoding(echo: str) -> None:
    token = "xq8Jt2LmP0aZ4vB7nC1dE9fG"
    url = f"https://hooks.slack.com/services/T0AB12CD3/B0EF45GH6/{token}"
    from urllib.parse import quote, quote_plus

    forms = {"url": url, "url_json": url.replace("/", "\\/"), "url_pct": quote(url, safe=""),
             "url_pct_lower": quote(url, safe="").lower(), "url_plus": quote_plus(url), "token": token}
    body = "x" * 150 + " error for " + echo.format(**forms)
    response = httpx.Response(404, text=body, request=httpx.Request("POST", "https://hooks.slack.com/"))
    with pytest.raises(SinkPermanent) as caught:
        check_response("slack", response, "q:j", [url])
    message = str(caught.value)
    assert token not in message and token.lower() not in message


def test_log_lines_cannot_be_forged() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(SafeFormatter("%(levelname)s %(message)s"))
    log = logging.getLogger("test.hostile.forge")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.warning("entry %s failed", "j1\r\nINFO all clear\x1b[2J")
    finally:
        log.removeHandler(handler)
    assert stream.getvalue().count("\n") == 1
    assert "\r" not in stream.getvalue() and "\x1b" not in stream.getvalue()
    assert escape_controls("a\nb\u202ec") == "a\\x0ab\\u202ec"
