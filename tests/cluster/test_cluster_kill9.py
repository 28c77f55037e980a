"""The kill -9 suite and the storm test, unchanged, on a local Redis Cluster (tests/cluster/conftest.py).

Each test is the single-server test itself, imported: only the fixtures differ.
"""

from tests.test_crash_safety import (
    test_kill9_mid_drain_loses_and_duplicates_nothing,
    test_restart_returns_own_processing_entries_before_claiming,
)
from tests.test_delivery_handoff_kill9 import test_kill9_mid_handoff_and_mid_delivery_loses_and_doubles_nothing
from tests.test_delivery_kill9 import test_kill9_mid_delivery_then_restart
from tests.test_failure_kill9_all import test_kill9_with_gateway_and_all_sinks_loses_nothing
from tests.test_storm_fleet import test_a_storm_through_two_replicas_pages_once_per_cause_and_delivers_every_job_once

__all__ = [
    "test_a_storm_through_two_replicas_pages_once_per_cause_and_delivers_every_job_once",
    "test_kill9_mid_delivery_then_restart",
    "test_kill9_mid_drain_loses_and_duplicates_nothing",
    "test_kill9_mid_handoff_and_mid_delivery_loses_and_doubles_nothing",
    "test_kill9_with_gateway_and_all_sinks_loses_nothing",
    "test_restart_returns_own_processing_entries_before_claiming",
]
