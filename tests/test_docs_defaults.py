"""Docs that cannot drift (issue 34): every default the docs state in prose is read back from the
settings models here, so a changed default (or a false sentence) fails a test. The configuration
reference itself is generated (tests/test_ops_config_reference.py); these are the sentences around it.

Each claim is a file, a pattern whose group is the stated value, and where the real default lives. A
claim whose sentence was reworded fails too (the pattern no longer matches): update the claim with it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bridge.cli import build_parser
from bridge.settings import Settings
from bridge.sinks.sink_registry import SINKS
from bridge.sources.kind_registry import KINDS
from bridge.summarize.runbooks import RunbookCatalog

ROOT = Path(__file__).resolve().parents[1]
DISPLAY = {"pagerduty": "PagerDuty", "slack": "Slack", "teams": "Teams", "email": "email", "webhook": "webhook",
           "alertmanager": "Alertmanager", "console": "console"}


def sink_default(sink_type: str, field: str) -> Any:
    plugin = next(p for p in SINKS if p.type == sink_type)
    return plugin.settings.model_fields[field].default


def kind_default(kind: str, field: str) -> Any:
    plugin = next(p for p in KINDS if p.kind == kind)
    return plugin.settings.model_fields[field].default


def setting(path: str) -> Any:
    value: Any = Settings()
    for part in path.split("."):
        value = getattr(value, part)
    return value


def cli_default(*argv: str) -> Callable[[str], Any]:
    return lambda dest: getattr(build_parser().parse_args(list(argv)), dest)


@dataclass(frozen=True)
class Claim:
    doc: str
    pattern: str
    actual: Callable[[], Any]

    def __str__(self) -> str:
        return f"{self.doc}: {self.pattern}"


def same(stated: str, actual: Any) -> bool:
    if isinstance(actual, bool):
        return stated.lower() == str(actual).lower()
    if isinstance(actual, int | float):
        return float(stated.replace(",", "")) == float(actual)
    return stated == str(getattr(actual, "value", actual))


CLAIMS = [
    Claim("docs/operations.md", r"`server\.grace_s` \(default (\d+) s\)", lambda: setting("server.grace_s")),
    Claim("docs/operations.md", r"`--timeout\s+SECONDS` per probe \(default (\d+)\)",
          lambda: cli_default("check")("timeout")),
    Claim("docs/operations.md", r"`--limit N` \(default (\d+)\)", lambda: cli_default("peek")("limit")),
    Claim("docs/operations.md", r"ok\s+(\d+) failure runbooks", lambda: len(RunbookCatalog.load().ids())),
    Claim("docs/webhooks.md", r"`delivery\.max_retry_after_s`, default (\d+) s",
          lambda: setting("delivery.max_retry_after_s")),
    Claim("docs/design.md", r"`SCAN … TYPE list MATCH <sources\.match>` \(default `([^`]+)`\)",
          lambda: setting("sources.match")),
    Claim("docs/design.md", r"its `min_severity` \(default `(\w+)`\)", lambda: sink_default("slack", "min_severity")),
    Claim("docs/design.md", r"`POST <events_url>` \(default `([^`]+)`\)",
          lambda: sink_default("pagerduty", "events_url")),
    Claim("docs/design.md", r"`default` otherwise, `(\w+)` by default\)", lambda: setting("severity.default")),
    Claim("docs/design.md", r"`token_env` \(default `(\w+)`", lambda: setting("console.token_env")),
    Claim("docs/sources.md", r"`resolve_on_retry` \(default `(\w+)`", lambda: sink_default("pagerduty",
                                                                                        "resolve_on_retry")),
    Claim("docs/sources.md", r"\(`leave_check_s`, default (\d+) s\)", lambda: kind_default("sidekiq", "leave_check_s")),
    Claim("docs/sources.md", r'grouped pagerduty sink \(`group_by = "(\w+)"`, the default',
          lambda: sink_default("pagerduty", "group_by")),
    Claim("docs/sinks.md", r'# group_by = "(\w+)"\s+# one card per cause, then digests \(the default\)',
          lambda: sink_default("teams", "group_by")),
    Claim("docs/sinks.md", r'One mail per alert, one per digest of a group \(`group_by = "(\w+)"` by default\)',
          lambda: sink_default("email", "group_by")),
    Claim("docs/sinks.md", r'# group_by = "(\w+)"\s+# the default: let Alertmanager group',
          lambda: sink_default("alertmanager", "group_by")),
    Claim("docs/sinks.md", r'format = "cloudevents"\s+# default "(\w+)"', lambda: sink_default("webhook", "format")),
    Claim("docs/sinks.md", r'# cloudevents_mode = "binary"\s+# default "(\w+)"',
          lambda: sink_default("webhook", "cloudevents_mode")),
    Claim("README.md", r'anonymous = "none"\s+# default "(\w+)"', lambda: setting("console.auth.anonymous")),
    Claim("README.md", r"\| `group_wait_s` \| `(\d+)` \|", lambda: sink_default("slack", "group_wait_s")),
    Claim("README.md", r"\| `group_interval_s` \| `(\d+)` \|", lambda: sink_default("slack", "group_interval_s")),
    Claim("README.md", r"\| `repeat_interval_s` \| `(\d+)` \(4 h\) \|",
          lambda: sink_default("slack", "repeat_interval_s")),
]


@pytest.mark.parametrize("claim", CLAIMS, ids=str)
def test_a_default_stated_in_prose_is_the_settings_default(claim: Claim) -> None:
    text = (ROOT / claim.doc).read_text(encoding="utf-8")
    found = re.findall(claim.pattern, text)
    assert found, f"the sentence is gone or reworded: update the claim ({claim})"
    actual = claim.actual()
    assert all(same(value, actual) for value in found), f"{claim.doc} says {found}, the default is {actual!r}"


def stated_group_by(text: str) -> dict[str, str]:
    """Sink type → the group_by a sentence of the form `"<value>"` for <types> … / `<value>` (…; the default
    for <types>) states."""
    found: dict[str, str] = {}
    pairs = re.findall(r'`"?(cause|fingerprint|queue|none)"?`[^`|]*?(?:the default )?for ([A-Za-z ,—-]+?)(?=[;)|`]|$)',
                       text, flags=re.MULTILINE)
    for value, types in pairs:
        for word in re.findall(r"[A-Za-z]+", types):
            for sink_type, shown in DISPLAY.items():
                if word.lower() in (sink_type, shown.lower()):
                    found[sink_type] = value
    return found


@pytest.mark.parametrize("doc, where", [
    ("README.md", '| `group_by` | `"'),  # the grouping table, not the reference's rows
    ("docs/design.md", "**Grouping.** Per sink, `group_by` is"),
])
def test_every_sink_types_group_by_default_is_stated_truly(doc: str, where: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    start = text.index(where)
    paragraph = text[start:text.index("\n\n", start) if "\n\n" in text[start:] else len(text)]
    stated = stated_group_by(paragraph.replace("\n", " "))
    actual = {p.type: p.settings.model_fields["group_by"].default for p in SINKS}
    assert stated == actual, f"{doc} states {stated}; the settings say {actual}"


def test_operations_says_which_sinks_group_by_what_by_default() -> None:
    text = (ROOT / "docs/operations.md").read_text(encoding="utf-8").replace("\n", " ")
    sentence = re.search(r"\(by default PagerDuty groups by (\w+); ([\w, ]+) by (\w+); ([\w, ]+) send one "
                         r"notification per job\)", text)
    assert sentence, "the grouping sentence of `peek --groups` is gone or reworded"
    pd, by_fp, fp, per_job = sentence.groups()
    assert sink_default("pagerduty", "group_by") == pd
    for word in re.findall(r"\w+", by_fp.replace(" and ", " ")):
        assert sink_default(word.lower(), "group_by") == fp, word
    for word in re.findall(r"\w+", per_job.replace(" and ", " ").replace("the ", "")):
        assert sink_default(word.lower(), "group_by") == "none", word


def test_operations_describes_checks_gateway_probe_as_it_is_sent() -> None:
    """`check` proves the token with `GET /v1/models` (bridge.commands.gateway_probe), not the root."""
    from bridge.summarize.openclaw import MODELS_PATH

    text = (ROOT / "docs/operations.md").read_text(encoding="utf-8")
    section = text[text.index("### `dlq-bridge check`"):text.index("### `dlq-bridge peek")]
    assert f"`GET {MODELS_PATH}`" in section and "with its token" in section
    assert "gateway's root" not in section


def test_operations_idle_memory_is_the_benchmarks_figure() -> None:
    ops = (ROOT / "docs/operations.md").read_text(encoding="utf-8").replace("\n", " ")
    bench = (ROOT / "docs/benchmarks.md").read_text(encoding="utf-8")
    stated = re.search(r"Idle, a bridge uses about (\d+) MB resident at start and (\d+) MB after a drain", ops)
    measured = re.search(r"\| main \(0\.2\.0\) \|[^|]*\|[^|]*\| \*\*([\d.]+) MB\*\* \| \*\*([\d.]+) MB\*\* \|", bench)
    assert stated and measured, "the sentence or the benchmarks row is gone or reworded"
    assert [int(v) for v in stated.groups()] == [round(float(v)) for v in measured.groups()]
