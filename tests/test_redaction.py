from __future__ import annotations

import json

import pytest

from bridge.intake.chain import normalize
from bridge.intake.redact import REDACTED, is_sensitive_key, redact_text

SECRETS = [
    "hunter2-very-secret",
    "AKIAIOSFODNN7EXAMPLE",
    "sk_live_51Habcdefghijklmnop",
    "xoxb-123456789012-abcdefghijkl",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "s3cr3tpw",
    "4111 1111 1111 1111",
]


@pytest.mark.parametrize(
    "name",
    [
        "password",
        "apiKey",
        "API-KEY",
        "api_key",
        "creditCard",
        "Authorization",
        "x-auth-token",
        "SESSION_ID",
        "client_secret",
        "Cookie",
    ],
)
def test_sensitive_key_names_whatever_the_case_or_separator(name: str) -> None:
    assert is_sensitive_key(name)


@pytest.mark.parametrize("name", ["queue", "job_id", "attempts", "keyboard", "monkey"])
def test_ordinary_key_names_are_kept(name: str) -> None:
    assert not is_sensitive_key(name)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("login failed password=hunter2-very-secret for bob", "hunter2-very-secret"),
        ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz"),
        ("key AKIAIOSFODNN7EXAMPLE rejected", "AKIAIOSFODNN7EXAMPLE"),
        ("GET https://bob:s3cr3tpw@db.example/x failed", "s3cr3tpw"),
        ('{"api-key": "abc123456"}', "abc123456"),
        ("https://hooks.slack.com/services/T000/B000/XXXXXXXX failed", "XXXXXXXX"),
        ("card 4111 1111 1111 1111 declined", "4111 1111 1111 1111"),
        ("apiKey: 'quoted value here'", "quoted value here"),
        # the value names its own scheme (found by test_hostile_input's fuzzing: the token leaked)
        ("token: Bearer abcdefghijkl1234 rejected", "abcdefghijkl1234"),
        ("Bearer = Bearer Zq7Xv9Kp2Lm4Nw8Rt6Yb3 passwordBearer =password", "Zq7Xv9Kp2Lm4Nw8Rt6Yb3"),
        ("auth token=Basic dXNlcjpwYXNzd29yZA== refused", "dXNlcjpwYXNzd29yZA=="),
        ("passworda-a-a-a-=>Bearer Bearer Zq7Xv9Kp2Lm4Nw8Rt6Yb3  passworda-a-a-a-=>Bearer ", "Zq7Xv9Kp2Lm4Nw8Rt6Yb3"),
    ],
)
def test_secrets_inside_free_text_are_redacted(text: str, secret: str) -> None:
    out = redact_text(text)
    assert secret not in out
    assert REDACTED in out


def test_no_planted_secret_survives_normalization() -> None:
    payload = {
        "job_id": "j1",
        "last_error": "401 from https://admin:s3cr3tpw@api.example token=hunter2-very-secret AKIAIOSFODNN7EXAMPLE",
        "params": {
            "password": "hunter2-very-secret",
            "nested": [{"creditCard": "4111 1111 1111 1111"}, {"note": "use sk_live_51Habcdefghijklmnop"}],
            "headers": {"Authorization": "Bearer xoxb-123456789012-abcdefghijkl"},
            "jwt": SECRETS[4],
        },
    }
    dl = normalize(json.dumps(payload).encode(), "dead_letter:q")
    dumped = dl.model_dump_json()
    for secret in SECRETS:
        assert secret not in dumped, secret
    assert "job_id" not in dumped or dl.job_id == "j1"
