"""The email sink against a real local SMTP server (aiosmtpd) with STARTTLS and AUTH."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from bridge.core.errors import SinkPermanent, SinkRetryable
from bridge.core.models import Notification
from bridge.sinks.email import EmailSink, EmailSinkSettings, as_text
from tests.sinks.runtime_contract import RuntimeContract
from tests.sinks.test_sink_contract import SinkContract
from tests.support.receiver import make_alert
from tests.support.smtp_server import Mailbox, smtp_server


@pytest.fixture
def box(tmp_path: Path) -> Any:
    with smtp_server(tmp_path) as mailbox:
        yield mailbox


def sink_for(box: Mailbox, **overrides: Any) -> EmailSink:
    config = {
        "name": "oncall-mail", "type": "email", "host": "127.0.0.1", "port": box.port, "security": "starttls",
        "ca_file": str(box.ca_file), "username": box.user, "password": box.password,
        "from_address": "dlq-bridge <dlq@example.com>", "to": ["oncall@example.com", "audit@example.com"],
    } | overrides
    return EmailSink(EmailSinkSettings.model_validate(config), timeout_s=5.0)


def group_of(count: int) -> Notification:
    first = make_alert(job_id="job-1", fingerprint="f00d")
    return Notification(
        sink="oncall-mail", group_key="fp:f00d", kind="digest", sequence=2, count=count, new_count=count - 1,
        previous_at=1_764_500_000.0, first_seen=1_764_499_990.0, last_seen=1_764_500_060.0,
        queues=["orders", "billing"], queue_counts={"orders": count - 2, "billing": 2},
        sample_job_ids=[], severity=first.severity, first=first, opened_at=1_764_499_990.0,
    )


async def test_a_mail_arrives_over_starttls_with_auth_and_both_parts(box: Mailbox) -> None:
    await sink_for(box).send(make_alert(queue="orders", job_id="job-7", runbook_url="https://runbooks.example/t"))
    [mail] = box.messages
    assert box.logins and box.envelopes == [("dlq@example.com", ["oncall@example.com", "audit@example.com"])]
    assert mail["Subject"] == "[ERROR] ship_order failed on orders · queue orders · job ship_order (job-7)"
    assert mail["From"] == "dlq-bridge <dlq@example.com>"
    text = mail.get_body(("plain",)).get_content()
    html = mail.get_body(("html",)).get_content()
    for facts in (text, html):
        for fact in ("orders", "job-7", "The warehouse API timed out.", "Redrive the job", "TimeoutError"):
            assert fact in facts, fact
    assert '<a href="https://runbooks.example/t">timeouts</a>' in html
    assert "Attempts: 3" in text and "Summary: static fallback (no gateway configured)" in text


async def test_message_id_comes_from_the_idempotency_key_so_a_resend_is_recognisable(box: Mailbox) -> None:
    sink = sink_for(box)
    box.replies = ["451 4.3.0 try again later"]
    alert = make_alert(job_id="job-1")
    with pytest.raises(SinkRetryable) as caught:
        await sink.send(alert)
    assert caught.value.detail == "SMTP 451: 4.3.0 try again later"
    await sink.send(alert)
    await sink.send(make_alert(job_id="job-2"))
    first, other = box.messages
    assert first["Message-ID"].endswith(".dlq-bridge@example.com>")
    assert sink.render(alert)["headers"]["Message-ID"] == first["Message-ID"]  # the same on every attempt
    assert other["Message-ID"] != first["Message-ID"]


async def test_a_5xx_reply_is_permanent(box: Mailbox) -> None:
    box.replies = ["554 5.7.1 message rejected as spam"]
    with pytest.raises(SinkPermanent) as caught:
        await sink_for(box).send(make_alert())
    assert caught.value.detail.startswith("SMTP 554")
    assert box.messages == []


async def test_a_wrong_password_is_permanent_and_no_password_shows_in_errors_or_logs(
    box: Mailbox, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "not-the-right-pass-9876"
    with pytest.raises(SinkPermanent) as caught:
        await sink_for(box, password=wrong).send(make_alert())
    assert caught.value.detail.startswith("SMTP 535")
    shown = str(caught.value) + caught.value.detail + caplog.text + repr(caught.value)
    assert wrong not in shown and box.password not in shown
    assert box.messages == []


async def test_untrusted_text_cannot_add_markup_or_headers(box: Mailbox) -> None:
    hostile = make_alert(
        queue="orders", job_id="job-<b>1</b>",
        last_error='<script>alert(1)</script> <a href="https://evil.example">click</a>',
        job_name="ship\r\nBcc: everyone@example.com",
    )
    await sink_for(box).send(hostile)
    [mail] = box.messages
    html = mail.get_body(("html",)).get_content()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert 'href="https://evil.example"' not in html and "job-&lt;b&gt;1&lt;/b&gt;" in html
    assert mail["Bcc"] is None and "\n" not in mail["Subject"]
    assert box.envelopes[0][1] == ["oncall@example.com", "audit@example.com"]


async def test_a_digest_is_one_mail_per_group(box: Mailbox) -> None:
    sink = sink_for(box)
    await sink.send_group(group_of(40))
    [mail] = box.messages
    assert mail["Subject"] == (
        "[ERROR] 40 jobs: ship_order failed on orders · queues orders ×38 · billing ×2 · Digest #2"
    )
    text = mail.get_body(("plain",)).get_content()
    assert "39 more since" in text and "40 in all" in text
    assert mail["References"].endswith(".group.dlq-bridge@example.com>")


async def test_implicit_tls_to_a_starttls_port_fails_retryably_rather_than_in_clear(box: Mailbox) -> None:
    with pytest.raises(SinkRetryable):
        await sink_for(box, security="tls").send(make_alert())
    assert box.messages == []


async def test_a_relay_without_starttls_is_refused_at_once_never_sent_in_clear(tmp_path: Path) -> None:
    with smtp_server(tmp_path, starttls=False) as plain:
        with pytest.raises(SinkPermanent) as caught:
            await sink_for(plain).send(make_alert())
        assert "STARTTLS" in caught.value.detail and plain.messages == []
        assert plain.password not in caught.value.detail


def test_a_dry_run_shows_the_subject_and_the_plain_text(box: Mailbox) -> None:
    shown = as_text(sink_for(box).render(make_alert(job_id="job-3")))
    assert shown is not None and shown.startswith("Subject: [ERROR] ship_order failed on orders")
    assert "Next steps:" in shown and "job-3" in shown and "<html" not in shown


async def test_probe_logs_in_and_sends_nothing(box: Mailbox) -> None:
    banner = await sink_for(box).probe()
    assert banner and box.logins and box.messages == []


class TestEmailContract(SinkContract):
    """The unit half (no HTTP receiver): sending is what the aiosmtpd tests above check."""

    type = "email"

    def table(self, base_url: str) -> dict[str, Any]:
        return {"host": "127.0.0.1", "from_address": "dlq@example.com", "to": ["oncall@example.com"]}


class MailPeer:
    """The real aiosmtpd server; a scripted DATA reply makes it refuse."""

    scripted_failures = True

    def __init__(self, box: Mailbox) -> None:
        self.box = box
        self.secrets = [box.password]

    def table(self, **extra: Any) -> dict[str, Any]:
        return {"name": "oncall-mail", "type": "email", "host": "127.0.0.1", "port": self.box.port,
                "ca_file": str(self.box.ca_file), "username": self.box.user, "password": self.box.password,
                "from_address": "dlq@example.com", "to": ["oncall@example.com"], **extra}

    async def received(self) -> list[str]:
        return [str(m["Subject"]) + m.get_body(("plain",)).get_content() for m in self.box.messages]

    def fail_next(self, failure: str) -> None:
        self.box.replies.append("451 4.3.0 try later" if failure == "retryable" else "554 5.7.1 refused")


class TestEmailRuntimeContract(RuntimeContract):
    type_name = "email"

    @pytest.fixture
    def peer(self, box: Mailbox) -> MailPeer:
        return MailPeer(box)
