"""Signatures as a receiver checks them: the official standardwebhooks package and plain HMAC."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from bridge.signing import SignatureError, message_id, sign_headers, verify

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


def test_verify_falls_back_to_x_signature_and_needs_some_signature() -> None:
    headers = {"X-Signature": sign_headers(["s3cret"], "m", BODY)["X-Signature"]}
    assert verify(BODY, headers, "s3cret")["job_id"] == "j1"
    with pytest.raises(SignatureError):
        verify(BODY, headers, "other")
    with pytest.raises(SignatureError, match="no signature"):
        verify(BODY, {}, "s3cret")


def test_message_id_is_stable_per_key_and_digest() -> None:
    assert message_id("orders:j1", "abc") == message_id("orders:j1", "abc")
    assert message_id("orders:j1", "abc") != message_id("orders:j1", "abd")
    assert message_id("orders:j1", "abc").startswith("msg_")
