"""RQ test producer: a job function that raises (the worker records it in the FailedJobRegistry)."""

from __future__ import annotations


class CardDeclined(Exception):
    pass


def charge_card(order_id: int, *, token: str = "") -> None:
    raise CardDeclined(f"card declined for order {order_id}")


def sync_inventory(order_id: int, *, token: str = "") -> None:
    """The storm's outage (tests/test_storm_fleet.py): the database is down for every queue."""
    raise ConnectionRefusedError(f"postgres-primary:5432 refused connection (order {order_id})")
