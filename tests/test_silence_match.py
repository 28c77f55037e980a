"""Silence matchers (bridge.core.silence_match): Alertmanager's operators, anchored RE2, amtool syntax."""

from __future__ import annotations

import fnmatch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.core.models import Severity
from bridge.core.silence_match import (
    VALUE_MAX,
    Matcher,
    MatcherError,
    MatcherSet,
    alert_labels,
    compiled,
    escape_glob,
    glob_to_regex,
    matches_all,
    parse_matcher,
    selects,
)
from tests.support.receiver import make_alert

LABELS = {
    "queue": "emails",
    "job_name": "send_receipt",
    "severity": "warning",
    "sink": "slack-ops",
    "cause": "3f2a9c0d",
    "source": "dead_letter:emails",
}


@pytest.mark.parametrize(
    ("text", "hit"),
    [
        ("queue=emails", True),
        ("queue=email", False),
        ("queue!=emails", False),
        ("queue!=reports", True),
        ('severity=~"warn.*"', True),
        ("severity=~warn", False),
        ('severity=~"pre.*"', False),
        ('severity!~"warn.*"', False),
        ('severity!~"crit.*"', True),
        ("job_name=~send_.*", True),
        ("sink=slack-ops", True),
        ("cause=3f2a9c0d", True),
        ("source=~dead_letter:.*", True),
        ('queue=~"e|x"', False),
        ('queue=~"emails|x"', True),
    ],
)
def test_each_operator_matches_as_alertmanager_does(text: str, hit: bool) -> None:
    assert parse_matcher(text).matches(LABELS) is hit


def test_a_regex_is_anchored_at_both_ends() -> None:
    warn = parse_matcher('severity=~"warn.*"')
    assert warn.matches({"severity": "warning"})
    assert not warn.matches({"severity": "prewarning"}), "anchored at the start"
    assert not parse_matcher("queue=~mail").matches({"queue": "emails"}), "anchored at the end"


def test_a_missing_label_is_the_empty_string() -> None:
    assert parse_matcher("job_name!=x").matches({})
    assert not parse_matcher("job_name=~.+").matches({"job_name": ""})


def test_amtool_syntax_and_its_errors() -> None:
    assert parse_matcher('job_name!="a \\"b\\""') == Matcher(name="job_name", op="!=", value='a "b"')
    assert parse_matcher(" queue = emails ") == Matcher(name="queue", op="=", value="emails")
    with pytest.raises(MatcherError, match="unknown label 'team'"):
        parse_matcher("team=x")
    with pytest.raises(MatcherError, match="not a matcher"):
        parse_matcher("queue")
    with pytest.raises(MatcherError, match="not a valid RE2 regex"):
        parse_matcher("queue=~(")
    with pytest.raises(MatcherError, match="not a valid RE2 regex"):
        parse_matcher("queue=~(a)\\1"), "backreferences are not RE2"
    with pytest.raises(MatcherError, match="at most 512"):
        parse_matcher("queue=" + "x" * (VALUE_MAX + 1))


def test_a_silence_cannot_match_everything() -> None:
    with pytest.raises(ValueError, match="must not match the empty string"):
        MatcherSet(matchers=[parse_matcher("queue=~.*"), parse_matcher("job_name!=x")])
    with pytest.raises(ValueError):
        MatcherSet(matchers=[])
    MatcherSet(matchers=[parse_matcher("queue=~.*"), parse_matcher("severity=warning")])
    assert not matches_all([], LABELS), "no matcher matches nothing"


def test_an_alert_s_labels() -> None:
    alert = make_alert(queue="emails", job_name="send", fingerprint="fp1", severity=Severity.WARNING)
    labels = alert_labels(alert, "pd")
    assert labels | {"source": "x"} == {
        "queue": "emails",
        "job_name": "send",
        "severity": "warning",
        "sink": "pd",
        "cause": "fp1",
        "source": "x",
    }
    assert labels["source"] == alert.dead_letter.source_key


def test_query_filters_as_amtool() -> None:
    held = [parse_matcher('queue=~"e.*"'), parse_matcher("severity=warning")]
    assert selects(held, [parse_matcher("queue=emails")])
    assert not selects(held, [parse_matcher("queue=reports")])
    assert selects(held, [parse_matcher("severity=warning"), parse_matcher('queue=~"e.*"')])
    assert not selects(held, [parse_matcher('queue=~"r.*"')])
    assert selects(held, [])


GLOB_CHARS = st.text(alphabet="ab-*?[]!", max_size=8)
NAMES = st.text(alphabet="ab-*?[]!", max_size=8)


@given(GLOB_CHARS, NAMES)
def test_a_0_2_0_queue_glob_as_a_regex_matches_what_fnmatch_matches(glob: str, name: str) -> None:
    assert (compiled(glob_to_regex(glob)).search(name) is not None) == fnmatch.fnmatchcase(name, glob)


@given(NAMES, NAMES)
def test_an_escaped_glob_matches_only_its_text(text: str, other: str) -> None:
    assert fnmatch.fnmatchcase(text, escape_glob(text))
    assert fnmatch.fnmatchcase(other, escape_glob(text)) == (other == text)


@given(st.text(max_size=40), st.text(max_size=40))
def test_equal_and_not_equal_are_opposites(value: str, text: str) -> None:
    eq, ne = Matcher(name="queue", op="=", value=value), Matcher(name="queue", op="!=", value=value)
    assert eq.matches({"queue": text}) != ne.matches({"queue": text})
