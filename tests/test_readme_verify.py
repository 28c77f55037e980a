"""Issue 10, defect 9: the README's verify() snippet catches what verify() raises.

Every malformed input, a malformed secret included, raises SignatureError (issue 9, item 9),
so a snippet that catches SignatureError is complete.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bridge.sinks.signing import SignatureError, verify

ROOT = Path(__file__).resolve().parents[1]
HEADERS = {"webhook-id": "msg_1", "webhook-timestamp": "1", "webhook-signature": "v1,AAAA"}


def test_a_bad_request_and_a_malformed_secret_are_both_signature_error() -> None:
    with pytest.raises(SignatureError):
        verify(b"{}", HEADERS, "whsec_not base64!", now=1)
    with pytest.raises(SignatureError):
        verify(b"{}", HEADERS, "whsec_" + "A" * 32, now=1)


@pytest.mark.parametrize("doc", ["README.md", "docs/webhooks.md"])
def test_the_verify_snippet_names_both(doc: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    snippet = text.split("from bridge.sinks.signing import SignatureError, verify", 1)[1].split("```", 1)[0]
    assert "except SignatureError" in snippet
    assert "except ValueError" not in snippet
