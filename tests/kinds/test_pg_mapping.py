"""How the PostgreSQL kinds read one row (unit tests of the mappers; the real rows are in test_pg_contract.py)."""

from __future__ import annotations

import pytest

from bridge.sources.pg_boss import error_of, member_of, split_member
from bridge.sources.pg_delayed_job import job_name
from bridge.sources.pg_rows import iso_of, quoted, time_of

ACTIVE_JOB = """--- !ruby/object:ActiveJob::QueueAdapters::DelayedJobAdapter::JobWrapper
job_data:
  job_class: ChargeCardJob
  job_id: 4f1d
  arguments:
  - 7
"""
PERFORMABLE = """--- !ruby/object:Delayed::PerformableMethod
object: !ruby/object:Invoice
  raw_attributes:
    id: 7
method_name: :deliver_later
args: []
"""


def test_pgboss_error_is_read_from_the_serialized_error_its_value_wrapper_or_text() -> None:
    assert error_of({"name": "InvoiceRejected", "message": "no", "stack": "…"}) == ("InvoiceRejected", "no")
    assert error_of({"value": {"message": "job failed by timeout in active state"}}) == (
        None,
        "job failed by timeout in active state",
    )
    assert error_of({"stack": "TypeError: x is undefined\n    at f"}) == ("TypeError", "x is undefined")
    assert error_of("plain words") == (None, "plain words")
    assert error_of(None) == (None, None)
    assert error_of({"name": 7, "message": ["x"]}) == (None, None)


def test_a_pgboss_member_holds_its_queue_whatever_the_queue_name() -> None:
    member = member_of("billing/eu:v2", "b0d7045c-3245-4b21-9406-b576af6620e2")
    assert split_member(member) == ("billing/eu:v2", "b0d7045c-3245-4b21-9406-b576af6620e2")


def test_delayed_job_names_the_job_class_from_the_handler_text_without_loading_it() -> None:
    assert job_name("--- !ruby/struct:ChargeCardJob\norder_id: 1\n") == "ChargeCardJob"
    assert job_name(ACTIVE_JOB) == "ChargeCardJob"
    assert job_name(PERFORMABLE) == "Invoice#deliver_later"
    assert job_name("--- !ruby/object:Gem::Installer\ni: x\n") == "Gem::Installer", "a name, never an object"
    assert job_name("not yaml at all: [") is None
    assert job_name(None) is None


def test_scores_are_exact_microseconds_and_identifiers_are_checked() -> None:
    assert time_of(1_733_377_880_757_760).isoformat() == "2024-12-05T05:51:20.757760+00:00"
    assert iso_of(None) is None and iso_of("x") is None
    assert quoted("pgboss") == '"pgboss"'
    with pytest.raises(ValueError):
        quoted('pgboss"; drop table x; --')
