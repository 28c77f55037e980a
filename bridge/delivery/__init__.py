"""Delivery: routing, retries, the ledger and undeliverable records."""
