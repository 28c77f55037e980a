"""RQ test producer: a job function that raises (the worker records it in the FailedJobRegistry)."""

from __future__ import annotations


class CardDeclined(Exception):
    pass


def charge_card(order_id: int, *, token: str = "") -> None:
    raise CardDeclined(f"card declined for order {order_id}")
