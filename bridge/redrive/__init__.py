"""One redrive (docs/design.md, "Redrive"): `dlq-bridge redrive`, the console's entry, group, bulk and
quarantine actions all move entries and close their incidents through `bridge.redrive.operation.Redrive`."""
