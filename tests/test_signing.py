"""Signatures as a receiver checks them: the official standardwebhooks package and plain HMAC."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks import Webhook, WebhookVerificationError

from bridge.sinks.signing import SignatureError, message_id, sign_headers, verify

WHSEC = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
BODY = b'{"type":"dlq.alert","queue":"orders","job_id":"j1"}'


def test_official_library_verifies_a_whsec_signature() -> None:
    headers = sign_headers([WHSEC], "msg_1", BODY)
    assert Webhook(WHSEC).verify(BODY, headers) == {"type": "dlq.alert", "queue": "orders", "job_id": "j1"}


def test_official_library_rejects_a_tampered_body() -> None:
    headers = sign_headers([WHSEC], "msg_1", BODY)
    with pytest.raises(WebhookVerificationError):
        Webhook(WHSEC).verify(BODY.replace(b"j1", b"j2"), headers)


def test_plain_secret_is_used_as_its_bytes_by_both_schemes() -> None:
    headers = sign_headers(["plain-secret"], "msg_1", BODY)
    assert Webhook(b"plain-secret").verify(BODY, headers)["job_id"] == "j1"
    expected = "sha256=" + hmac.new(b"plain-secret", BODY, hashlib.sha256).hexdigest()
    assert headers["X-Signature"] == expected


def test_x_signature_of_a_whsec_secret_uses_the_secret_string_as_written() -> None:
    headers = sign_headers([WHSEC], "msg_1", BODY)
    assert headers["X-Signature"] == "sha256=" + hmac.new(WHSEC.encode(), BODY, hashlib.sha256).hexdigest()


def test_rotation_sends_one_signature_per_secret_and_either_verifies() -> None:
    new = "whsec_" + base64.b64encode(b"another-key-another-key-another!").decode()
    headers = sign_headers([WHSEC, new], "msg_1", BODY)
    assert len(headers["webhook-signature"].split()) == 2
    assert len(headers["X-Signature"].split()) == 2
    assert Webhook(WHSEC).verify(BODY, headers)
    assert Webhook(new).verify(BODY, headers)
    assert verify(BODY, headers, new)["queue"] == "orders"


def test_verify_helper_accepts_good_and_rejects_bad() -> None:
    headers = sign_headers([WHSEC], "msg_1", BODY)
    assert verify(BODY, headers, [WHSEC])["job_id"] == "j1"
    with pytest.raises(SignatureError):
        verify(BODY + b" ", headers, WHSEC)
    with pytest.raises(SignatureError):
        verify(BODY, headers, "whsec_" + base64.b64encode(b"wrong-key-wrong-key!").decode())


def test_verify_rejects_a_replayed_old_message() -> None:
    headers = sign_headers([WHSEC], "msg_1", BODY, timestamp=int(time.time()) - 3600)
    with pytest.raises(SignatureError, match="tolerance"):
        verify(BODY, headers, WHSEC)
    with pytest.raises(WebhookVerificationError):
        Webhook(WHSEC).verify(BODY, headers)


def test_verify_takes_x_signature_only_when_asked_and_needs_some_signature() -> None:
    headers = {"X-Signature": sign_headers(["s3cret"], "m", BODY)["X-Signature"]}
    with pytest.raises(SignatureError, match="allow_x_signature"):
        verify(BODY, headers, "s3cret")  # timestamp-less: replayable, so not by default
    assert verify(BODY, headers, "s3cret", allow_x_signature=True)["job_id"] == "j1"
    with pytest.raises(SignatureError):
        verify(BODY, headers, "other", allow_x_signature=True)
    with pytest.raises(SignatureError, match="no signature"):
        verify(BODY, {}, "s3cret")


def test_message_id_is_stable_per_key_and_digest() -> None:
    assert message_id("orders:j1", "abc") == message_id("orders:j1", "abc")
    assert message_id("orders:j1", "abc") != message_id("orders:j1", "abd")
    assert message_id("orders:j1", "abc").startswith("msg_")


def test_a_failing_standard_signature_never_falls_back_to_x_signature() -> None:
    headers = sign_headers(["s3cret"], "msg_1", BODY)
    headers["webhook-signature"] = "v1," + base64.b64encode(b"x" * 32).decode()  # forged
    assert verify(BODY, {"X-Signature": headers["X-Signature"]}, "s3cret", allow_x_signature=True)
    with pytest.raises(SignatureError, match="webhook-signature"):
        verify(BODY, headers, "s3cret", allow_x_signature=True)


@pytest.mark.parametrize("secret", ["", " ", "\t\n", [], ["ok-secret", "  "], "whsec_", "whsec_!!!"])
def test_empty_blank_or_broken_secrets_are_refused(secret: Any) -> None:
    headers = sign_headers(["ok-secret"], "msg_1", BODY)
    with pytest.raises(SignatureError):
        verify(BODY, headers, secret)


_header_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=80) | st.text(max_size=80)


@settings(max_examples=400, deadline=None)
@given(
    body=st.binary(max_size=300) | st.just(BODY) | st.just(b"[" * 5000),
    headers=st.dictionaries(
        st.sampled_from(["webhook-id", "webhook-timestamp", "webhook-signature", "X-Signature", "other"]),
        _header_text | st.sampled_from(["1", str(int(time.time())), "v1,AAAA", "sha256=00", "9" * 5000]),
        max_size=5,
    ),
    secret=st.text(max_size=30) | st.sampled_from(["whsec_", "whsec_%%", WHSEC, "s3cret"]),
    allow=st.booleans(),
    now=st.floats(allow_nan=True, allow_infinity=True) | st.none(),
)
def test_every_malformed_input_raises_signature_error_only(
    body: bytes, headers: dict[str, str], secret: str, allow: bool, now: float | None
) -> None:
    with pytest.raises(SignatureError):  # never another exception, and no forged input passes
        verify(body, headers, secret, allow_x_signature=allow, now=now)
